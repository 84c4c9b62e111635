"""Validated ingest: formats, every rule and its message, atomicity, idempotence, time zones."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fieldtrust.ingest.extractions import IngestResult, ingest_files, ingest_table

from fieldtrust import store
from fieldtrust.errors import ValidationError
from tests.conftest import named_cases, table_fingerprint

GOOD: list[dict[str, Any]] = [
    {
        "extraction_id": "x1",
        "doc_id": "d1",
        "doc_type": "invoice",
        "form_version": "v1",
        "field": "total",
        "value": "12.50",
        "value_status": "present",
        "confidence": "0.93",
        "model": "m1",
        "extracted_at": "2026-01-05T10:00:00Z",
        "conflict": "false",
    },
    {
        "extraction_id": "x2",
        "doc_id": "d1",
        "doc_type": "invoice",
        "form_version": "v1",
        "field": "tax",
        "value": "",
        "value_status": "null",
        "confidence": "0.5",
        "model": "m1",
        "extracted_at": "2026-01-05T10:00:00Z",
        "conflict": "no",
    },
    {
        "extraction_id": "x3",
        "doc_id": "d2",
        "doc_type": "receipt",
        "form_version": "v2",
        "field": "date",
        "value": "2026-01-01",
        "value_status": "unclear",
        "confidence": "1",
        "model": "m2",
        "extracted_at": "2026-01-06T09:30:00+02:00",
        "conflict": "yes",
    },
]


@pytest.fixture(scope="module")
def holding(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """One store holding some rows, shared by the tests that only see files rejected.

    A rejection must leave it exactly as it was, which each test checks, so
    sharing it is safe and saves building a store per case.
    """
    folder = tmp_path_factory.mktemp("holding")
    con = store.connect(folder / "store.duckdb")
    ingest_files(con, [write_csv(folder / "seed.csv", [{**GOOD[0], "extraction_id": "seed"}])])
    yield con
    con.close()


#: What GOOD becomes in the store, ordered by extraction_id.
STORED = [
    ("x1", "d1", "invoice", "v1", "total", "12.50", "present", 0.93, "m1",
     dt.datetime(2026, 1, 5, 10), False),
    ("x2", "d1", "invoice", "v1", "tax", None, "null", 0.5, "m1",
     dt.datetime(2026, 1, 5, 10), False),
    ("x3", "d2", "receipt", "v2", "date", "2026-01-01", "unclear", 1.0, "m2",
     dt.datetime(2026, 1, 6, 7, 30), True),
]  # fmt: skip

STORED_SQL = (
    "SELECT extraction_id, doc_id, doc_type, form_version, field, value, value_status,"
    " confidence, model, extracted_at, conflict FROM extractions ORDER BY extraction_id"
)


def write_csv(path: Path, rows: list[dict[str, Any]], columns: list[str] | None = None) -> Path:
    columns = columns or list(rows[0])
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else row.get(c) for c in columns])
    return path


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def typed_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """GOOD-like text rows with native types, as a Parquet or Arrow source has them."""
    out = []
    for row in rows:
        typed = dict(row)
        typed["confidence"] = float(row["confidence"])
        typed["extracted_at"] = dt.datetime.fromisoformat(row["extracted_at"]).astimezone(dt.UTC)
        typed["conflict"] = row["conflict"] in ("true", "yes", "1")
        typed["value"] = row["value"] or None
        out.append(typed)
    return out


def write_parquet(path: Path, rows: list[dict[str, Any]], **options: Any) -> Path:
    pq.write_table(pa.Table.from_pylist(typed_rows(rows)), path, **options)
    return path


WRITERS: dict[str, Callable[[Path, list[dict[str, Any]]], Path]] = {
    "csv": write_csv,
    "jsonl": write_jsonl,
    "parquet": write_parquet,
}


def with_row(changes: dict[str, Any], at: int = 1) -> list[dict[str, Any]]:
    """GOOD with row ``at`` (0-based) changed; a value of ``...`` drops the column everywhere."""
    rows = [dict(r) for r in GOOD]
    for key, value in changes.items():
        if value is ...:
            for row in rows:
                row.pop(key)
        else:
            rows[at][key] = value
    return rows


# --- formats ------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "parquet"])
def test_each_format_stores_the_rows_it_holds(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, fmt: str
) -> None:
    path = WRITERS[fmt](tmp_path / f"x.{fmt}", GOOD)
    [result] = ingest_files(con, [path])
    assert result.fmt == fmt
    assert (result.rows_in_file, result.rows_added, result.rows_already_stored) == (3, 3, 0)
    assert con.execute(STORED_SQL).fetchall() == STORED
    assert con.execute("SELECT DISTINCT batch_id FROM extractions").fetchall() == [
        (result.batch_id,)
    ]
    batch = con.execute(
        "SELECT source, format, rows_in_file, rows_added, source_sha256 FROM ingest_batches"
    ).fetchall()
    assert batch == [(f"x.{fmt}", fmt, 3, 3, hashlib.sha256(path.read_bytes()).hexdigest())]


def test_json_array_and_ndjson_extensions(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(json.dumps(GOOD[:2]), encoding="utf-8")
    write_jsonl(tmp_path / "b.ndjson", GOOD[2:])
    results = ingest_files(con, [tmp_path / "a.json", tmp_path / "b.ndjson"])
    assert [r.rows_added for r in results] == [2, 1]
    assert con.execute(STORED_SQL).fetchall() == STORED


def test_json_numbers_and_booleans_are_read_as_their_text(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    row = {**GOOD[0], "confidence": 0.25, "conflict": True, "doc_id": 17}
    ingest_files(con, [write_jsonl(tmp_path / "n.jsonl", [row])])
    assert con.execute("SELECT doc_id, confidence, conflict FROM extractions").fetchall() == [
        ("17", 0.25, True)
    ]


def test_optional_columns_take_their_defaults(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [
        {"doc_id": "d1", "doc_type": "invoice", "field": "total", "value": "3",
         "confidence": "0.9", "extracted_at": "2026-01-05 10:00:00"},
        {"doc_id": "d1", "doc_type": "invoice", "field": "tax", "value": "  ",
         "confidence": "0.4", "extracted_at": "2026-01-05 10:00:00"},
    ]  # fmt: skip
    ingest_files(con, [write_csv(tmp_path / "min.csv", rows)])
    stored = con.execute(
        "SELECT field, form_version, value, value_status, model, conflict, conflict_value,"
        " source_excerpt FROM extractions ORDER BY field DESC"
    ).fetchall()
    assert stored == [
        ("total", "unknown", "3", "present", None, False, None, None),
        ("tax", "unknown", None, "null", None, False, None, None),
    ]


def test_text_is_trimmed_and_words_are_case_insensitive(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = with_row(
        {"doc_type": " invoice ", "value_status": " Present", "value": "7", "conflict": "YES"},
        at=0,
    )
    ingest_files(con, [write_csv(tmp_path / "pad.csv", rows)])
    row = con.execute(
        "SELECT doc_type, value_status, conflict FROM extractions WHERE extraction_id = 'x1'"
    ).fetchone()
    assert row == ("invoice", "present", True)


def test_conflict_value_and_source_excerpt_are_kept(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = with_row({"conflict_value": "12.05", "source_excerpt": "Total: 12.50 EUR"}, at=0)
    ingest_files(con, [write_csv(tmp_path / "c.csv", rows)])
    assert con.execute(
        "SELECT conflict_value, source_excerpt FROM extractions WHERE extraction_id = 'x1'"
    ).fetchone() == ("12.05", "Total: 12.50 EUR")


def test_integer_conflict_flags_in_parquet(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    rows = typed_rows(GOOD)
    for row, flag in zip(rows, [1, 0, 1], strict=True):
        row["conflict"] = flag
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "ints.parquet")
    ingest_files(con, [tmp_path / "ints.parquet"])
    flags = con.execute("SELECT conflict FROM extractions ORDER BY extraction_id").fetchall()
    assert flags == [(True,), (False,), (True,)]
    rows[0]["conflict"] = 2
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "two.parquet")
    with pytest.raises(ValidationError, match=r"row 1, column conflict: '2' is not a boolean"):
        ingest_files(con, [tmp_path / "two.parquet"])


def test_csv_with_a_bom_and_a_line_break_inside_a_value(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = write_csv(tmp_path / "excel.csv", with_row({"value": "line one\nline two"}, at=0))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    ingest_files(con, [path])
    assert con.execute("SELECT value FROM extractions WHERE extraction_id = 'x1'").fetchone() == (
        "line one\nline two",
    )
    assert con.execute("SELECT count(*) FROM extractions").fetchone() == (3,)


# --- time zones ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        ("2026-01-05T10:00:00+02:00", dt.datetime(2026, 1, 5, 8)),
        ("2026-01-05T10:00:00-05:30", dt.datetime(2026, 1, 5, 15, 30)),
        ("2026-01-05T10:00:00Z", dt.datetime(2026, 1, 5, 10)),
        ("2026-01-05T10:00:00", dt.datetime(2026, 1, 5, 10)),  # naive: taken as UTC
        ("2026-01-05 10:00:00.250+0100", dt.datetime(2026, 1, 5, 9, 0, 0, 250000)),
        ("2026-01-05", dt.datetime(2026, 1, 5)),
        ("2026-07-05 10:00:00 Europe/Berlin", dt.datetime(2026, 7, 5, 8)),  # summer time
    ],
)
def test_timestamps_are_stored_in_utc(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, written: str, stored: dt.datetime
) -> None:
    ingest_files(con, [write_csv(tmp_path / "tz.csv", with_row({"extracted_at": written}, 0))])
    row = con.execute("SELECT extracted_at FROM extractions WHERE extraction_id = 'x1'").fetchone()
    assert row == (stored,)


def test_parquet_timestamps_with_a_zone_are_converted(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    table = pa.Table.from_pylist(typed_rows(GOOD[:1])).set_column(
        9,
        "extracted_at",
        pa.array([dt.datetime(2026, 1, 5, 10)], pa.timestamp("us", tz="Asia/Tokyo")),
    )
    pq.write_table(table, tmp_path / "tz.parquet")
    ingest_files(con, [tmp_path / "tz.parquet"])
    # Arrow keeps zoned times as UTC instants: 10:00 UTC shown in Tokyo is 19:00.
    assert con.execute("SELECT extracted_at FROM extractions").fetchone() == (
        dt.datetime(2026, 1, 5, 10),
    )


def test_naive_parquet_timestamps_are_taken_as_utc(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    table = pa.Table.from_pylist(typed_rows(GOOD[:1])).set_column(
        9, "extracted_at", pa.array([dt.datetime(2026, 1, 5, 10)], pa.timestamp("ns"))
    )
    pq.write_table(table, tmp_path / "naive.parquet")
    ingest_files(con, [tmp_path / "naive.parquet"])
    assert con.execute("SELECT extracted_at FROM extractions").fetchone() == (
        dt.datetime(2026, 1, 5, 10),
    )


def test_timestamps_do_not_depend_on_the_session_time_zone(db_path: Path, tmp_path: Path) -> None:
    con = duckdb.connect(str(db_path))  # not store.connect: no UTC set for us
    con.execute("SET TimeZone = 'America/New_York'")
    ingest_files(con, [write_csv(tmp_path / "tz.csv", GOOD)])
    assert con.execute(STORED_SQL).fetchall() == STORED


# --- validation rules ---------------------------------------------------------------

#: (id, changes to row 2 of GOOD, expected message pattern)
RULE_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("blank doc_id", {"doc_id": ""}, r"row 2, column doc_id: missing \(a value is required\)"),
    ("blank doc_type", {"doc_type": " "}, r"row 2, column doc_type: missing"),
    ("blank field", {"field": ""}, r"row 2, column field: missing"),
    ("blank confidence", {"confidence": ""}, r"row 2, column confidence: missing"),
    ("blank extracted_at", {"extracted_at": ""}, r"row 2, column extracted_at: missing"),
    (
        "word confidence",
        {"confidence": "high"},
        r"row 2, column confidence: 'high' is not a number",
    ),
    ("comma decimal", {"confidence": "0,5"}, r"row 2, column confidence: '0,5' is not a number"),
    ("above one", {"confidence": "1.2"}, r"row 2, column confidence: 1\.2 is outside \[0, 1\]"),
    ("below zero", {"confidence": "-0.1"}, r"row 2, column confidence: -0\.1 is outside \[0, 1\]"),
    ("percent", {"confidence": "95"}, r"row 2, column confidence: 95 is outside \[0, 1\]"),
    ("nan", {"confidence": "NaN"}, r"row 2, column confidence: NaN is not a number in \[0, 1\]"),
    ("infinity", {"confidence": "inf"}, r"row 2, column confidence: inf is not a number in"),
    (
        "bad timestamp",
        {"extracted_at": "2026-13-05"},
        r"row 2, column extracted_at: '2026-13-05' is not an ISO 8601 timestamp",
    ),
    (
        "epoch timestamp",
        {"extracted_at": "1767607200"},
        r"row 2, column extracted_at: '1767607200' is not an ISO 8601 timestamp",
    ),
    (
        "unknown status",
        {"value_status": "missing"},
        r"row 2, column value_status: 'missing' is not one of present, null, unclear, other",
    ),
    (
        "null with a value",
        {"value_status": "null", "value": "ABC"},
        r"row 2, column value_status: 'null' but the value is 'ABC'; null means the field is"
        r" absent",
    ),
    (
        "present without a value",
        {"value_status": "present", "value": ""},
        r"row 2, column value: missing, but value_status is 'present'",
    ),
    (
        "not a boolean",
        {"conflict": "maybe"},
        r"row 2, column conflict: 'maybe' is not a boolean \(true/false/1/0/yes/no\)",
    ),
    (
        "duplicate id",
        {"extraction_id": "x1"},
        r"row 2, column extraction_id: 'x1' repeats row 1 \(ids must be unique within a file\)",
    ),
    (
        "missing column",
        {"confidence": ...},
        r"missing required column confidence \(columns found: extraction_id, doc_id,",
    ),
    ("renamed column", {"confidance": "0.5"}, r"unknown column confidance \(known columns:"),
]


@named_cases(("changes", "pattern"), RULE_CASES)
def test_every_rule_rejects_the_file_with_its_message(
    holding: duckdb.DuckDBPyConnection, tmp_path: Path, changes: dict[str, Any], pattern: str
) -> None:
    rows = with_row(changes)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    path = write_csv(tmp_path / "bad.csv", rows, columns)
    before = table_fingerprint(holding)
    with pytest.raises(ValidationError, match=pattern) as caught:
        ingest_files(holding, [path])
    assert caught.value.source == "bad.csv"
    assert str(caught.value).startswith("bad.csv: rejected, 1 problem; nothing was written")
    assert table_fingerprint(holding) == before


@pytest.mark.parametrize(
    ("column", "value", "pattern"),
    [
        ("confidence", float("nan"), r"row 2, column confidence: nan is not a number in \[0, 1\]"),
        ("confidence", 1.5, r"row 2, column confidence: 1\.5 is outside \[0, 1\]"),
        ("confidence", None, r"row 2, column confidence: missing"),
        ("extracted_at", None, r"row 2, column extracted_at: missing"),
        ("doc_id", "", r"row 2, column doc_id: missing"),
    ],
)
def test_typed_parquet_columns_are_checked_too(
    holding: duckdb.DuckDBPyConnection, tmp_path: Path, column: str, value: Any, pattern: str
) -> None:
    rows = typed_rows(GOOD)
    rows[1][column] = value
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "bad.parquet")
    with pytest.raises(ValidationError, match=pattern):
        ingest_files(holding, [tmp_path / "bad.parquet"])
    assert holding.execute("SELECT count(*) FROM extractions").fetchone() == (1,)


def test_derived_ids_that_repeat_are_named(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "extraction_id"} for r in (GOOD[0], GOOD[0])]
    with pytest.raises(
        ValidationError,
        match=r"row 2, column extraction_id: row 1 has the same doc_id, doc_type, field, model"
        r" and extracted_at",
    ):
        ingest_files(con, [write_csv(tmp_path / "twice.csv", rows)])


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        ("empty.csv", "", r"empty.csv: rejected.*\n  no rows: the file is empty"),
        ("header.csv", "doc_id,doc_type,field,confidence,extracted_at\n", r"no rows"),
        ("empty.jsonl", "", r"no rows"),
        ("blank.jsonl", "{}\n{}\n", r"no rows"),
        (
            "ragged.csv",
            "doc_id,doc_type,field,confidence,extracted_at\nd,t,f,0.5,2026-01-05\nd,t,f,0.5\n",
            r"cannot read as csv: CSV Error on Line: 3.*Expected Number of Columns: 5 Found: 4",
        ),
        (
            "quote.csv",
            'doc_id,doc_type,field,confidence,extracted_at\n"d,t,f,0.5,2026-01-05\n',
            r"cannot read as csv: .*unterminated quote",
        ),
        (
            "dup.csv",
            "doc_id,doc_id,doc_type,field,confidence,extracted_at\n",
            r"column doc_id appears more than once",
        ),
        ("broken.jsonl", '{"doc_id": "d1"\n', r"line 1 is not valid JSON"),
        ("array.jsonl", '{"doc_id": "d1"}\n[1, 2]\n', r"row 2: a JSON array, not an object"),
        ("x.txt", "doc_id\n", r"unknown file type '.txt'; use one of"),
        ("latin1.csv", b"doc_id,doc_type\nd\xe9,x\n", r"not UTF-8|not utf-8"),
    ],
)
def test_unreadable_files_are_rejected_clearly(
    holding: duckdb.DuckDBPyConnection,
    tmp_path: Path,
    name: str,
    content: str | bytes,
    pattern: str,
) -> None:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = table_fingerprint(holding)
    with pytest.raises(ValidationError, match=pattern):
        ingest_files(holding, [path])
    assert table_fingerprint(holding) == before


def test_problems_are_ordered_by_row_and_capped_at_twenty(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [
        {**GOOD[0], "extraction_id": f"id{i}", "confidence": "2" if i % 2 else "0.5",
         "extracted_at": "soon" if i % 3 == 0 else GOOD[0]["extracted_at"]}
        for i in range(60)
    ]  # fmt: skip
    with pytest.raises(ValidationError) as caught:
        ingest_files(con, [write_csv(tmp_path / "many.csv", rows)])
    error = caught.value
    expected_total = sum(1 for i in range(60) if i % 2) + sum(1 for i in range(60) if i % 3 == 0)
    assert error.total == expected_total == 50
    assert len(error.problems) == 20
    numbers = [int(p.split(",")[0].removeprefix("row ")) for p in error.problems]
    assert numbers == sorted(numbers)
    assert error.problems[:4] == [
        "row 1, column extracted_at: 'soon' is not an ISO 8601 timestamp"
        " (like 2026-01-05T10:00:00Z)",
        "row 2, column confidence: 2 is outside [0, 1]",
        "row 4, column confidence: 2 is outside [0, 1]",  # row 4 has two problems,
        "row 4, column extracted_at: 'soon' is not an ISO 8601 timestamp"  # in rule order
        " (like 2026-01-05T10:00:00Z)",
    ]
    assert str(error).endswith("  ... and 30 more")


def test_long_values_are_shortened_in_messages(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    with pytest.raises(ValidationError) as caught:
        ingest_files(con, [write_csv(tmp_path / "l.csv", with_row({"confidence": "x" * 500}))])
    assert caught.value.problems == [f"row 2, column confidence: '{'x' * 57}...' is not a number"]


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize(
    ("defect", "pattern"),
    [
        ({"confidence": "7"}, r"row 38765, column confidence: 7(\.0)? is outside"),
        ({"extraction_id": "id17"}, r"row 38765, column extraction_id: 'id17' repeats row 18"),
        (
            {"extraction_id": ..., "doc_id": "doc17"},
            r"row 38765, column extraction_id: row 18 has the same doc_id, doc_type, field",
        ),
    ],
)
def test_large_files_are_checked_and_row_numbers_hold(
    con: duckdb.DuckDBPyConnection,
    tmp_path: Path,
    fmt: str,
    defect: dict[str, Any],
    pattern: str,
) -> None:
    # Big enough for the quick check to run and for DuckDB to read in parallel.
    rows = [{**GOOD[0], "extraction_id": f"id{i}", "doc_id": f"doc{i}"} for i in range(40_000)]
    rows[38_764] = {**rows[38_764], **defect}
    if defect.get("extraction_id") is ...:  # no ids: they are derived
        rows = [{k: v for k, v in r.items() if k != "extraction_id"} for r in rows]
    if fmt == "csv":
        path = write_csv(tmp_path / "big.csv", rows)
    else:
        path = write_parquet(tmp_path / "big.parquet", rows, row_group_size=2_000)
    with pytest.raises(ValidationError, match=pattern) as caught:
        ingest_files(con, [path])
    assert caught.value.total == 1
    assert con.execute("SELECT count(*) FROM extractions").fetchone() == (0,)


# --- atomicity ----------------------------------------------------------------------


def test_a_bad_second_file_leaves_the_store_unchanged(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    ingest_files(con, [write_csv(tmp_path / "first.csv", GOOD[:1])])
    before = table_fingerprint(con)
    good = write_parquet(tmp_path / "good.parquet", GOOD[1:])
    bad = write_csv(tmp_path / "bad.csv", with_row({"confidence": "1.2"}))
    with pytest.raises(ValidationError, match=r"^bad.csv: rejected") as caught:
        ingest_files(con, [good, bad])
    assert caught.value.source == "bad.csv"
    assert table_fingerprint(con) == before
    assert con.execute("SELECT extraction_id FROM extractions").fetchall() == [("x1",)]


def test_no_temp_tables_are_left_behind(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    ingest_files(
        con, [write_csv(tmp_path / "a.csv", GOOD), write_parquet(tmp_path / "b.parquet", GOOD)]
    )
    with pytest.raises(ValidationError):
        ingest_files(con, [write_csv(tmp_path / "bad.csv", with_row({"confidence": "x"}))])
    temp = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE temporary"
        " UNION ALL SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal"
    ).fetchall()
    assert temp == [(0,), (0,)]


def test_a_file_changed_during_ingest_is_stored_as_read_under_the_hash_of_what_was_read(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """The rows and the hash come from one read: a rewrite meanwhile is a new file later."""
    path = write_parquet(tmp_path / "moving.parquet", GOOD)
    first = hashlib.sha256(path.read_bytes()).hexdigest()

    def rewrite_before_storing(stage: str, done: int, total: int) -> None:
        if stage.startswith("storing"):
            write_parquet(path, with_row({"extraction_id": "new", "confidence": "0.11"}))

    [result] = ingest_files(con, [path], progress=rewrite_before_storing)
    stored = con.execute("SELECT source_sha256 FROM ingest_batches").fetchall()
    assert stored == [(first,)]
    assert result.rows_added == len(GOOD)
    # The rewritten content is not "already stored": its new row goes in.
    [again] = ingest_files(con, [path])
    assert again.rows_added == 1


# --- idempotence --------------------------------------------------------------------


def test_the_same_file_twice_adds_nothing(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "a.csv", GOOD)
    [first] = ingest_files(con, [path])
    before = table_fingerprint(con)
    [again] = ingest_files(con, [path])
    assert again == IngestResult(first.batch_id, "a.csv", "csv", 3, 0, 3)
    assert table_fingerprint(con) == before


def test_the_same_file_twice_in_one_call_adds_once(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = write_csv(tmp_path / "a.csv", GOOD)
    first, second = ingest_files(con, [path, path])
    assert (first.rows_added, second.rows_added, second.rows_already_stored) == (3, 0, 3)
    assert con.execute("SELECT count(*) FROM extractions").fetchone() == (3,)


def test_stored_rows_in_another_file_are_skipped(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    ingest_files(con, [write_csv(tmp_path / "a.csv", GOOD[:2])])
    [result] = ingest_files(con, [write_parquet(tmp_path / "b.parquet", GOOD)])
    assert (result.rows_in_file, result.rows_added, result.rows_already_stored) == (3, 1, 2)
    assert con.execute(STORED_SQL).fetchall() == STORED
    assert con.execute("SELECT count(*) FROM ingest_batches").fetchone() == (2,)


def test_rows_without_ids_are_recognised_in_another_file(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [{k: v for k, v in r.items() if k != "extraction_id"} for r in GOOD]
    ingest_files(con, [write_csv(tmp_path / "a.csv", rows)])
    # The same rows reordered, one timestamp written with another (equal) offset.
    moved = [dict(r) for r in reversed(rows)]
    moved[0]["extracted_at"] = "2026-01-06T07:30:00Z"  # was 09:30:00+02:00
    [result] = ingest_files(con, [write_jsonl(tmp_path / "b.jsonl", moved)])
    assert (result.rows_added, result.rows_already_stored) == (0, 3)
    assert con.execute("SELECT count(*) FROM extractions").fetchone() == (3,)


def test_derived_id_is_the_documented_hash(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    row = {k: v for k, v in GOOD[2].items() if k != "extraction_id"}
    ingest_files(con, [write_csv(tmp_path / "a.csv", [row])])
    expected = hashlib.sha256(b"d2|receipt|date|m2|2026-01-06 07:30:00.000000").hexdigest()
    assert con.execute("SELECT extraction_id FROM extractions").fetchone() == (expected,)


def test_blank_ids_are_derived_and_given_ids_kept(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = with_row({"extraction_id": ""}, at=0)
    ingest_files(con, [write_csv(tmp_path / "a.csv", rows)])
    derived = hashlib.sha256(b"d1|invoice|total|m1|2026-01-05 10:00:00.000000").hexdigest()
    ids = con.execute("SELECT extraction_id FROM extractions ORDER BY field").fetchall()
    assert ids == [("x3",), ("x2",), (derived,)]  # date, tax, total


# --- form versions ------------------------------------------------------------------


def test_form_versions_keep_the_first_time_seen(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    ingest_files(con, [write_csv(tmp_path / "a.csv", GOOD)])
    older = [
        {**GOOD[0], "extraction_id": "old", "extracted_at": "2025-12-01T00:00:00Z"},
        {**GOOD[0], "extraction_id": "new", "form_version": "v9", "extracted_at": "2026-03-01"},
    ]
    ingest_files(con, [write_csv(tmp_path / "b.csv", older)])
    assert con.execute("SELECT * FROM form_versions ORDER BY ALL").fetchall() == [
        ("invoice", "v1", dt.datetime(2025, 12, 1)),
        ("invoice", "v9", dt.datetime(2026, 3, 1)),
        ("receipt", "v2", dt.datetime(2026, 1, 6, 7, 30)),
    ]


# --- progress -----------------------------------------------------------------------


def test_progress_reports_every_step_in_rows(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    seen: list[tuple[str, int, int]] = []
    paths = [write_csv(tmp_path / "a.csv", GOOD), write_parquet(tmp_path / "b.parquet", GOOD[:2])]
    ingest_files(con, paths, progress=lambda s, d, t: seen.append((s, d, t)))
    # Each step starts at 0 rows; a CSV file's rows are known once it is parsed.
    assert [(s, d, t) for s, d, t in seen if d == 0] == [
        ("reading a.csv", 0, 0),
        ("validating a.csv", 0, 3),
        ("reading b.parquet", 0, 0),
        ("validating b.parquet", 0, 2),
        ("storing a.csv", 0, 3),
        ("storing b.parquet", 0, 2),
    ]
    assert seen[-1] == ("done", 5, 5)
    assert all(0 <= d <= t for s, d, t in seen if t)
    # DuckDB's progress tracking is put back as it was (off, its printing on).
    assert con.execute(
        "SELECT current_setting('enable_progress_bar'),"
        " current_setting('enable_progress_bar_print')"
    ).fetchone() == (False, True)


def test_progress_of_a_large_file_counts_validated_rows_up(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [{**GOOD[i % 3], "extraction_id": f"x{i}"} for i in range(25_000)]
    seen: list[tuple[str, int, int]] = []
    ingest_files(con, [write_parquet(tmp_path / "big.parquet", rows)],
                 progress=lambda s, d, t: seen.append((s, d, t)))
    validated = [d for s, d, t in seen if s == "validating big.parquet"]
    # Above QUICK_CHECK_ROWS the check runs one query per rule: one report after each.
    assert len(set(validated)) >= 8
    assert validated == sorted(validated) and 0 == validated[0] < validated[-1] < 25_000
    assert {t for s, d, t in seen if s != "reading big.parquet"} == {25_000}


# --- in-memory rows -----------------------------------------------------------------


def test_ingest_table_stores_typed_rows_once(con: duckdb.DuckDBPyConnection) -> None:
    table = pa.Table.from_pylist(typed_rows(GOOD))
    result = ingest_table(con, table, source="demo", fmt="demo")
    assert (result.source, result.fmt, result.rows_added) == ("demo", "demo", 3)
    assert con.execute(STORED_SQL).fetchall() == STORED
    again = ingest_table(con, table, source="demo", fmt="demo")
    assert (again.batch_id, again.rows_added, again.rows_already_stored) == (result.batch_id, 0, 3)
    assert con.execute("SELECT count(*) FROM ingest_batches").fetchone() == (1,)


def test_ingest_table_rejects_bad_rows(con: duckdb.DuckDBPyConnection) -> None:
    rows = typed_rows(GOOD)
    rows[2]["confidence"] = 1.01
    before = table_fingerprint(con)
    with pytest.raises(
        ValidationError, match=r"^extract run-1: rejected.*\n  row 3, column confidence: 1\.01"
    ):
        ingest_table(con, pa.Table.from_pylist(rows), source="extract run-1", fmt="extract")
    assert table_fingerprint(con) == before


def test_ingest_table_takes_a_given_content_hash(con: duckdb.DuckDBPyConnection) -> None:
    table = pa.Table.from_pylist(typed_rows(GOOD))
    first = ingest_table(con, table, source="run-1", fmt="extract", source_sha256="abc")
    second = ingest_table(
        con, table.slice(0, 1), source="run-1", fmt="extract", source_sha256="abc"
    )
    assert (first.rows_added, second.rows_added) == (3, 0)
    assert con.execute("SELECT source_sha256 FROM ingest_batches").fetchall() == [("abc",)]


# --- your own column names -------------------------------------------------------------


def _own_names(tmp_path: Path, suffix: str) -> Path:
    """An extraction log under its own column names, with a column fieldtrust has none of."""
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    table = pa.table({
        "id": ["x1", "x2"], "document": ["d1", "d2"], "kind": ["invoice", "receipt"],
        "name": ["total", "total"], "value": ["12.50", "3.00"], "score": [0.9, 0.7],
        "at": ["2026-01-05T10:00:00Z", "2026-01-05T11:00:00Z"], "file": ["a.pdf", "b.png"],
        "page": [1, 2], "latency_ms": [812, 640],
    })
    path = tmp_path / f"log{suffix}"
    (pq.write_table if suffix == ".parquet" else pacsv.write_csv)(table, path)
    return path


OWN_NAMES = {"extraction_id": "id", "doc_id": "document", "doc_type": "kind", "field": "name",
             "confidence": "score", "extracted_at": "at", "document_uri": "file"}


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_log_under_its_own_names_ingests_with_a_mapping_and_extra_columns_left_out(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, suffix: str
) -> None:
    from fieldtrust.ingest.extractions import ingest_files

    path = _own_names(tmp_path, suffix)
    before = table_fingerprint(con)
    way_out = r"; map it \(--columns\) or leave it out \(--ignore-unknown\)$"
    with pytest.raises(ValidationError, match=r"unknown column latency_ms .*bbox\)" + way_out):
        ingest_files(con, [path], columns=OWN_NAMES)
    assert table_fingerprint(con) == before
    [result] = ingest_files(con, [path], columns=OWN_NAMES, ignore_unknown=True)
    assert (result.rows_added, result.columns_ignored) == (2, ("latency_ms",))
    assert con.execute(
        "SELECT extraction_id, doc_id, doc_type, confidence, document_uri, page FROM extractions"
        " ORDER BY 1"
    ).fetchall() == [("x1", "d1", "invoice", 0.9, "a.pdf", 1), ("x2", "d2", "receipt", 0.7,
                                                               "b.png", 2)]


def test_a_mapping_to_a_column_the_file_lacks_is_named(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    from fieldtrust.ingest.extractions import ingest_files

    from fieldtrust.errors import InputError

    path = _own_names(tmp_path, ".csv")
    with pytest.raises(ValidationError, match=r"missing required column doc_type: the column"
                       r" mapping reads it from 'type', which the file lacks"):
        ingest_files(con, [path], columns={**OWN_NAMES, "doc_type": "type"})
    with pytest.raises(InputError, match=r"column mapping: 'kind' is not an extraction column"):
        ingest_files(con, [path], columns={"kind": "doc_type"})


def test_the_ingest_command_reads_the_columns_table_and_ignore_unknown(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from fieldtrust.cli.main import cli

    path = _own_names(tmp_path, ".csv")
    toml = tmp_path / "fieldtrust.toml"
    toml.write_text("[columns]\n" + "".join(f'{k} = "{v}"\n' for k, v in OWN_NAMES.items()))
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "s.duckdb"), "ingest", str(path),
                                      "--ignore-unknown", "--quiet"],
                                env={"FIELDTRUST_CONFIG": str(toml)})
    assert result.exit_code == 0, result.output
    assert result.output == ("log.csv: 2 rows read, 2 added, 0 already stored; columns left out:"
                             " latency_ms\n")
