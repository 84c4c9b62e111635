"""The one way to open a store.

DuckDB locks its file per process: while one process holds a read-write
connection, every other process is refused, readers included. So connections
are opened late and closed early, and opening retries the lock error with a
bounded backoff before giving up with a message a person can act on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
from fieldtrust.store.errors import StoreError, StoreLockedError
from fieldtrust.store.migrations import migrate, pending_migrations

#: How long :func:`connect` keeps retrying a locked file, in seconds.
DEFAULT_LOCK_TIMEOUT = 10.0


def _is_lock_error(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def connect(
    path: str | os.PathLike[str],
    *,
    read_only: bool = False,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> duckdb.DuckDBPyConnection:
    """Open the store at ``path``, creating and migrating it when writable.

    Parameters
    ----------
    path
        The DuckDB file. ``":memory:"`` gives a throwaway store (tests).
    read_only
        Open without write access. The file must exist; a store made by an
        older fieldtrust is first upgraded (migrated) with write access once.
    lock_timeout
        Seconds to keep retrying while another process holds the file.

    Raises
    ------
    StoreLockedError
        The file stayed locked for ``lock_timeout`` seconds.
    StoreError
        The file is missing (read-only), or is not a DuckDB database.
    """
    target = str(path)
    if read_only and target != ":memory:" and not Path(target).exists():
        raise StoreError(
            f"no store at {target}: run `fieldtrust init --admin NAME` (or `fieldtrust demo`)"
            " first"
        )
    deadline = time.monotonic() + lock_timeout
    pause = 0.05
    while True:
        try:
            con = duckdb.connect(target, read_only=read_only)
            break
        except duckdb.IOException as exc:
            if not _is_lock_error(exc):
                raise StoreError(f"cannot open store {target}: {exc}") from exc
            if time.monotonic() >= deadline:
                raise StoreLockedError(
                    f"the store {target} is busy (another fieldtrust process is writing to it);"
                    " try again in a moment"
                ) from exc
            time.sleep(pause)
            pause = min(pause * 2, 1.0)
    _configure(con)
    # DuckDB draws a progress bar on the process's stdout for any query slower than
    # two seconds, which would corrupt `--json` output and the CLI's tables.
    con.execute("SET enable_progress_bar = false")
    if not read_only:
        migrate(con)
    elif target != ":memory:" and pending_migrations(con):
        # A store made by an older fieldtrust: readers expect the newer tables, so
        # upgrade it once with write access (as a writer would) and read on.
        con.close()
        try:
            connect(target, lock_timeout=lock_timeout).close()
        except StoreLockedError:
            raise
        except (StoreError, duckdb.Error) as exc:
            raise StoreError(
                f"the store {target} was made by an older fieldtrust and must be upgraded"
                f" once with write access, which failed: {exc}"
            ) from exc
        return connect(target, read_only=True, lock_timeout=lock_timeout)
    return con


def _configure(con: duckdb.DuckDBPyConnection) -> None:
    """Session settings every store connection needs (not shared by cursors)."""
    con.execute("SET TimeZone = 'UTC'")


def cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A new connection to the same open store, set up as :func:`connect` sets one up.

    Cheap (no file is opened) and independent: a result left unfetched on one
    cursor never blocks the next, so a page's reads can share one open store.
    """
    new = con.cursor()
    _configure(new)
    return new


@contextlib.contextmanager
def open_store(
    path: str | os.PathLike[str], *, read_only: bool = False
) -> Iterator[duckdb.DuckDBPyConnection]:
    """:func:`connect`, closed on exit: the short-lived connection the dashboard uses."""
    con = connect(path, read_only=read_only)
    try:
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the block in one transaction: all of it lands, or none of it."""
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException:
        con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")


def utc_now() -> dt.datetime:
    """Now, as the naive UTC timestamp the store keeps."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
