"""Make a synthetic extraction file for ingest timing, and optionally time it.

    python -m bench.make_ingest_file --rows 1000000 --out /tmp/ingest.parquet --time

``--time`` ingests the file into a fresh store with ``store.ingest.ingest_files``
and, in the same process, runs the bare baseline ``INSERT INTO extractions
SELECT * FROM read_parquet(...)`` into a second fresh store of the same schema.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import duckdb
from fieldtrust.ingest.extractions import ingest_files
from fieldtrust.store.connection import DUCKDB_CONFIG

from fieldtrust import store

_ROWS_SQL = """
SELECT
    'x' || lpad(i::VARCHAR, 9, '0')                                   AS extraction_id,
    'doc-' || (i // 6)::VARCHAR                                       AS doc_id,
    ['invoice', 'receipt_printed', 'receipt_handwritten', 'purchase_order'][1 + (i // 6) % 4]
                                                                      AS doc_type,
    CASE WHEN i % 10 = 0 THEN 'v2' ELSE 'v1' END                      AS form_version,
    ['total', 'tax', 'date', 'vendor', 'currency', 'number'][1 + i % 6] AS field,
    CASE WHEN i % 50 = 0 THEN NULL ELSE 'value ' || (i % 997)::VARCHAR END AS value,
    CASE WHEN i % 50 = 0 THEN 'null' ELSE 'present' END               AS value_status,
    ((i * 7919) % 1000) / 1000.0                                      AS confidence,
    'model-a'                                                         AS model,
    TIMESTAMP '2026-01-05' + to_seconds((i * 13) % (56 * 86400))      AS extracted_at,
    i % 97 = 0                                                        AS conflict
FROM range(?) t(i)
"""


def make_file(path: Path, rows: int, *, with_ids: bool = True) -> None:
    """Write ``rows`` synthetic extractions to ``path`` (Parquet)."""
    con = duckdb.connect(config=DUCKDB_CONFIG)
    query = con.sql(_ROWS_SQL, params=[rows])
    if not with_ids:
        query = query.project("* EXCLUDE (extraction_id)")
    query.write_parquet(str(path))


def _baseline_sql(con: duckdb.DuckDBPyConnection, path: Path) -> str:
    """The bare INSERT; a file without ids gets them as bare SQL would (one sha256)."""
    columns = con.sql("SELECT * FROM read_parquet(?) LIMIT 0", params=[str(path)]).columns
    derived = (
        ""
        if "extraction_id" in columns
        else ", sha256(concat_ws('|', doc_id, doc_type, field, model, extracted_at::VARCHAR))"
        " AS extraction_id"
    )
    return (
        f"INSERT INTO extractions BY NAME SELECT *{derived}, 'bench' AS batch_id"
        " FROM read_parquet(?)"
    )


def _timed(run: Callable[[], object]) -> tuple[float, float]:
    """Wall seconds and process CPU seconds (all DuckDB threads) of ``run()``."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def time_ingest(path: Path, repeat: int = 3) -> dict[str, list[tuple[float, float]]]:
    """(wall, CPU) seconds of ``ingest_files`` and of the bare INSERT, each into a fresh store.

    The two alternate ``repeat`` times in this process, so both see the same
    machine load. CPU time moves less than wall time on a busy machine.
    """
    runs: dict[str, list[tuple[float, float]]] = {"ingest_files": [], "bare INSERT": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            con = store.connect(Path(tmp) / f"ingest{i}.duckdb")
            runs["ingest_files"].append(_timed(partial(ingest_files, con, [path])))
            con.close()
            base = store.connect(Path(tmp) / f"baseline{i}.duckdb")
            sql = _baseline_sql(base, path)
            runs["bare INSERT"].append(_timed(partial(base.execute, sql, [str(path)])))
            base.close()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, default=Path("ingest.parquet"))
    parser.add_argument("--no-ids", action="store_true", help="Leave extraction_id out.")
    parser.add_argument("--time", action="store_true", help="Time ingest against the baseline.")
    parser.add_argument("--repeat", type=int, default=3, help="Timed runs of each.")
    args = parser.parse_args()
    make_file(args.out, args.rows, with_ids=not args.no_ids)
    print(f"wrote {args.rows:,} rows to {args.out}")
    if args.time:
        runs = time_ingest(args.out, args.repeat)
        for what, index in (("wall", 0), ("CPU", 1)):
            for name, pick in (("best", min), ("median", statistics.median)):
                ours = pick(r[index] for r in runs["ingest_files"])
                base = pick(r[index] for r in runs["bare INSERT"])
                print(
                    f"{what} {name} of {args.repeat}: ingest_files {ours:.2f} s,"
                    f" bare INSERT ... read_parquet {base:.2f} s, ratio {ours / base:.2f}"
                )


if __name__ == "__main__":
    main()
