"""Openers of a busy store take turns: a process whose threads reopen it cannot starve another.

DuckDB's file lock is no queue. Before turns, a process reopening the store
from eight threads (a dashboard serving many reviewers) held it nearly all
the time, and another process asking every second was refused for seconds on
end: five of ten opens with a 3 s wait gave up. Here that process runs for
real beside the test, and every open must get its turn.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fieldtrust.store.connection import QUEUE_SUFFIX

from fieldtrust import store

ROOT = Path(__file__).resolve().parents[2]

#: Eight threads, each opening the store read-write, holding it 0.1 s and closing it,
#: one at a time (as the dashboard's connection lock lets them), until the file STOP exists.
BUSY_PROCESS = """
import sys, threading, time
from pathlib import Path
from fieldtrust import store
path, stop, ready = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
lock = threading.Lock()
def work():
    while not stop.exists():
        with lock:
            con = store.connect(path, lock_timeout=120)
            con.execute("SELECT count(*) FROM extractions").fetchall()
            ready.touch()
            time.sleep(0.1)
            con.close()
threads = [threading.Thread(target=work) for _ in range(8)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
"""


def test_a_process_reopening_the_store_from_eight_threads_leaves_others_their_turn(
    db_path: Path, tmp_path: Path
) -> None:
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    busy = subprocess.Popen(
        [sys.executable, "-c", BUSY_PROCESS, str(db_path), str(stop), str(ready)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert busy.poll() is None, busy.communicate()[1]
            assert time.monotonic() < deadline, "the busy process never opened the store"
            time.sleep(0.05)
        opened = 0
        for _ in range(10):
            # StoreLockedError here is the starvation turns prevent.
            store.connect(db_path, read_only=True, lock_timeout=3).close()
            opened += 1
            time.sleep(0.3)
        assert busy.poll() is None, "the busy process stopped: nothing was contended"
    finally:
        stop.touch()
        _, err = busy.communicate(timeout=60)
    assert busy.returncode == 0, err
    assert opened == 10


def test_a_store_in_a_folder_nobody_may_write_opens_without_turns(
    db_path: Path, tmp_path: Path
) -> None:
    """The queue file can be neither made nor opened: the store still opens (read-only)."""
    queue = Path(str(db_path) + QUEUE_SUFFIX)
    queue.unlink(missing_ok=True)
    os.chmod(tmp_path, 0o555)
    try:
        if os.access(tmp_path, os.W_OK):  # root writes anywhere: a name that leads nowhere
            os.chmod(tmp_path, 0o755)
            queue.symlink_to(tmp_path / "gone" / "store.duckdb.queue")
        con = store.connect(db_path, read_only=True)
        assert con.execute("SELECT count(*) FROM extractions").fetchall() == [(0,)]
        con.close()
    finally:
        os.chmod(tmp_path, 0o755)


def test_a_queue_file_another_user_made_still_queues(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Write access refused (the dashboard's service account made the file): opened read-only,
    its lock still keeps a second opener out until the first lets go."""
    import fcntl

    from fieldtrust.store import connection

    real_open = os.open

    def no_write(path: str, flags: int, *args: int) -> int:
        if flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, *args)

    queue = str(db_path) + QUEUE_SUFFIX
    Path(queue).touch()
    monkeypatch.setattr(connection.os, "open", no_write)
    first, second = connection._queue_file(queue), connection._queue_file(queue)
    assert first is not None and second is not None
    try:
        fcntl.flock(first, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(BlockingIOError):
            fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.close(first)
        first = None
        fcntl.flock(second, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once the first is gone
    finally:
        for fd in (first, second):
            if fd is not None:
                os.close(fd)
    monkeypatch.undo()
    store.connect(db_path, read_only=True).close()
