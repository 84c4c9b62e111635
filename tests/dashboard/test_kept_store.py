"""The store a dashboard keeps open between writes: reused, and let go when anyone asks.

Reopening the store for every key press threw DuckDB's caches away, so the
write path keeps its connection for the next write (``data.KEEP_OPEN``). That
must never lock anyone out: another fieldtrust process waiting in turn makes
it go at once, anything else in this process opening the store makes it go
first, and an idle one goes by itself.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from fieldtrust.dashboard import data

from fieldtrust import store

#: Another fieldtrust process opening the store in turn; prints how long it waited.
OPENER = """
import sys, time
from fieldtrust import store
started = time.monotonic()
store.connect(sys.argv[1], lock_timeout=float(sys.argv[2])).close()
print(round(time.monotonic() - started, 3))
"""


@pytest.fixture(autouse=True)
def nothing_kept_after() -> Iterator[None]:
    yield
    with data._CONNECTION_LOCK:
        data._let_go_now()


def _labels(con: duckdb.DuckDBPyConnection) -> int:
    return int(con.execute("SELECT count(*) FROM labels").fetchall()[0][0])


def test_the_next_write_reuses_the_kept_store(db_path: Path) -> None:
    with data.writing(str(db_path)) as con:
        first = con
    assert data._kept_connection() is first
    with data.writing(str(db_path)) as con:
        assert con is first
        assert _labels(con) == 0
    with data.reading(str(db_path)) as read:  # a read outside a page run reads on it too
        assert _labels(read) == 0
    assert data._kept_connection() is first


def test_another_process_waiting_in_turn_gets_the_store_long_before_the_keep_ends(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "KEEP_OPEN", 600.0)  # it would keep the store ten minutes
    with data.writing(str(db_path)):
        pass
    assert data._kept_connection() is not None
    opened = subprocess.run([sys.executable, "-c", OPENER, str(db_path), "20"],
                            capture_output=True, text=True, timeout=120)
    assert opened.returncode == 0, opened.stderr  # a StoreLockedError after 20 s otherwise
    assert float(opened.stdout) < 20
    assert data._kept_connection() is None


def test_an_idle_kept_store_goes_by_itself_so_a_program_that_does_not_queue_gets_in(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(data, "KEEP_OPEN", 0.2)
    with data.writing(str(db_path)):
        pass
    deadline = time.monotonic() + 30
    while data._kept_connection() is not None:
        assert time.monotonic() < deadline, "the idle store was never let go"
        time.sleep(0.05)
    # The duckdb shell, say: no turn, one try.
    raw = subprocess.run([sys.executable, "-c", "import sys, duckdb; duckdb.connect(sys.argv[1])",
                          str(db_path)], capture_output=True, text=True, timeout=120)
    assert raw.returncode == 0, raw.stderr


def test_opening_the_store_read_only_in_this_process_lets_the_kept_one_go(
    db_path: Path,
) -> None:
    """DuckDB refuses a read-only connection beside a read-write one in one process."""
    with data.writing(str(db_path)):
        pass
    assert data._kept_connection() is not None
    con = store.connect(db_path, read_only=True)
    try:
        assert _labels(con) == 0
    finally:
        con.close()
    assert data._kept_connection() is None
