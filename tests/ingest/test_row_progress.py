"""Rows done of a long statement, read from DuckDB's own query progress."""

from __future__ import annotations

import duckdb
import pytest
from fieldtrust.ingest import query_progress as progress
from fieldtrust.ingest.query_progress import RowProgress


def test_a_long_statement_reports_rows_done_as_it_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(progress, "POLL_SECONDS", 0.01)
    con = duckdb.connect()
    con.execute("SET threads = 1")
    before = _progress_setting(con)
    seen: list[tuple[str, int, int]] = []
    with RowProgress(con, lambda s, d, t: seen.append((s, d, t))) as tracker:
        tracker.step("hashing", 1_000)
        tracker.part(0, 2)  # two statements: this one covers the first half of the rows
        # About a second of work in one statement, so several reads land inside it.
        con.execute("SELECT count(DISTINCT md5(i::VARCHAR)) FROM range(4000000) r(i)").fetchall()
        tracker.part(1, 2)
    done = [d for _, d, _ in seen]
    assert seen[0] == ("hashing", 0, 1_000)
    assert any(0 < d < 500 for d in done), seen  # inside the statement, from DuckDB
    assert done == sorted(done) and done[-1] == 500  # the first of two parts done
    assert {s for s, _, _ in seen} == {"hashing"} and {t for _, _, t in seen} == {1_000}
    assert _progress_setting(con) == before  # put back as it was
    assert capsys.readouterr() == ("", "")  # DuckDB's own bar never printed


def test_without_a_callback_nothing_runs() -> None:
    con = duckdb.connect()
    before = _progress_setting(con)
    tracker = RowProgress(con, None)
    tracker.start()
    tracker.step("x", 10)
    tracker.part(1, 2)
    assert tracker._thread is None
    assert _progress_setting(con) == before


def _progress_setting(con: duckdb.DuckDBPyConnection) -> object:
    # DuckDB's default depends on whether the process has a terminal, so the
    # tests compare with the value before rather than with a constant.
    row = con.execute("SELECT current_setting('enable_progress_bar')").fetchone()
    return row[0] if row else None
