"""Nested values (JSON arrays and objects, Parquet and Arrow list, struct and map columns).

A cell holds one value. Cast to text, ``["invoice"]`` would pass every rule
and land as a doc_type, so the readers refuse nested values with the row,
the column and the value, before anything is written; scalar JSON (numbers,
booleans, null, strings that merely look like JSON) reads as before.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fieldtrust.ingest.extractions import ingest_files, ingest_table
from fieldtrust.ingest.readers import snapshot, stage_file, temp_name

from fieldtrust.errors import ValidationError
from tests.conftest import table_fingerprint
from tests.ingest.test_ingest import GOOD, write_jsonl

TIME = dt.datetime(2026, 1, 5, 10)


def _json_rows(column: str, value: Any, at: int = 1) -> list[dict[str, Any]]:
    """GOOD with ``column`` of row ``at`` (0-based) set to a JSON value."""
    rows = [dict(r) for r in GOOD]
    rows[at][column] = value
    return rows


def _typed(**columns: Any) -> pa.Table:
    """Two typed rows (doc d1 and d2), ``columns`` replacing or adding columns."""
    base: dict[str, Any] = {
        "doc_id": ["d1", "d2"],
        "doc_type": ["invoice", "invoice"],
        "field": ["total", "tax"],
        "confidence": [0.5, 0.9],
        "extracted_at": [TIME, TIME],
    }
    return pa.table({**base, **columns})


def _temp_relations(con: duckdb.DuckDBPyConnection) -> list[tuple[int]]:
    return con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE temporary"
        " UNION ALL SELECT count(*) FROM duckdb_views() WHERE temporary AND NOT internal"
    ).fetchall()


def _refused(con: duckdb.DuckDBPyConnection, path: Path, problems: list[str]) -> None:
    """Ingesting ``path`` fails with exactly ``problems``, writing and leaving nothing."""
    ingest_files(con, [write_jsonl(path.with_name("seed.jsonl"), GOOD[:1])])
    before = table_fingerprint(con)
    with pytest.raises(ValidationError, match=rf"^{path.name}: rejected") as caught:
        ingest_files(con, [path])
    assert caught.value.problems == problems
    assert table_fingerprint(con) == before
    assert _temp_relations(con) == [(0,), (0,)]


# --- JSON ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value", "problem"),
    [
        ("doc_type", ["invoice"], '\'["invoice"]\' is a JSON array'),
        ("doc_type", {"name": "invoice"}, '\'{"name":"invoice"}\' is a JSON object'),
        ("value", [[1, 2], [3]], "'[[1,2],[3]]' is a JSON array"),
        ("value", {"amount": {"net": 10, "tax": [2]}},
         '\'{"amount":{"net":10,"tax":[2]}}\' is a JSON object'),
        ("confidence", [0.5], "'[0.5]' is a JSON array"),
        ("extracted_at", {"utc": "2026-01-05T10:00:00Z"},
         '\'{"utc":"2026-01-05T10:00:00Z"}\' is a JSON object'),
        ("value", [], "'[]' is a JSON array"),
        ("value", {}, "'{}' is a JSON object"),
    ],
    ids=["array-doc-type", "object-doc-type", "nested-list-value", "object-value",
         "array-confidence", "object-extracted-at", "empty-array", "empty-object"],
)
def test_a_json_array_or_object_in_a_column_is_refused(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, column: str, value: Any, problem: str
) -> None:
    path = write_jsonl(tmp_path / "nested.jsonl", _json_rows(column, value))
    _refused(con, path, [
        f"row 2, column {column}: {problem}, not a single value; write one string or number"
    ])


def test_a_json_array_of_objects_file_is_checked_too(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = tmp_path / "nested.json"
    path.write_text(json.dumps(_json_rows("field", ["total", "tax"], at=2)), encoding="utf-8")
    _refused(con, path, [
        "row 3, column field: '[\"total\",\"tax\"]' is a JSON array, not a single value;"
        " write one string or number"
    ])


def test_nested_json_problems_are_ordered_counted_and_cut_short(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [{**GOOD[0], "extraction_id": f"id{i}"} for i in range(30)]
    for i in range(0, 30, 2):
        rows[i]["model"] = {"name": "m" * 100}
        rows[i]["value"] = ["a"]
    with pytest.raises(ValidationError) as caught:
        ingest_files(con, [write_jsonl(tmp_path / "many.jsonl", rows)])
    error = caught.value
    assert error.total == 30 and len(error.problems) == 20
    # Rows in order; within a row, columns in file order (value comes before model).
    assert error.problems[:2] == [
        "row 1, column value: '[\"a\"]' is a JSON array, not a single value;"
        " write one string or number",
        f"row 1, column model: '{{\"name\":\"{'m' * 48}...' is a JSON object, not a single"
        " value; write one string or number",
    ]
    assert [p.split(",")[0] for p in error.problems[2:4]] == ["row 3", "row 3"]


def test_a_nested_value_deep_in_a_large_json_file_is_found(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    # Many row groups, all but one skipped by their statistics: the row number must hold.
    rows = [{**GOOD[0], "extraction_id": f"id{i}", "doc_id": f"doc{i}"} for i in range(50_000)]
    rows[47_310]["doc_type"] = ["invoice", "receipt"]
    with pytest.raises(ValidationError) as caught:
        ingest_files(con, [write_jsonl(tmp_path / "big.jsonl", rows)])
    assert caught.value.problems == [
        "row 47311, column doc_type: '[\"invoice\",\"receipt\"]' is a JSON array, not a single"
        " value; write one string or number"
    ]
    assert con.execute("SELECT count(*) FROM extractions").fetchone() == (0,)


def test_scalar_json_still_reads_as_its_text(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """Numbers, booleans and null as before; strings that look like JSON are kept verbatim."""
    rows = [
        {**GOOD[0], "extraction_id": "n", "value": 12.5},
        {**GOOD[0], "extraction_id": "i", "value": 7, "conflict": True},
        {**GOOD[0], "extraction_id": "z", "value": None, "value_status": None},
        {**GOOD[0], "extraction_id": "s", "value": "[draft]", "doc_type": "{form}"},
        {**GOOD[0], "extraction_id": "j", "value": '["x", {"y": 1}]', "model": "{}"},
    ]
    [result] = ingest_files(con, [write_jsonl(tmp_path / "scalars.jsonl", rows)])
    assert result.rows_added == 5
    stored = con.execute(
        "SELECT extraction_id, doc_type, value, value_status, model, conflict FROM extractions"
        " ORDER BY extraction_id"
    ).fetchall()
    assert stored == [
        ("i", "invoice", "7", "present", "m1", True),
        ("j", "invoice", '["x", {"y": 1}]', "present", "{}", False),
        ("n", "invoice", "12.5", "present", "m1", False),
        ("s", "{form}", "[draft]", "present", "m1", False),
        ("z", "invoice", None, "null", "m1", False),
    ]


# --- Parquet and Arrow --------------------------------------------------------------


MAP = pa.map_(pa.string(), pa.string())

PARQUET_CASES = [
    pytest.param(
        {"doc_type": [["invoice"], ["invoice", "receipt"]]},
        ["row 1, column doc_type: '[invoice]' is a list (VARCHAR[]), not a single value;"
         " write the column as one text or number per row",
         "row 2, column doc_type: '[invoice, receipt]' is a list (VARCHAR[]), not a single value;"
         " write the column as one text or number per row"],
        id="list",
    ),
    pytest.param(
        {"value": [None, {"net": "10", "tax": "2"}]},
        ["row 2, column value: '{'net': 10, 'tax': 2}' is a struct"
         " (STRUCT(net VARCHAR, tax VARCHAR)), not a single value;"
         " write the column as one text or number per row"],
        id="struct",
    ),
    pytest.param(
        {"model": pa.array([[("name", "m1")], None], MAP)},
        ["row 1, column model: '{name=m1}' is a map (MAP(VARCHAR, VARCHAR)), not a single value;"
         " write the column as one text or number per row"],
        id="map",
    ),
    pytest.param(
        {"confidence": pa.array([[0.5, 0.6], [0.9, 0.1]], pa.list_(pa.float64(), 2))},
        ["row 1, column confidence: '[0.5, 0.6]' is a list (DOUBLE[]), not a single value;"
         " write the column as one text or number per row",
         "row 2, column confidence: '[0.9, 0.1]' is a list (DOUBLE[]), not a single value;"
         " write the column as one text or number per row"],
        id="fixed-size-list",
    ),
    pytest.param(
        {"value": [None, {"net": "10"}], "form_version": [["v1"], None]},
        ["row 1, column form_version: '[v1]' is a list (VARCHAR[]), not a single value;"
         " write the column as one text or number per row",
         "row 2, column value: '{'net': 10}' is a struct (STRUCT(net VARCHAR)), not a single"
         " value; write the column as one text or number per row"],
        id="two-columns",
    ),
]


@pytest.mark.parametrize(("columns", "problems"), PARQUET_CASES)
def test_a_parquet_list_struct_or_map_column_is_refused(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, columns: dict[str, Any], problems: list[str]
) -> None:
    path = tmp_path / "nested.parquet"
    pq.write_table(_typed(**columns), path)
    _refused(con, path, problems)


def test_an_arrow_list_column_is_refused(con: duckdb.DuckDBPyConnection) -> None:
    before = table_fingerprint(con)
    with pytest.raises(ValidationError) as caught:
        ingest_table(con, _typed(doc_type=[["invoice"], None]), source="batch")
    assert caught.value.problems == [
        "row 1, column doc_type: '[invoice]' is a list (VARCHAR[]), not a single value;"
        " write the column as one text or number per row"
    ]
    assert table_fingerprint(con) == before
    assert _temp_relations(con) == [(0,), (0,)]


def test_a_nested_column_without_values_is_left_to_the_rules(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """NULL throughout holds nothing nested: an optional column reads as no value."""
    path = tmp_path / "empty-list.parquet"
    pq.write_table(_typed(value=pa.array([None, None], pa.list_(pa.string()))), path)
    [result] = ingest_files(con, [path])
    assert result.rows_added == 2
    assert con.execute("SELECT DISTINCT value, value_status FROM extractions").fetchall() == [
        (None, "null")
    ]


# --- every reader, not only ingest --------------------------------------------------


def test_staging_refuses_nested_values_for_any_caller(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """Labels import stages files the same way, so its columns are covered too."""
    path = tmp_path / "labels.jsonl"
    path.write_text('{"extraction_id": "x1", "verdict": ["correct", "incorrect"]}\n',
                    encoding="utf-8")
    with pytest.raises(ValidationError) as caught:
        stage_file(con, snapshot(path, "jsonl"), "jsonl", temp_name("t"))
    assert caught.value.problems == [
        "row 1, column verdict: '[\"correct\",\"incorrect\"]' is a JSON array, not a single"
        " value; write one string or number"
    ]
    assert _temp_relations(con) == [(0,), (0,)]
