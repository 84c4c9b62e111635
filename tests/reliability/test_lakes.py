"""A lake is counted once, read by its literal names, and a broken file is one line (issue 25).

Faults 2 (a Delta table compacted with OPTIMIZE was counted again in full), 3
(lake file names read as DuckDB globs), 4 (a store holding ingested rows
switched to a lake holding them counted them twice) and 16 (tracebacks on
broken, linked, drifting or vanishing lake files and a missing Spark table).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.ingest.sources import SourceConfig, open_source, refresh_source
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.store import rollup

from fieldtrust.cli.main import cli
from fieldtrust.errors import Refused, SourceError
from tests.conftest import file_fingerprint
from tests.ingest.lake import fresh_store, lake_rows, write_delta_lake, write_parquet_lake


def _total(con: Any) -> int:
    return int(sum(rollup.population_counts(con)["n"].to_pylist()))


def _refresh(db: Path, kind: str, path: Path, *args: str) -> Any:
    env = {"FIELDTRUST_SOURCE": kind, "FIELDTRUST_SOURCE_PATH": str(path)}
    return CliRunner(env=env).invoke(cli, ["--db", str(db), "refresh", "--quiet", *args])


# --- 2. Delta: counted by the files each version adds and removes -------------------------------


def test_a_compacted_delta_table_is_counted_once(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    folder = tmp_path / "delta"
    for part in range(3):  # three appends, 30 rows in one week
        write_delta_lake(lake_rows(10, weeks=1, seed=part, prefix=f"a{part}"), folder)
    con = fresh_store(tmp_path / "s.duckdb")
    source = open_source(SourceConfig("delta", str(folder)))
    assert refresh_source(con, source).rows_counted == 30

    DeltaTable(str(folder)).optimize.compact()  # routine maintenance: 3 files become 1
    compacted = refresh_source(con, source)
    assert (compacted.rows_counted, compacted.files_read, compacted.files_rewritten) == (0, 0, 1)
    assert compacted.missing_files == []  # files a compaction removed are not "gone"
    assert _total(con) == 30
    assert refresh_source(con, source).refresh_id is None  # nothing new since

    # New rows, compacted with the old ones before anyone refreshed: counted once.
    write_delta_lake(lake_rows(10, weeks=1, seed=7, prefix="b"), folder)
    DeltaTable(str(folder)).optimize.compact()
    later = refresh_source(con, source)
    assert (later.rows_counted, later.files_read, later.files_rewritten) == (10, 1, 1)
    assert _total(con) == 40
    assert rollup.is_current(con)

    # The draw reads what the table holds now: each row once.
    drawn = draw_sample(con, "2026-W02", seed=1, actor="quinn", source=source)
    assert drawn.n_population == 40
    source.close()
    con.close()


def test_a_delta_delete_takes_its_rows_out_of_the_counts(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    folder = tmp_path / "delta"
    write_delta_lake(lake_rows(20, weeks=1, prefix="a"), folder)
    con = fresh_store(tmp_path / "s.duckdb")
    source = open_source(SourceConfig("delta", str(folder)))
    refresh_source(con, source)
    # Delta rewrites the file without the row: a version removing 20 rows and adding 19.
    DeltaTable(str(folder)).delete("extraction_id = 'a000003'")
    result = refresh_source(con, source)
    assert (result.rows_counted, result.rows_removed, result.missing_files) == (19, 20, [])
    assert _total(con) == 19
    assert rollup.is_current(con)
    assert draw_sample(con, "2026-W02", seed=1, actor="quinn", source=source).n_population == 19
    source.close()
    con.close()


def test_a_table_counted_before_versions_were_recorded_reads_its_whole_log(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable

    folder = tmp_path / "delta"
    for part in range(2):
        write_delta_lake(lake_rows(10, weeks=1, seed=part, prefix=f"a{part}"), folder)
    con = fresh_store(tmp_path / "s.duckdb")
    source = open_source(SourceConfig("delta", str(folder)))
    refresh_source(con, source)
    # As a refresh made before migration 0030 left it: files counted, no version.
    con.execute("UPDATE source_refreshes SET source_version = NULL")
    DeltaTable(str(folder)).optimize.compact()
    write_delta_lake(lake_rows(5, weeks=1, seed=5, prefix="b"), folder)
    result = refresh_source(con, source)
    assert (result.rows_counted, result.files_rewritten) == (5, 1)
    assert _total(con) == 25
    source.close()
    con.close()


# --- 3. Parquet: literal names ------------------------------------------------------------------


@pytest.mark.parametrize("folder_name", ["lake", "lake[1]", "lake*"])
def test_parquet_file_and_folder_names_are_read_as_written(folder_name: str,
                                                           tmp_path: Path) -> None:
    folder = tmp_path / folder_name
    folder.mkdir()
    pq.write_table(lake_rows(10, weeks=1, prefix="a"), folder / "p[1].parquet")
    pq.write_table(lake_rows(5, weeks=1, prefix="b"), folder / "p1.parquet")
    pq.write_table(lake_rows(3, weeks=1, prefix="c"), folder / "q*x?.parquet")
    pq.write_table(lake_rows(2, weeks=1, prefix="d"), folder / "q1x2.parquet")
    con = fresh_store(tmp_path / "s.duckdb")
    source = open_source(SourceConfig("parquet", str(folder)))
    result = refresh_source(con, source)
    assert (result.files_read, result.rows_counted) == (4, 20)
    assert _total(con) == 20
    drawn = draw_sample(con, "2026-W02", seed=1, actor="quinn", source=source)
    assert drawn.n_population == 20
    source.close()
    con.close()


# --- 4. a store holding ingested rows does not also count a lake --------------------------------


@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_a_store_holding_ingested_rows_refuses_to_count_a_lake(kind: str, tmp_path: Path) -> None:
    rows = lake_rows(400, weeks=2)
    db = tmp_path / "s.duckdb"
    con = fresh_store(db)
    ingest_table(con, rows.slice(0, 300), source="rows")
    con.close()
    folder = (write_parquet_lake if kind == "parquet" else write_delta_lake)(rows, tmp_path / "l")
    before = file_fingerprint(db)
    result = _refresh(db, kind, folder)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {db} holds 300 ingested extractions: counting the"
                                    f" {kind} source")
    assert "a store of its own" in result.stderr
    assert file_fingerprint(db) == before


def test_a_store_counting_one_lake_refuses_another_and_refuses_ingest(tmp_path: Path) -> None:
    rows = lake_rows(200, weeks=1)
    first = write_parquet_lake(rows, tmp_path / "first")
    second = write_delta_lake(rows, tmp_path / "second")
    con = fresh_store(tmp_path / "s.duckdb")
    refresh_source(con, open_source(SourceConfig("parquet", str(first))))
    before = _total(con)
    with pytest.raises(Refused, match=r"already counts parquet:.*first; counting delta:"):
        refresh_source(con, open_source(SourceConfig("delta", str(second))))
    with pytest.raises(Refused, match=r"counts the lake source parquet:.*first: ingesting"):
        ingest_table(con, rows, source="again")
    assert _total(con) == before == 200
    con.close()


# --- 16. broken lake files ----------------------------------------------------------------------


def _drift(column: str, values: Any) -> Any:
    def make(folder: Path) -> None:
        rows = lake_rows(10, weeks=1, prefix="z")
        pq.write_table(rows.set_column(rows.column_names.index(column), column,
                                       pa.array(values(rows[column].to_pylist()))),
                       folder / "later.parquet")  # after good.parquet, which sets the types
    return make


def _link(folder: Path, target: Path) -> None:
    (folder / "link.parquet").symlink_to(target)


BROKEN: dict[str, Any] = {
    "garbage bytes": lambda f: (f / "bad.parquet").write_bytes(os.urandom(600)),
    "a truncated file": lambda f: (f / "bad.parquet").write_bytes(
        (f / "good.parquet").read_bytes()[:400]),
    "a zero-byte file": lambda f: (f / "bad.parquet").write_bytes(b""),
    "a dangling link": lambda f: _link(f, f / "nowhere.parquet"),
    "a link to a text file": lambda f: (_link(f, f / "notes.txt"),
                                        (f / "notes.txt").write_text("hello")),
    "extracted_at as text": _drift("extracted_at", lambda v: [str(x) for x in v]),
    "extracted_at as int64": _drift(
        "extracted_at", lambda v: pa.array([int(x.timestamp()) for x in v], pa.int64())),
    "a list column": _drift("doc_type", lambda v: [[x] for x in v]),
    "a struct column": _drift("confidence", lambda v: [{"c": x} for x in v]),
}
#: What the message names about each file (besides the file itself).
SAID = {
    "garbage bytes": "is not a Parquet file", "a truncated file": "is not a Parquet file",
    "a zero-byte file": "is empty", "a dangling link": "cannot be read",
    "a link to a text file": "is not a Parquet file",
    "extracted_at as text": "column extracted_at is string here and timestamp",
    "extracted_at as int64": "column extracted_at is int64 here and timestamp",
    "a list column": "column doc_type is a list",
    "a struct column": "column confidence is a struct",
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_a_broken_lake_file_is_one_line_naming_it(case: str, tmp_path: Path) -> None:
    folder = tmp_path / "lake"
    folder.mkdir()
    pq.write_table(lake_rows(30, weeks=1), folder / "good.parquet")
    BROKEN[case](folder)
    db = tmp_path / "s.duckdb"
    fresh_store(db).close()
    before = file_fingerprint(db)
    result = _refresh(db, "parquet", folder)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: source parquet:{folder}: "), lines
    assert SAID[case] in lines[0]
    assert "Traceback" not in result.output and "the store" not in lines[0]
    assert file_fingerprint(db) == before


def test_a_file_removed_between_listing_and_reading_is_the_sources_fault(tmp_path: Path) -> None:
    folder = tmp_path / "lake"
    folder.mkdir()
    for part in range(3):
        pq.write_table(lake_rows(10, weeks=1, prefix=f"p{part}"), folder / f"p{part}.parquet")
    con = fresh_store(tmp_path / "s.duckdb")
    source = open_source(SourceConfig("parquet", str(folder)))

    def remove_one(stage: str, done: int, total: int) -> None:
        if stage.startswith("counting"):  # listed, not yet read
            (folder / "p2.parquet").unlink(missing_ok=True)

    with pytest.raises(SourceError, match=r"p2.parquet .*run the command again"):
        refresh_source(con, source, progress=remove_one)
    assert _total(con) == 0
    source.close()
    con.close()


@pytest.mark.xdist_group("spark")  # the worker whose Spark session is already running
def test_spark_reads_names_as_written_and_names_a_missing_table(
    spark_master: str, tmp_path: Path
) -> None:
    folder = tmp_path / "lake[1]"
    folder.mkdir()
    pq.write_table(lake_rows(10, weeks=1, prefix="a"), folder / "p[1].parquet")
    pq.write_table(lake_rows(5, weeks=1, prefix="b"), folder / "p1.parquet")
    con = fresh_store(tmp_path / "s.duckdb")
    source = open_source(SourceConfig("spark", str(folder), spark=spark_master))
    assert refresh_source(con, source).rows_counted == 15
    con.close()
    db = tmp_path / "t.duckdb"
    fresh_store(db).close()
    result = CliRunner(env={"FIELDTRUST_SOURCE": "spark", "FIELDTRUST_SOURCE_SPARK": spark_master,
                            "FIELDTRUST_SOURCE_PATH": "table:no_such_table"}).invoke(
        cli, ["--db", str(db), "refresh", "--quiet"])
    assert result.exit_code == 2, result.output
    assert result.stderr.strip().splitlines() == [
        "error: source spark:table:no_such_table: there is no table no_such_table in Spark's"
        " catalog"
    ]
