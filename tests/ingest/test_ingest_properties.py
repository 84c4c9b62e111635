"""Property: bad rows mixed into good ones never reach the store, and each is reported."""

from __future__ import annotations

import csv
import datetime as dt
import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fieldtrust.ingest import rules
from fieldtrust.ingest.extractions import ingest_files
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fieldtrust import store
from fieldtrust.errors import ValidationError
from tests.conftest import table_fingerprint

COLUMNS = ["extraction_id", "doc_id", "doc_type", "field", "value", "confidence", "extracted_at"]
_counter = itertools.count()

text = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=126)
    | st.sampled_from(["é", "ß", " ", ",", '"']),
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip() != "")

timestamps = st.builds(
    lambda moment, offset: (moment.replace(tzinfo=offset) if offset else moment).isoformat(),
    st.datetimes(min_value=dt.datetime(2020, 1, 1), max_value=dt.datetime(2026, 1, 1)),
    st.sampled_from([None, dt.UTC, dt.timezone(dt.timedelta(hours=5, minutes=30))]),
)


@st.composite
def good_row(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "doc_id": draw(text),
        "doc_type": draw(st.sampled_from(["invoice", "receipt", "purchase_order"])),
        "field": draw(st.sampled_from(["total", "tax", "date"])),
        "value": draw(st.one_of(st.just(""), text)),
        "confidence": repr(draw(st.floats(0, 1))),
        "extracted_at": draw(timestamps),
    }


#: Each defect breaks exactly one rule, so a bad row makes exactly one problem.
DEFECTS: dict[str, st.SearchStrategy[dict[str, str]]] = {
    "confidence out of range": st.one_of(
        st.floats(1, 1e9, exclude_min=True), st.floats(-1e9, 0, exclude_max=True)
    ).map(lambda x: {"confidence": repr(x)}),
    "confidence not finite": st.sampled_from(["nan", "NaN", "inf", "-inf"]).map(
        lambda x: {"confidence": x}
    ),
    "confidence not a number": st.sampled_from(["high", "0,5", "n/a", "95%", "1..0"]).map(
        lambda x: {"confidence": x}
    ),
    "timestamp unparseable": st.sampled_from(
        ["yesterday", "2026-13-01", "2026-02-30T10:00:00", "10:00", "20260105", "2026-W02"]
    ).map(lambda x: {"extracted_at": x}),
    "required value missing": st.sampled_from(
        ["doc_id", "doc_type", "field", "confidence", "extracted_at"]
    ).flatmap(lambda c: st.sampled_from(["", "   "]).map(lambda blank: {c: blank})),
    "duplicate id": st.just({"extraction_id": "<dup>"}),
}


@st.composite
def mixed_rows(draw: st.DrawFn) -> tuple[list[dict[str, Any]], list[int]]:
    """Rows with unique ids, some made bad; returns the rows and the 1-based bad row numbers."""
    prefix = f"p{next(_counter)}"
    rows = draw(st.lists(good_row(), min_size=1, max_size=40))
    for i, row in enumerate(rows):
        row["extraction_id"] = f"{prefix}-{i}"
    # A few kinds per file, so files holding one kind of defect alone are common.
    kinds = sorted(draw(st.sets(st.sampled_from(sorted(DEFECTS)), min_size=1, max_size=3)))
    bad: list[int] = []
    for i in range(len(rows)):
        kind = draw(st.sampled_from([None, None, *kinds]))
        if kind is None or (kind == "duplicate id" and i == 0):
            continue
        change = draw(DEFECTS[kind])
        if kind == "duplicate id":
            change = {"extraction_id": rows[draw(st.integers(0, i - 1))]["extraction_id"]}
        rows[i] = {**rows[i], **change}
        bad.append(i + 1)
    return rows, bad


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix == ".csv":
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows([[r[c] for c in COLUMNS] for r in rows])
    elif path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """One store file for every example: a rejected file must leave it exactly as it was."""
    con = store.connect(tmp_path_factory.mktemp("prop") / "store.duckdb")
    yield con
    con.close()


def _one_defect(change: dict[str, str]) -> tuple[list[dict[str, Any]], list[int]]:
    """Three good rows, the third changed: a fixed example per kind of defect."""
    rows = [
        {"extraction_id": f"fixed-{i}", "doc_id": "d", "doc_type": "invoice", "field": f"f{i}",
         "value": "1", "confidence": "0.5", "extracted_at": "2026-01-05T10:00:00Z"}
        for i in range(3)
    ]  # fmt: skip
    rows[2].update(change)
    return rows, [3]


FIXED = [
    {"confidence": "1.5"},
    {"confidence": "nan"},
    {"confidence": "high"},
    {"extracted_at": "yesterday"},
    {"doc_type": " "},
    {"extraction_id": "fixed-0"},
]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=mixed_rows(),
    suffix=st.sampled_from([".csv", ".jsonl", ".parquet"]),
    quick_check=st.booleans(),
)
@example(case=_one_defect(FIXED[0]), suffix=".csv", quick_check=True)
@example(case=_one_defect(FIXED[1]), suffix=".jsonl", quick_check=True)
@example(case=_one_defect(FIXED[2]), suffix=".parquet", quick_check=True)
@example(case=_one_defect(FIXED[3]), suffix=".csv", quick_check=True)
@example(case=_one_defect(FIXED[4]), suffix=".parquet", quick_check=True)
@example(case=_one_defect(FIXED[5]), suffix=".csv", quick_check=True)
@example(case=_one_defect(FIXED[5]), suffix=".parquet", quick_check=False)
def test_bad_rows_never_reach_the_store_and_are_all_reported(
    shared: duckdb.DuckDBPyConnection,
    tmp_path_factory: pytest.TempPathFactory,
    case: tuple[list[dict[str, Any]], list[int]],
    suffix: str,
    quick_check: bool,
) -> None:
    rows, bad = case
    path = write(tmp_path_factory.mktemp("f") / f"rows{suffix}", rows)
    before = table_fingerprint(shared)
    # Small files skip the quick "any problem?" check; a threshold of 0 runs it,
    # so both ways through validation meet the same rows.
    threshold = rules.QUICK_CHECK_ROWS
    rules.QUICK_CHECK_ROWS = 0 if quick_check else threshold
    try:
        if not bad:
            [result] = ingest_files(shared, [path])
            assert result.rows_added == len(rows)
            return
        with pytest.raises(ValidationError) as caught:
            ingest_files(shared, [path])
    finally:
        rules.QUICK_CHECK_ROWS = threshold
    assert table_fingerprint(shared) == before
    error = caught.value
    assert error.total == len(bad)
    reported = [int(p.split(",")[0].removeprefix("row ")) for p in error.problems]
    assert reported == bad[:20]
