"""The one way to open a store.

DuckDB locks its file per process: while one process holds a read-write
connection, every other process is refused, readers included. So connections
are opened late and closed early, and opening retries the lock error with a
bounded backoff before giving up with a message a person can act on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import duckdb
from fieldtrust.store.migrations import migrate, pending_migrations, unknown_migrations

from fieldtrust.errors import NoSpaceError, NotAStoreError, StoreError, StoreLockedError

#: How long :func:`connect` keeps retrying a locked file, in seconds.
DEFAULT_LOCK_TIMEOUT = 10.0

#: Beside the store, the file whose lock gives openers their turn (see :func:`_turn`).
QUEUE_SUFFIX = ".queue"

#: Every connection is opened with these: DuckDB would otherwise download and
#: load extensions on its own (it tried to, for a file that was not a database).
DUCKDB_CONFIG: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}

#: ``on_wait(message)`` is called once, at the first refusal, while :func:`connect`
#: waits for a locked store.
OnWait = Callable[[str], None]


def _is_lock_error(exc: duckdb.Error) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def is_no_space(exc: BaseException) -> bool:
    """Whether ``exc`` (DuckDB's or the OS's) says the disk is full."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, duckdb.Error) and (
        "No space left on device" in str(exc) or "Disk quota exceeded" in str(exc)
    )


def no_space_error(target: str, exc: BaseException) -> NoSpaceError:
    """The one message for a full disk: what to do, and that nothing was written."""
    return NoSpaceError(
        f"no space left on the device holding {target}: nothing was written;"
        " free some space and run the command again"
    )


#: Called with the path before every open in this process (see :func:`before_open`).
_BEFORE_OPEN: list[Callable[[str], None]] = []


def before_open(callback: Callable[[str], None]) -> None:
    """Have ``callback(path)`` called before this process opens any store.

    A dashboard keeps its store open between writes (``fieldtrust.dashboard.data``);
    DuckDB refuses a second connection of another kind to the same file in one
    process, so that connection is let go before anything else here opens the store.
    """
    if callback not in _BEFORE_OPEN:
        _BEFORE_OPEN.append(callback)


def others_waiting(path: str | os.PathLike[str]) -> bool:
    """Whether an opener (another process, or a thread of this one) waits for the store now.

    An opener holds the store's turn while it waits (:func:`_turn`), so its
    lock being taken says someone is waiting; whoever keeps the store open
    for its own next use lets go then.
    """
    fd = _queue_file(str(path) + QUEUE_SUFFIX)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def connect(
    path: str | os.PathLike[str],
    *,
    read_only: bool = False,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
    on_wait: OnWait | None = None,
    adopt: bool = False,
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
    on_wait
        Told once, as soon as the file is found locked, what is being waited for.
    adopt
        Turn a DuckDB file that holds other tables (not a fieldtrust store) into
        a store. Without it such a file is refused and left as it is.

    Raises
    ------
    StoreLockedError
        The file stayed locked for ``lock_timeout`` seconds.
    NotAStoreError
        The file is a DuckDB database but not a fieldtrust store (and not
        ``adopt``), or is empty and opened read-only; it was not changed.
    NoSpaceError
        The disk is full (making or upgrading the store).
    StoreError
        The file is missing (read-only), or is not a DuckDB database.
    """
    target = str(path)
    if target != ":memory:":
        for callback in _BEFORE_OPEN:
            callback(target)
    if read_only and target != ":memory:" and not Path(target).exists():
        raise StoreError(
            f"no store at {target}: run `fieldtrust init --admin NAME` (or `fieldtrust demo`)"
            " first"
        )
    creating = target != ":memory:" and not read_only and _is_new(target)
    try:
        con = _open(target, read_only=read_only, lock_timeout=lock_timeout, on_wait=on_wait)
    except StoreLockedError:
        raise  # someone else made it meanwhile: theirs, never removed
    except BaseException:
        if creating:
            _remove_unmade(target)
        raise
    try:
        _configure(con)
        # DuckDB draws a progress bar on the process's stdout for any query slower than
        # two seconds, which would corrupt `--json` output and the CLI's tables.
        con.execute("SET enable_progress_bar = false")
        if target != ":memory:":
            _refuse_foreign(con, target, read_only=read_only, adopt=adopt)
            _refuse_newer(con, target)
        if not read_only:
            migrate(con)
        outdated = read_only and target != ":memory:" and bool(pending_migrations(con))
    except BaseException as exc:
        con.close()
        if creating:
            _remove_unmade(target)
        if isinstance(exc, StoreError) or not isinstance(exc, duckdb.Error | OSError):
            raise
        if is_no_space(exc):
            raise no_space_error(target, exc) from exc
        raise StoreError(f"cannot open store {target}: {_first_line(exc)}") from exc
    if outdated:
        # A store made by an older fieldtrust: readers expect the newer tables, so
        # upgrade it once with write access (as a writer would) and read on.
        con.close()
        try:
            connect(target, lock_timeout=lock_timeout, on_wait=on_wait).close()
        except (StoreLockedError, NoSpaceError):
            raise
        except (StoreError, duckdb.Error) as exc:
            raise StoreError(
                f"the store {target} was made by an older fieldtrust and must be upgraded"
                f" once with write access, which failed: {exc}"
            ) from exc
        return connect(target, read_only=True, lock_timeout=lock_timeout)
    return con


def _is_new(target: str) -> bool:
    """Whether opening ``target`` makes a new store (no file, or an empty one nobody holds).

    An empty file is what making a store on a full disk left behind (before
    :func:`_remove_unmade`): DuckDB refuses to open it, so it is removed and the
    store made anew. A process holding it (DuckDB locks its file) keeps it.
    """
    try:
        if os.stat(target).st_size:
            return False
        with open(target, "rb+") as handle:
            fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if os.fstat(handle.fileno()).st_size == 0:
                os.unlink(target)
        return True
    except FileNotFoundError:
        return True
    except OSError:  # held by another process, or not ours to touch: DuckDB will say
        return False


def _remove_unmade(target: str) -> None:
    """Remove a store this process began to make and could not finish (a full disk, say).

    Left behind, its few bytes were a file that the advised rerun could not
    open ("not a valid DuckDB database file"). Its queue file goes too: an
    opener still holding that turn only shares it with the next one, once.
    """
    for path in (target, target + ".wal", target + QUEUE_SUFFIX):
        with contextlib.suppress(OSError):
            os.unlink(path)


def _refuse_newer(con: duckdb.DuckDBPyConnection, target: str) -> None:
    """Refuse a store a newer fieldtrust migrated: this code would misread or damage it."""
    unknown = unknown_migrations(con)
    if unknown:
        raise StoreError(
            f"{target} was upgraded by a newer fieldtrust (its migration {unknown[0]} is"
            " unknown here): upgrade fieldtrust to open it; it was left unchanged"
        )


def _open(
    target: str, *, read_only: bool, lock_timeout: float, on_wait: OnWait | None
) -> duckdb.DuckDBPyConnection:
    """``duckdb.connect``, waiting for a locked file in turn until ``lock_timeout``."""
    if target == ":memory:":
        return duckdb.connect(target, read_only=read_only, config=DUCKDB_CONFIG)
    started = time.monotonic()
    waiting = _Waiting(target, started, lock_timeout, on_wait)
    with _turn(target, waiting) as in_turn:
        # Only the opener whose turn it is asks DuckDB, so it may ask often; an opener
        # without a turn (a folder it cannot write) backs off as before.
        pause, most = (0.01, 0.1) if in_turn else (0.05, 1.0)
        while True:
            try:
                return duckdb.connect(target, read_only=read_only, config=DUCKDB_CONFIG)
            except duckdb.Error as exc:
                if not _is_lock_error(exc):
                    raise _open_error(target, exc) from exc
                waiting.wait(pause, exc)
                pause = min(pause * 2, most)


@dataclass
class _Waiting:
    """One opener's wait for a locked store: said once, given up at ``lock_timeout``."""

    target: str
    started: float
    lock_timeout: float
    on_wait: OnWait | None
    told: bool = False

    def wait(self, pause: float, cause: BaseException | None = None) -> None:
        """Sleep ``pause`` (less if the time is up), or raise :class:`StoreLockedError`."""
        waited = time.monotonic() - self.started
        if waited >= self.lock_timeout:
            raise StoreLockedError(
                f"the store {self.target} was still locked by another process after"
                f" {waited:.0f} s; try again when it is free"
            ) from cause
        if self.on_wait is not None and not self.told:
            self.told = True
            self.on_wait(
                f"waiting for the store {self.target}: another process holds its lock"
                f" (giving up after {self.lock_timeout:.0f} s)"
            )
        time.sleep(min(pause, max(self.lock_timeout - waited, 0.0)))


@contextlib.contextmanager
def _turn(target: str, waiting: _Waiting) -> Iterator[bool]:
    """Hold the store's turn while opening it; True if there is a turn to hold.

    DuckDB's file lock is no queue: a waiter only retries now and then, so a
    process whose threads open the store one after another (a dashboard with
    many reviewers, the CLI's checks) can hold it for minutes while an ingest
    or another dashboard is told, over and over, that it is busy. The lock on
    the queue file beside the store is held only while opening: whoever waits
    for the store holds it, so the next opener, in this process or another,
    waits behind. Openers take turns, and a wait is as long as the work of
    those ahead. ``flock`` locks belong to the open file, so the threads of one
    process take turns too; the kernel drops the lock of a process that dies.
    """
    fd = _queue_file(target + QUEUE_SUFFIX)
    if fd is None:  # a folder we may not write, and no queue file yet: no turns
        yield False
        return
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waiting.wait(0.005)
        yield True
    finally:
        os.close(fd)  # releases the turn


def _queue_file(path: str) -> int | None:
    """The queue file, opened (made if need be); None when it can be neither.

    ``flock`` needs no write access, so a queue file another user made (the
    dashboard's service account, say) is opened read-only and still queues.
    """
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    except OSError:
        pass
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _open_error(target: str, exc: duckdb.Error) -> StoreError:
    """What a refusal other than the lock means: a full disk, or a file that is no store."""
    if is_no_space(exc):
        return no_space_error(target, exc)
    # A truncated or corrupt file, or one that is no database at all
    # (another database's file asks for an extension, never installed).
    reason = "it is another kind of database file, not DuckDB" if "Extension" in str(exc) \
        else _first_line(exc)
    return StoreError(
        f"cannot open store {target}: {reason} (is it a fieldtrust store, and whole?)"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    line = text[0] if text else type(exc).__name__
    return line if len(line) <= 300 else line[:297] + "..."


def _refuse_foreign(
    con: duckdb.DuckDBPyConnection, target: str, *, read_only: bool, adopt: bool
) -> None:
    """Refuse a DuckDB file that is not a fieldtrust store, before anything writes to it.

    A store has ``schema_migrations``. A file without it that holds nothing is
    a new store when opened for writing; one that holds other tables is the
    user's own database, only made a store with ``adopt`` (``fieldtrust init --adopt``).
    """
    counts = con.execute(
        "SELECT count(*) FILTER (WHERE table_name = 'schema_migrations' AND schema_name = 'main'),"
        " count(*) FROM duckdb_tables() WHERE database_name = current_database()"
    ).fetchall()[0]
    views = con.execute(
        "SELECT count(*) FROM duckdb_views() WHERE database_name = current_database()"
        " AND NOT internal"
    ).fetchall()[0][0]
    is_store, objects = bool(counts[0]), int(counts[1]) + int(views)
    if is_store or (objects == 0 and not read_only) or adopt:
        return
    held = f"it holds {objects} other tables and views" if objects else "it is empty"
    raise NotAStoreError(
        f"{target}: not a fieldtrust store (run `fieldtrust init` to make it one);"
        f" {held}, left unchanged"
    )


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
    path: str | os.PathLike[str],
    *,
    read_only: bool = False,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> Iterator[duckdb.DuckDBPyConnection]:
    """:func:`connect`, closed on exit: the short-lived connection the dashboard uses."""
    con = connect(path, read_only=read_only, lock_timeout=lock_timeout)
    try:
        yield con
    finally:
        con.close()


@contextlib.contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
    """Run the block in one transaction: all of it lands, or none of it.

    Raises
    ------
    NoSpaceError
        The disk filled up; the transaction was rolled back.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        yield con
    except BaseException as exc:
        con.execute("ROLLBACK")
        if is_no_space(exc):
            raise no_space_error(_db_file(con), exc) from exc
        raise
    try:
        con.execute("COMMIT")
    except duckdb.Error as exc:
        if is_no_space(exc):
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise no_space_error(_db_file(con), exc) from exc
        raise


def _db_file(con: duckdb.DuckDBPyConnection) -> str:
    """The file behind ``con``, for messages."""
    try:
        rows = con.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        ).fetchall()
    except duckdb.Error:
        return "the store"
    return str(rows[0][0]) if rows and rows[0][0] else "the store"


def utc_now() -> dt.datetime:
    """Now, as the naive UTC timestamp the store keeps."""
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)
