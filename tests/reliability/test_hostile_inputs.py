"""Hostile input files through the CLI: a fixed corpus and hypothesis-generated ones.

Every rejected file must give exit code 2, a one-line ``error:`` naming the
file and, where a row is at fault, the row, the column and the value, never a
traceback; and the store must be exactly as before (row count and checksum of
every table). Accepted oddities (a BOM and CRLF from Excel, time zones, 1 MB
values) must land with the right values. The corpus lives in
``corpus/hostile_files.py``; the Parquet cases are built here with pyarrow.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from corpus.hostile_files import EXTRACTION_CASES, LABEL_CASES, Case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rel_store import QA_LEAD, record_figure

from fieldtrust import store
from fieldtrust.cli.main import cli
from tests.conftest import copy_store, file_fingerprint

TRIED: Counter[str] = Counter()
#: Labels are imported by the populated store's qa_lead; the corpus's reviewer "a" is ana.
LABELS_IMPORT = ["labels", "import", "--as", QA_LEAD, "--reviewer-map", "a=ana",
                 "--reviewer", "ana"]
FUZZ = settings(max_examples=15, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module", autouse=True)
def _count_cases() -> Iterator[None]:
    yield
    record_figure("hostile_inputs_tried", dict(TRIED))


@pytest.fixture(scope="module")
def shared(template: tuple[Path, dict[str, Any]],
           tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One populated store for every rejection (they must leave it as it is)."""
    return copy_store(template[0], tmp_path_factory.mktemp("hostile") / "shared.duckdb")


def _invoke(db: Path, command: list[str], target: Path) -> Any:
    return CliRunner().invoke(cli, ["--db", str(db), *command, str(target)])


def _assert_rejected(db: Path, command: list[str], path: Path,
                     expect: tuple[str, ...]) -> str:
    before = file_fingerprint(db)
    result = _invoke(db, command, path)
    message = result.stderr
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert message.startswith(f"error: {path.name}: rejected"), message[:500]
    assert "nothing was written" in message
    assert "Traceback" not in result.output
    assert len(message) < 20_000, "a huge value must be cut short in the message"
    for fragment in expect:
        assert fragment in message, f"{fragment!r} not in:\n{message[:2000]}"
    assert file_fingerprint(db) == before
    return message


def _params(cases: tuple[Case, ...]) -> list[Any]:
    return [
        pytest.param(c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.xfail)]
                     if c.xfail else [])
        for c in cases
    ]


@pytest.mark.parametrize("case", _params(EXTRACTION_CASES))
def test_extraction_file_corpus(case: Case, shared: Path, populated: Path,
                                tmp_path: Path) -> None:
    TRIED["corpus:ingest"] += 1
    path = tmp_path / case.name
    path.write_bytes(case.content)
    if case.outcome == "reject":
        _assert_rejected(shared, ["ingest", "--quiet"], path, case.expect)
        return
    result = _invoke(populated, ["ingest", "--quiet"], path)
    assert result.exit_code == 0, result.output
    con = store.connect(populated, read_only=True)
    try:
        for doc_id, (expected,) in case.rows.items():
            confidence, extracted_at = con.execute(
                "SELECT confidence, extracted_at FROM extractions WHERE doc_id = ?", [doc_id]
            ).fetchall()[0]
            if isinstance(expected, float):
                assert confidence == pytest.approx(expected)
            else:
                assert str(extracted_at) == expected
        if case.name == "megabyte_value.csv":
            assert con.execute("SELECT length(value) FROM extractions WHERE doc_id = 'd1'"
                               ).fetchall() == [(1_000_000,)]
    finally:
        con.close()


@pytest.mark.parametrize("case", _params(LABEL_CASES))
def test_labels_file_corpus(case: Case, shared: Path, populated: Path, tmp_path: Path) -> None:
    TRIED["corpus:labels_import"] += 1
    path = tmp_path / case.name
    path.write_bytes(case.content)
    if case.outcome == "reject":
        _assert_rejected(shared, LABELS_IMPORT, path, case.expect)
        return
    _grant_reviewers(populated, {reviewer for _, reviewer in case.rows.values()})
    result = _invoke(populated, LABELS_IMPORT, path)
    assert result.exit_code == 0, result.output
    assert f"{path.name}: {len(case.rows)} rows read; added {len(case.rows)} new labels" in \
        result.output
    con = store.connect(populated, read_only=True)
    try:
        for extraction_id, expected in case.rows.items():
            stored = con.execute(
                "SELECT verdict, reviewer FROM labels WHERE extraction_id = ?"
                " AND review_round = 'import'", [extraction_id]).fetchall()
            assert stored == [expected]
    finally:
        con.close()


def _grant_reviewers(db: Path, names: set[str]) -> None:
    """Make the corpus's odd reviewer names (``o'brien; --``) reviewers of the store."""
    from fieldtrust.store.access import admins, grant_role

    con = store.connect(db)
    try:
        admin = admins(con)[0]
        for name in sorted(names):
            grant_role(con, admin, name, "reviewer")
    finally:
        con.close()


# --- typed Parquet files ---------------------------------------------------------------------


def _parquet(columns: dict[str, Any]) -> pa.Table:
    base = {"doc_id": ["d1", "d2"], "doc_type": ["invoice", "invoice"],
            "field": ["total", "tax"], "confidence": [0.5, 0.5],
            "extracted_at": [dt.datetime(2026, 11, 24, 10)] * 2}
    return pa.table({**base, **columns})


PARQUET_CASES = [
    pytest.param(_parquet({"confidence": ["high", "0.5"]}),
                 ("row 1, column confidence: 'high' is not a number",), id="confidence-text"),
    pytest.param(_parquet({"confidence": pa.array([2, 0], pa.int8())}),
                 ("row 1, column confidence: 2 is outside [0, 1]",), id="confidence-int8"),
    pytest.param(_parquet({"extracted_at": pa.array([1767607200] * 2, pa.int64())}),
                 ("row 1, column extracted_at: '1767607200'",), id="epoch-integers"),
    pytest.param(_parquet({"doc_id": [None, "d2"]}), ("row 1, column doc_id: missing",),
                 id="null-doc-id"),
    pytest.param(_parquet({"confidence": [math.nan, 0.5]}),
                 ("row 1, column confidence: nan is not a number in [0, 1]",), id="confidence-nan"),
    pytest.param(_parquet({"confidence": pa.array([math.nan, 0.5], pa.float32())}),
                 ("row 1, column confidence: nan is not a number in [0, 1]",),
                 id="confidence-nan-float32"),
    pytest.param(_parquet({"doc_type": [["invoice"], ["invoice"]]}),
                 ("row 1, column doc_type: '[invoice]' is a list (VARCHAR[]), not a single value",
                  "row 2, column doc_type"), id="list-as-doc-type"),
    pytest.param(_parquet({"value": [{"amount": "12"}, None]}),
                 ("row 1, column value: '{'amount': 12}' is a struct",), id="struct-as-value"),
]


@pytest.mark.parametrize(("table", "expect"), PARQUET_CASES)
def test_typed_parquet_files(table: pa.Table, expect: tuple[str, ...], shared: Path,
                             tmp_path: Path) -> None:
    TRIED["corpus:parquet"] += 1
    path = tmp_path / "typed.parquet"
    pq.write_table(table, path)
    _assert_rejected(shared, ["ingest", "--quiet"], path, expect)


def test_parquet_time_zones_are_converted(populated: Path, tmp_path: Path) -> None:
    TRIED["corpus:parquet"] += 1
    zone = dt.timezone(dt.timedelta(hours=2))
    path = tmp_path / "zoned.parquet"
    pq.write_table(_parquet({"extracted_at": pa.array(
        [dt.datetime(2026, 11, 24, 10, tzinfo=zone)] * 2, pa.timestamp("us", tz="+02:00"))}),
        path)
    result = _invoke(populated, ["ingest", "--quiet"], path)
    assert result.exit_code == 0, result.output
    con = store.connect(populated, read_only=True)
    try:
        assert con.execute("SELECT DISTINCT extracted_at FROM extractions WHERE doc_id = 'd1'"
                           ).fetchall() == [(dt.datetime(2026, 11, 24, 8),)]
    finally:
        con.close()


# --- generated files ---------------------------------------------------------------------------

HEADER = ["doc_id", "doc_type", "field", "confidence", "extracted_at"]
BAD_VALUES = {
    "doc_id": ["", "   "],
    "doc_type": ["", " "],
    "confidence": ["high", "1.5", "-1", "NaN", "", "0,5", "=1+1", "1e999"],
    "extracted_at": ["tomorrow", "2026-02-30T00:00:00Z", "", "12/01/2026", "2026-W48"],
}


def _good_rows(count: int) -> list[list[str]]:
    start = dt.datetime(2026, 11, 24, 10)
    return [[f"d{i}", "invoice", "total", f"{(i % 10) / 10:.1f}",
             (start + dt.timedelta(seconds=i)).isoformat() + "Z"] for i in range(count)]


def _csv_text(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(HEADER)
    writer.writerows(rows)
    return buffer.getvalue()


corruption = st.tuples(st.integers(0, 9), st.sampled_from(sorted(BAD_VALUES)), st.data())


@pytest.mark.slow
@FUZZ
@given(count=st.integers(1, 10), spoil=st.lists(corruption, min_size=1, max_size=4))
def test_generated_bad_cells_are_each_named_and_nothing_is_written(
    shared: Path, count: int, spoil: list[tuple[int, str, Any]]
) -> None:
    TRIED["hypothesis:bad_cells"] += 1
    rows = _good_rows(count)
    bad: set[tuple[int, str]] = set()
    for index, column, data in spoil:
        row = index % count
        rows[row][HEADER.index(column)] = data.draw(st.sampled_from(BAD_VALUES[column]))
        bad.add((row + 1, column))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "generated.csv"
        path.write_text(_csv_text(rows), encoding="utf-8")
        message = _assert_rejected(shared, ["ingest", "--quiet"], path, ())
    for row, column in bad:
        assert f"row {row}, column {column}:" in message, (row, column, message)


@pytest.mark.slow
@FUZZ
@given(content=st.binary(max_size=2_000), header=st.booleans(),
       suffix=st.sampled_from([".csv", ".jsonl", ".json", ".parquet"]))
def test_random_bytes_never_crash_and_never_half_write(
    content: bytes, header: bool, suffix: str
) -> None:
    TRIED["hypothesis:random_bytes"] += 1
    prefix = (",".join(HEADER) + "\n").encode() if header and suffix == ".csv" else b""
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "store.duckdb"
        store.connect(db).close()
        before = file_fingerprint(db)
        path = Path(folder) / f"random{suffix}"
        path.write_bytes(prefix + content)
        result = _invoke(db, ["ingest", "--quiet"], path)
        assert result.exit_code in (0, 2), (result.output, result.exception)
        if result.exit_code == 2:
            assert result.stderr.startswith(f"error: {path.name}: rejected")
            assert file_fingerprint(db) == before
        else:
            con = store.connect(db, read_only=True)
            try:
                stored = con.execute("SELECT count(*) FROM extractions").fetchall()[0][0]
            finally:
                con.close()
            assert f"{stored} rows read" in result.output or f"{stored:,} added" in result.output


@pytest.mark.slow
@FUZZ
@given(verdicts=st.lists(st.sampled_from(["correct", "incorrect", "unclear", "yes", "Correct ",
                                           "1", "wrong"]), min_size=1, max_size=8),
       unknown=st.sets(st.integers(0, 7), max_size=3))
def test_generated_label_files_are_all_or_nothing(
    shared: Path, verdicts: list[str], unknown: set[int]
) -> None:
    TRIED["hypothesis:labels"] += 1
    lines = []
    bad = set()
    for index, verdict in enumerate(verdicts):
        extraction = f"missing{index}" if index in unknown else f"x{index + 100:06d}"
        status = "null" if verdict.strip().lower() == "incorrect" else ""
        lines.append(f"{extraction},{verdict},gen,2026-11-30T10:00:{index:02d}Z,{status}")
        if index in unknown:
            bad.add((index + 1, "extraction_id"))
        if verdict.strip().lower() not in ("correct", "incorrect", "unclear"):
            bad.add((index + 1, "verdict"))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "labels.csv"
        path.write_text("extraction_id,verdict,reviewer,labeled_at,corrected_status\n"
                        + "\n".join(lines) + "\n", encoding="utf-8")
        if not bad:
            return  # a valid file: covered by the corpus and tests/store
        message = _assert_rejected(shared, LABELS_IMPORT, path, ())
    for row, column in bad:
        assert f"row {row}, column {column}:" in message, (row, column, message)
