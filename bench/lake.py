"""``python -m bench.lake --rows 10M``: a lake source against bare DuckDB over the same files.

Builds a Hive-partitioned Parquet lake of 8 ISO weeks in SQL (minutes at
100M rows; in a child process, so its memory is not this one's), then times,
in this one process and so on the same load:

- a full ``refresh`` against a bare ``GROUP BY`` of the same counts over the
  same files: the five columns a rollup reads (doc_type, field, form_version,
  confidence, extracted_at), with no validity checks (goal <= 1.5x). The
  refresh also reads extraction_id and doc_id, which the ingest rules check;
- refreshing one new (9th) week against the full refresh's per-week share
  (goal about 1x);
- the weekly draw from the lake against a bare per-cell ``ORDER BY md5(...)``
  top-n over the same week (goal <= 2x);
- peak RSS of the process after fieldtrust's refreshes and draw (goal < 2 GB),
  and at the end (with the bare top-n);
- the dashboard pages' reads (:mod:`bench.pages`) on the store the lake was
  refreshed into, with the draw week labelled: warm and cold, each in a fresh
  child process (goal < 1 s warm, < 3 s cold);
- with ``--spark``, the same refresh and draw by a local Spark session (no goal).

Times are wall clock; CPU seconds (all threads of the process) are given
beside them, as the machine is shared.

Results print as one line each; ``--json`` prints them as one object.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from bench.generate import DEFAULT_ROOT
from bench.run import parse_size

WEEKS = 8
FIRST_MONDAY = "2026-01-05"
DRAW_WEEK = "2026-W04"
SEED = 20261130
#: DuckDB's memory while it writes the lake (in a child process).
BUILD_MEMORY = "4GB"
#: Items of the draw week labelled before the pages are timed.
LABELS = 2000


def _bare() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB without the progress bar DuckDB draws on stdout."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


def _lake_sql(rows: int, first: int, count: int, week_offset: int) -> str:
    # Rows in time order, so each week is one partition and Parquet's min/max
    # statistics let a week's reader skip the other weeks' row groups.
    span_us = WEEKS * 7 * 86_400 * 1_000_000
    return f"""
    SELECT 'e' || lpad(CAST(i AS VARCHAR), 10, '0') AS extraction_id,
           'd' || CAST(i // 4 AS VARCHAR) AS doc_id,
           ['invoice', 'receipt', 'bank_statement', 'id_card'][1 + (hash(i) % 4)::INTEGER]
               AS doc_type,
           CASE WHEN hash(i + 1) % 20 = 0 THEN 'v2' ELSE 'v1' END AS form_version,
           ['total', 'tax', 'date', 'vendor', 'iban'][1 + (hash(i + 2) % 5)::INTEGER] AS field,
           CAST(i % 1000 AS VARCHAR) || '.00' AS value,
           round(1 - pow((hash(i + 3) % 1000000) / 1e6, 4), 4) AS confidence,
           TIMESTAMP '{FIRST_MONDAY}' + INTERVAL ({week_offset} * 7) DAY
               + to_microseconds(CAST(CAST(i - {first} AS HUGEINT) * {span_us} // {rows} AS BIGINT))
               AS extracted_at
    FROM range({first}, {first + count}) t(i)
    """


def build_lake(folder: Path, rows: int) -> None:
    """``rows`` extractions over 8 weeks, partitioned ``week=2026-W02/...``."""
    con = _bare()
    con.execute(f"SET memory_limit = '{BUILD_MEMORY}'")  # the machine is shared
    con.execute(
        f"COPY (SELECT *, strftime(extracted_at, '%G-W%V') AS week"
        f" FROM ({_lake_sql(rows, 0, rows, 0)})) TO '{folder}'"
        " (FORMAT parquet, PARTITION_BY (week), ROW_GROUP_SIZE 122880)"
    )
    con.close()


def add_week(folder: Path, rows: int) -> None:
    """A 9th week of ``rows / 8`` extractions (new ids), as a new partition."""
    share = rows // WEEKS
    con = _bare()
    con.execute(f"SET memory_limit = '{BUILD_MEMORY}'")
    con.execute(
        f"COPY (SELECT *, strftime(extracted_at, '%G-W%V') AS week"
        f" FROM ({_lake_sql(rows, rows, share, WEEKS)})) TO '{folder}'"
        " (FORMAT parquet, PARTITION_BY (week), APPEND)"
    )
    con.close()


def in_child(work: Any, *args: Any) -> None:
    """``work(*args)`` in a fresh (spawned) process: its memory is not this process's."""
    child = multiprocessing.get_context("spawn").Process(target=work, args=args)
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"{work.__name__} failed in its process (exit {child.exitcode})")


def _timed(work: Any) -> tuple[float, Any]:
    """Wall seconds of ``work()`` and its result; the CPU seconds go to :data:`CPU`."""
    start, cpu = time.perf_counter(), time.process_time()
    result = work()
    CPU.append(time.process_time() - cpu)
    return time.perf_counter() - start, result


#: CPU seconds (every thread of this process) of each :func:`_timed` call, in order.
CPU: list[float] = []


def bare_group_by(folder: Path, weeks: int) -> float:
    """The rollup's counts by one plain GROUP BY over the same files and columns, unchecked.

    Grouped as the refresh groups (a week by its Monday), so the two differ only
    by the refresh's checks and its writing into the store.
    """
    files = sorted(str(p) for p in folder.glob("week=*/*.parquet"))
    con = _bare()
    con.execute("SET TimeZone = 'UTC'")
    seconds, _ = _timed(lambda: con.sql(
        "SELECT doc_type, field, form_version,"
        " CAST(date_trunc('week', extracted_at) AS DATE) AS week_start,"
        " floor(confidence * 200 + 1e-9)::SMALLINT AS k, count(*), sum(confidence),"
        " min(extracted_at) FROM read_parquet($files, hive_partitioning = true)"
        " GROUP BY ALL", params={"files": files}).to_arrow_table())
    con.close()
    return seconds


def bare_top_n(folder: Path, per_cell: dict[str, int]) -> float:
    """The week's rows ranked by md5 within doc_type x field x band, the first n kept."""
    from fieldtrust.store.weeks import Week

    start, end = Week(DRAW_WEEK).bounds()
    files = sorted(str(p) for p in folder.glob("week=*/*.parquet"))
    con = _bare()
    con.execute("SET TimeZone = 'UTC'")
    n = max(per_cell.values()) if per_cell else 100
    seconds, _ = _timed(lambda: con.sql(
        "SELECT * FROM read_parquet($files, hive_partitioning = true)"
        " WHERE extracted_at >= $start AND extracted_at < $end"
        " QUALIFY row_number() OVER (PARTITION BY doc_type, field,"
        " CASE WHEN confidence < 0.8 THEN 0 WHEN confidence < 0.9 THEN 1"
        " WHEN confidence < 0.95 THEN 2 ELSE 3 END"
        " ORDER BY md5($seed || ':' || $week || ':' || extraction_id)) <= $n",
        params={"files": files, "start": start, "end": end, "seed": str(SEED),
                "week": DRAW_WEEK, "n": n}).to_arrow_table())
    con.close()
    return seconds


def _store(path: Path) -> duckdb.DuckDBPyConnection:
    """A new store with the demo's people, alice its one reviewer (quinn draws the sample)."""
    from fieldtrust import store
    from fieldtrust.demo.users import grant_demo_roles

    con = store.connect(path)
    grant_demo_roles(con, ("alice",))
    return con


def label_sample(con: duckdb.DuckDBPyConnection, sample_id: str, limit: int) -> int:
    """Verdicts on the first ``limit`` items of a sample (wrong half the time below 0.75)."""
    from fieldtrust.labels.verdicts import record_verdict
    from fieldtrust.sampling.samples import sample_items

    items = sample_items(con, sample_id).to_pylist()[:limit]
    for item in items:
        digest = hashlib.md5(item["extraction_id"].encode(), usedforsecurity=False).digest()
        right = item["confidence"] >= 0.75 or digest[0] % 2 == 0
        record_verdict(
            con, actor="alice", extraction_id=item["extraction_id"],
            verdict="correct" if right else "incorrect",
            corrected_value=None if right else "0.00",
            error_type=None if right else "misread_characters",
        )
    return len(items)


def time_pages(store_path: Path, runs: int) -> dict[str, Any]:
    """:func:`bench.run.run_pages` on ``store_path``, in a fresh process (no DuckDB open yet)."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.lake", "--pages-of", str(store_path), "--runs", str(runs)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pages failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout)


def _pages_of(store_path: Path, runs: int) -> int:
    from bench import pages
    from bench.cases import Context
    from bench.run import run_pages
    from fieldtrust.settings import Settings

    ctx = Context(rows=0, store=store_path, parquet=store_path, work=store_path.parent,
                  settings=Settings())
    out = run_pages(ctx, list(pages.PAGES), runs, timeout=900)
    print(json.dumps(out, default=str))
    return 0


def run_engine(kind: str, folder: Path, work: Path, rows: int, spark: str) -> dict[str, Any]:
    """Full refresh, one week's refresh, and the draw, on one engine."""
    from fieldtrust.ingest.sources import SourceConfig, open_source, refresh_source
    from fieldtrust.sampling.draw import draw_sample

    con = _store(work / f"{kind}.duckdb")
    source = open_source(SourceConfig(kind, str(folder), spark=spark))
    full, refreshed = _timed(lambda: refresh_source(con, source))
    draw, sample = _timed(lambda: draw_sample(con, DRAW_WEEK, seed=SEED, actor="quinn",
                                               source=source))
    cells = {c["cell"]: c["n_sample"] for c in sample.cells.to_pylist()}
    labelled = label_sample(con, sample.sample_id, LABELS) if kind == "parquet" else 0
    in_child(add_week, folder, rows)
    week, again = _timed(lambda: refresh_source(con, source))
    ids = sorted(r[0] for r in con.execute(
        "SELECT extraction_id FROM audit_items WHERE sample_id = ?", [sample.sample_id]
    ).fetchall())
    source.close()
    con.close()
    for extra in folder.glob(f"week=2026-W{2 + WEEKS:02d}"):
        shutil.rmtree(extra)
    return {
        "refresh_s": full, "rows_counted": refreshed.rows_counted,
        "new_week_s": week, "new_week_rows": again.rows_counted,
        "draw_s": draw, "n_sample": sample.n_sample, "cells": len(cells),
        "_cells": cells,
        "sample_ids_md5": hashlib.md5("\n".join(ids).encode()).hexdigest(),
        "labelled": labelled, "store": str(work / f"{kind}.duckdb"),
        "refresh_cpu_s": CPU[-3], "draw_cpu_s": CPU[-2], "new_week_cpu_s": CPU[-1],
    }


def _markdown(results: dict[str, Any]) -> str:
    duck, spark = results["duckdb"], results.get("spark")
    rows = f"{results['rows'] / 1e6:g}M"
    load = f"{results['load'][0]:.1f}–{results['load_end'][0]:.1f}"
    share = duck["refresh_s"] / WEEKS
    bare, bare_cpu = results["bare_group_by_s"], results["bare_group_by_cpu_s"]
    top, top_cpu = results["bare_top_n_s"], results["bare_top_n_cpu_s"]
    lines = [
        f"| {rows} | full refresh vs bare GROUP BY | {duck['refresh_s']:.2f} s"
        f" (CPU {duck['refresh_cpu_s']:.2f} s) | {bare:.2f} s (CPU {bare_cpu:.2f} s) |"
        f" {duck['refresh_s'] / bare:.2f} (CPU {duck['refresh_cpu_s'] / bare_cpu:.2f})"
        f" | <= 1.5 | {load} |",
        f"| {rows} | one new week vs refresh / 8 | {duck['new_week_s']:.2f} s"
        f" (CPU {duck['new_week_cpu_s']:.2f} s) | {share:.2f} s"
        f" (CPU {duck['refresh_cpu_s'] / WEEKS:.2f} s) | {duck['new_week_s'] / share:.2f}"
        f" (CPU {duck['new_week_cpu_s'] / (duck['refresh_cpu_s'] / WEEKS):.2f}) | ~ 1 | {load} |",
        f"| {rows} | draw {DRAW_WEEK} vs bare md5 top-n per cell | {duck['draw_s']:.2f} s"
        f" (CPU {duck['draw_cpu_s']:.2f} s) | {top:.2f} s (CPU {top_cpu:.2f} s) |"
        f" {duck['draw_s'] / top:.2f} (CPU {duck['draw_cpu_s'] / top_cpu:.2f})"
        f" | <= 2 | {load} |",
        f"| {rows} | peak RSS after refresh, draw, new week | {results['peak_rss_mb']:.0f} MB |"
        f" with bare top-n: {results['peak_rss_all_mb']:.0f} MB | | < 2 GB | {load} |",
    ]
    for page, timing in results.get("pages", {}).items():
        if "error" in timing:
            lines.append(f"| {rows} | page {page} (lake store) | failed | | | | {load} |")
            continue
        warm, cold = timing["warm"], timing["cold"]
        lines.append(
            f"| {rows} | page {page} (lake store): warm, cold | {warm['median']:.3f} s,"
            f" {cold['median']:.3f} s | | | < 1 s, < 3 s | {load} |"
        )
    if spark:
        lines.append(
            f"| {rows} | Spark local: refresh, new week, draw | {spark['refresh_s']:.1f} s,"
            f" {spark['new_week_s']:.1f} s, {spark['draw_s']:.1f} s | DuckDB as above |"
            f" same ids: {spark['sample_ids_md5'] == duck['sample_ids_md5']} | none | {load} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lake", description=__doc__)
    parser.add_argument("--rows", type=parse_size, default=parse_size("10M"))
    parser.add_argument("--spark", action="store_true", help="Also time a local Spark.")
    parser.add_argument("--spark-master", default="local[2]")
    parser.add_argument("--runs", type=int, default=3, help="Timed runs of each page.")
    parser.add_argument("--no-pages", action="store_true", help="Leave the pages out.")
    parser.add_argument("--keep", action="store_true", help="Keep the generated lake.")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--markdown", action="store_true",
                        help="Print the rows of bench/RESULTS.md's lake section.")
    parser.add_argument("--pages-of", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.pages_of:
        return _pages_of(args.pages_of, args.runs)

    folder = DEFAULT_ROOT / f"lake-{args.rows}"
    if folder.exists():
        shutil.rmtree(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    build_s, _ = _timed(lambda: in_child(build_lake, folder, args.rows))
    results: dict[str, Any] = {
        "rows": args.rows, "build_s": build_s, "load": os.getloadavg(), "cpus": os.cpu_count(),
        "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "baseline": "bare DuckDB, this process, the same files: GROUP BY of the rollup's five"
                    " columns (no checks); md5 top-n per doc_type x field x band of the week",
    }
    try:
        with tempfile.TemporaryDirectory(dir=DEFAULT_ROOT) as work:
            results["bare_group_by_s"] = bare_group_by(folder, WEEKS)
            results["bare_group_by_cpu_s"] = CPU[-1]
            results["duckdb"] = run_engine("parquet", folder, Path(work), args.rows, "")
            results["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            results["bare_top_n_s"] = bare_top_n(folder, results["duckdb"].pop("_cells"))
            results["bare_top_n_cpu_s"] = CPU[-1]
            results["peak_rss_all_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            if not args.no_pages:
                results["pages"] = time_pages(Path(results["duckdb"]["store"]), args.runs)
            if args.spark:
                results["spark"] = run_engine("spark", folder, Path(work), args.rows,
                                              args.spark_master)
                results["spark"].pop("_cells")
    finally:
        if not args.keep:
            shutil.rmtree(folder)
    results["load_end"] = os.getloadavg()
    duck = results["duckdb"]
    results["ratios"] = {
        "refresh / bare group by (goal <= 1.5)": duck["refresh_s"] / results["bare_group_by_s"],
        "refresh / bare group by, CPU": duck["refresh_cpu_s"] / results["bare_group_by_cpu_s"],
        "new week / (refresh / 8) (goal ~ 1)": duck["new_week_s"] / (duck["refresh_s"] / WEEKS),
        "new week / (refresh / 8), CPU":
            duck["new_week_cpu_s"] / (duck["refresh_cpu_s"] / WEEKS),
        "draw / bare md5 top-n (goal <= 2)": duck["draw_s"] / results["bare_top_n_s"],
        "draw / bare md5 top-n, CPU": duck["draw_cpu_s"] / results["bare_top_n_cpu_s"],
    }
    if args.json:
        print(json.dumps(results, indent=2, default=str))
        return 0
    if args.markdown:
        print(_markdown(results))
        return 0
    print(f"lake: {args.rows:,} rows, 8 weeks, built in {build_s:.1f} s;"
          f" load {results['load'][0]:.2f} at the start, {results['load_end'][0]:.2f} at the end,"
          f" on {results['cpus']} cpus")
    print(f"baseline: {results['baseline']}")
    print(f"bare group by {results['bare_group_by_s']:.2f} s"
          f" (CPU {results['bare_group_by_cpu_s']:.2f} s), bare md5 top-n"
          f" {results['bare_top_n_s']:.2f} s (CPU {results['bare_top_n_cpu_s']:.2f} s)")
    for engine in ("duckdb", "spark"):
        if engine in results:
            r = results[engine]
            print(f"{engine}: refresh {r['refresh_s']:.2f} s (CPU {r['refresh_cpu_s']:.2f} s),"
                  f" new week {r['new_week_s']:.2f} s, draw {r['draw_s']:.2f} s"
                  f" (CPU {r['draw_cpu_s']:.2f} s; {r['n_sample']} items,"
                  f" ids {r['sample_ids_md5']})")
    for name, ratio in results["ratios"].items():
        print(f"{name}: {ratio:.2f}")
    print(f"peak RSS {results['peak_rss_mb']:.0f} MB after refresh and draw (goal < 2048),"
          f" {results['peak_rss_all_mb']:.0f} MB with the bare top-n")
    for page, timing in results.get("pages", {}).items():
        if "error" in timing:
            print(f"page {page}: FAILED {timing['error']}")
            continue
        print(f"page {page}: warm {timing['warm']['median']:.3f} s, cold"
              f" {timing['cold']['median']:.3f} s (goal < 1 s warm, < 3 s cold)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
