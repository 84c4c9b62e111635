"""``python -m bench``: build each size's data once, time every case, write the report.

Every side of every case runs in its own forked child (:mod:`bench.isolate`),
so its peak memory is its own; the results of each size are kept in a JSON
file next to the report, and a later run of other sizes adds to it (the
report shows every size it holds, each with its own date and load).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench import cases, pages, report
from bench.generate import DEFAULT_ROOT, build_dataset, describe
from bench.isolate import ChildFailed, run_isolated
from fieldtrust.settings import Settings

DEFAULT_OUT = Path(__file__).resolve().parent / "RESULTS.md"
SEED = 7


def parse_size(text: str) -> int:
    """``20000``, ``20k``, ``1M``, ``2.5M`` -> rows."""
    value = text.strip().lower().replace("_", "").replace(",", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(value[-1:], 1)
    number = value[:-1] if scale != 1 else value
    try:
        rows = int(float(number) * scale)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not a row count like 1M or 20000") from exc
    if rows < 1000:
        raise argparse.ArgumentTypeError(f"{text!r}: use at least 1,000 rows")
    return rows


def size_label(rows: int) -> str:
    if rows % 1_000_000 == 0:
        return f"{rows // 1_000_000}M"
    if rows % 1_000 == 0:
        return f"{rows // 1_000}k"
    return f"{rows:,}"


def _say(message: str) -> None:
    print(f"[bench {dt.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def _summary(times: list[float], cpu: list[float]) -> dict[str, Any]:
    return {
        "times": times,
        "median": statistics.median(times),
        "min": min(times),
        "max": max(times),
        "cpu": cpu,
        "cpu_median": statistics.median(cpu),
    }


def _failure(exc: ChildFailed) -> str:
    """The last line of a child's traceback (or the timeout), for the report."""
    lines = [line for line in str(exc).strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else type(exc).__name__


def _side(case: cases.Case, which: str, ctx: cases.Context, runs: int, timeout: float
          ) -> dict[str, Any]:
    side = case.library if which == "library" else case.baseline
    load_before = os.getloadavg()[0]
    try:
        isolated = run_isolated(cases.time_side, side, ctx, runs, timeout=timeout)
    except ChildFailed as exc:
        _say(f"  {case.name} {which}: FAILED: {exc}")
        return {"label": side.label, "error": _failure(exc)}
    result = _summary(isolated.value["times"], isolated.value["cpu"])
    result.update(
        label=side.label, peak_rss=isolated.peak_rss, detail=isolated.value["detail"],
        load=[round(load_before, 2), round(os.getloadavg()[0], 2)],
    )
    _say(f"  {case.name} {which}: median {result['median']:.3f} s"
         f" (CPU {result['cpu_median']:.3f} s),"
         f" peak {isolated.peak_rss / 1e6:,.0f} MB")
    return result


def run_cases(ctx: cases.Context, names: list[str], runs: int, timeout: float
              ) -> dict[str, Any]:
    out = {}
    for case in cases.CASES:
        if case.name not in names:
            continue
        out[case.name] = {
            "title": case.title,
            "goal": case.goal.text(),
            "library": _side(case, "library", ctx, runs, timeout),
            "baseline": _side(case, "baseline", ctx, runs, timeout),
        }
    return out


def run_pages(ctx: cases.Context, names: list[str], runs: int, timeout: float
              ) -> dict[str, Any]:
    wanted = [page for page in pages.PAGES if page in names]
    if not wanted:
        return {}
    inputs = run_isolated(pages.resolve_inputs, ctx.store, ctx.settings, timeout=timeout).value
    out: dict[str, Any] = {}
    for page in wanted:
        try:
            warm = run_isolated(pages.time_page_warm, page, ctx.store, inputs, ctx.settings,
                                runs, timeout=timeout)
            cold_runs = [
                run_isolated(pages.time_page_cold, page, ctx.store, inputs, ctx.settings,
                             timeout=timeout)
                for _ in range(runs)
            ]
        except ChildFailed as exc:
            _say(f"  page {page}: FAILED: {exc}")
            out[page] = {"error": _failure(exc)}
            continue
        out[page] = {
            "warm": {**_summary(warm.value["times"], warm.value["cpu"]),
                     "peak_rss": warm.peak_rss,
                     "detail": warm.value["detail"]},
            "cold": {**_summary([r.value["times"][0] for r in cold_runs],
                                [r.value["cpu"][0] for r in cold_runs]),
                     "peak_rss": max(r.peak_rss for r in cold_runs),
                     "detail": cold_runs[0].value["detail"]},
        }
        _say(f"  page {page}: warm {out[page]['warm']['median']:.3f} s,"
             f" cold {out[page]['cold']['median']:.3f} s")
    return out


def run_size(rows: int, *, runs: int, data_root: Path, names: list[str], seed: int,
             timeout: float) -> dict[str, Any]:
    """Build (or reuse) one size's data and time every selected case on it."""
    _say(f"{size_label(rows)}: data (built once, then cached under {data_root})")
    started = time.perf_counter()
    dataset = run_isolated(build_dataset, rows, seed, data_root).value
    _say(f"{size_label(rows)}: data ready in {time.perf_counter() - started:.0f} s"
         f" ({dataset.labelled:,} labels)")
    ctx = cases.Context(
        rows=rows, store=dataset.store, parquet=dataset.parquet,
        work=dataset.folder / "work", settings=Settings(),
    )
    load_start = os.getloadavg()
    result = {
        "rows": rows,
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": runs,
        "dataset": describe(dataset),
        "cases": run_cases(ctx, names, runs, timeout),
        "pages": run_pages(ctx, names, runs, timeout),
        "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
    }
    return result


def _merged(before: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, Any]:
    """A size's results after a run of some of its cases: the new ones replace the old.

    Each case and page keeps the date and load of the run that measured it.
    """
    for group in ("cases", "pages"):
        for result in now[group].values():
            result["date"], result["load"] = now["date"], [now["load_start"], now["load_end"]]
    if before is None:
        return now
    merged = dict(now)
    for group in ("cases", "pages"):
        merged[group] = {**before.get(group, {}), **now[group]}
        order = [n for n in (*before.get(group, {}), *now[group])]
        merged[group] = {n: merged[group][n] for n in dict.fromkeys(order)}
    merged["commands"] = [*before.get("commands", [before.get("command", "")]),
                          *now["commands"]]
    return merged


def _load_results(path: Path) -> dict[str, Any]:
    if path.exists():
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded
    return {"sizes": {}}


def main(argv: list[str] | None = None) -> int:
    all_names = [c.name for c in cases.CASES] + list(pages.PAGES)
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark fieldtrust against baselines at 1M-10M extractions"
        " (docs/benchmarks.md).",
        epilog="Example: python -m bench --sizes 1M,3M,10M --runs 5",
    )
    parser.add_argument("--rows", type=parse_size, help="One size (default 1M).")
    parser.add_argument("--sizes", help="Several sizes, comma separated: 1M,3M,10M.")
    parser.add_argument("--runs", type=int, default=5, help="Timed runs per side (default 5).")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="Markdown report (results JSON beside it).")
    parser.add_argument("--data", type=Path, default=DEFAULT_ROOT,
                        help="Cache of generated data and stores.")
    parser.add_argument("--seed", type=int, default=SEED, help="Generator seed.")
    parser.add_argument("--cases", default=",".join(all_names),
                        help=f"Subset of: {','.join(all_names)}.")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="Seconds one side may run before it is killed (default 1800).")
    parser.add_argument("--fresh", action="store_true",
                        help="Forget results of sizes not run now.")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    sizes = [parse_size(s) for s in args.sizes.split(",")] if args.sizes else [
        args.rows or 1_000_000
    ]
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = sorted(set(names) - set(all_names))
    if unknown:
        parser.error(f"unknown case {unknown[0]!r}; choose from {', '.join(all_names)}")
    logging.getLogger("streamlit").setLevel(logging.ERROR)

    results_path = args.out.with_suffix(".json")
    results = {"sizes": {}} if args.fresh else _load_results(results_path)
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    for rows in sizes:
        fresh = run_size(
            rows, runs=args.runs, data_root=args.data, names=names, seed=args.seed,
            timeout=args.timeout,
        )
        fresh["commands"] = [command.strip()]
        results["sizes"][str(rows)] = _merged(results["sizes"].get(str(rows)), fresh)
        results["machine"] = report.machine()
        args.out.parent.mkdir(parents=True, exist_ok=True)
        results_path.write_text(json.dumps(results, indent=1, default=str))
        args.out.write_text(report.render(results))
        _say(f"wrote {args.out}")
    return 0
