"""Store access and downloads of the dashboard, without a browser."""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from fieldtrust.dashboard import data
from fieldtrust.dashboard.downloads import csv_bytes, escape_formula, parquet_bytes

from fieldtrust import store


@pytest.mark.parametrize(
    ("cell", "expected"),
    [
        ("=HYPERLINK(\"http://x\")", "'=HYPERLINK(\"http://x\")"),
        ("+41 22 000", "'+41 22 000"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\tcmd", "'\tcmd"),
        ("ACME GmbH", "ACME GmbH"),
        ("", ""),
        (-0.5, -0.5),
        (None, None),
    ],
)
def test_formula_looking_text_is_escaped(cell: object, expected: object) -> None:
    assert escape_formula(cell) == expected


def test_csv_escapes_text_cells_but_keeps_numbers() -> None:
    frame = pd.DataFrame({"value": ["=1+1", "total"], "delta": [-1.5, 2.0]})
    back = pd.read_csv(io.BytesIO(csv_bytes(frame)))
    assert back["value"].tolist() == ["'=1+1", "total"]
    assert back["delta"].tolist() == [-1.5, 2.0]


def test_parquet_keeps_values_exactly() -> None:
    frame = pd.DataFrame({"value": ["=1+1", None], "n": [3, 4], "p": [0.125, float("nan")]})
    back = pq.read_table(io.BytesIO(parquet_bytes(frame))).to_pandas()
    pd.testing.assert_frame_equal(back, frame)


def test_data_version_changes_when_a_label_lands(con_path: Path) -> None:
    before = data.data_version(str(con_path))
    assert before is not None and before.empty
    con = store.connect(con_path)
    try:
        con.execute(
            "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round,"
            " labeled_at) VALUES ('l1', 'e1', 'correct', 'ana', 'import', now()::TIMESTAMP)"
        )
    finally:
        con.close()
    after = data.data_version(str(con_path))
    assert after is not None
    assert (after.labels, before.labels) == (1, 0)
    assert after != before  # a new cache key: the next page run reads fresh data


def test_no_version_and_no_file_for_a_missing_store(tmp_path: Path) -> None:
    missing = tmp_path / "none.duckdb"
    assert data.data_version(str(missing)) is None
    assert not missing.exists()


def test_db_path_comes_from_the_command_line_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sys.argv", ["app.py", "--db", "/a/b.duckdb"])
    assert data.db_path() == "/a/b.duckdb"
    monkeypatch.setattr("sys.argv", ["app.py"])
    monkeypatch.setenv("FIELDTRUST_DB", "/c/d.duckdb")
    assert data.db_path() == "/c/d.duckdb"


@pytest.fixture
def con_path(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    store.connect(path).close()
    return path


def test_a_page_runs_reads_share_one_open_store_and_a_write_in_between_works(
    tmp_path: Path,
) -> None:
    path = str(tmp_path / "run.duckdb")
    store.connect(path).close()
    with data.run_reads(path):
        with data.reading(path) as first:
            database = first.sql("SELECT current_database()").fetchall()
            first.execute("SELECT 42")  # a result left unfetched, as some library reads do
        with data.reading(path) as second:  # not blocked by it
            assert second.sql("SELECT 1").fetchall() == [(1,)]
            assert second.sql("SELECT current_setting('TimeZone')").fetchall() == [("UTC",)]
        opened = data._RUN.con
        with data.reading(path):
            assert data._RUN.con is opened  # still the one connection
        with data.writing(path) as con:  # closes the run's read-only connection first
            con.execute("CREATE TABLE t AS SELECT 7 AS x")
        with data.reading(path) as third:  # reopened, and sees the write
            assert third.sql("SELECT x FROM t").fetchall() == [(7,)]
    assert data._RUN.con is None and database
    with data.writing(path) as con:  # the run let go of the store and the lock
        con.execute("INSERT INTO t VALUES (8)")


HOSTILE = '<a href="http://evil">x</a><b>'


def test_charts_show_names_from_files_as_written() -> None:
    from fieldtrust.dashboard import charts, heatmap

    strata = pd.DataFrame({
        "doc_type": [HOSTILE], "field": ["tot<i>al"], "accuracy": [0.9], "accuracy_low": [0.8],
        "accuracy_high": [0.95], "n_labeled": [120], "ece": [0.05],
    })
    cells = heatmap.heatmap_cells(strata)
    errors = pd.DataFrame({"doc_type": [HOSTILE], "field": ["total"],
                           "error_type": ["misread_characters"], "count": [3]})
    breakdown = charts.error_breakdown(errors)
    written = "&lt;a href=\"http://evil\"&gt;x&lt;/a&gt;&lt;b&gt;"
    # Vega draws text as text: the names go to it as written, plotly's as entities.
    assert (list(cells["doc_type"]), list(cells["field"])) == ([HOSTILE], ["tot<i>al"])
    assert list(breakdown.data[0].y) == [f"{written} · total"]
    title = charts.reliability_diagram(
        pd.DataFrame({"confidence": [0.9], "accuracy": [0.8], "low": [0.7], "high": [0.9],
                      "n": [40]}),
        title=f"Reliability: {HOSTILE}").layout.title.text
    assert title == f"Reliability: {written}"
    assert charts.as_text("R&D <sub>") == "R&amp;D &lt;sub&gt;"
