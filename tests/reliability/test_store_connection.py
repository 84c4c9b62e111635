"""The store connection itself: nothing printed behind the CLI's back, bounded lock waits.

DuckDB draws a progress bar on the process's stdout (the C library writes to
file descriptor 1) for any query slower than two seconds. Behind
``fieldtrust ingest --json`` on a large file or a loaded machine, that bar
landed in the JSON; ``store.connect`` turns it off.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fieldtrust import store
from fieldtrust.errors import StoreLockedError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_slow_query_prints_nothing_on_stdout(db_path: Path) -> None:
    # One query on one thread past DuckDB's two-second progress-bar delay, however fast
    # the machine or its load: each query too short sizes the next to about 3 s.
    code = (
        "import store, sys, time\n"
        "con = store.connect(sys.argv[1])\n"
        "con.execute('SET threads = 1')\n"
        "def run(n):\n"
        "    started = time.monotonic()\n"
        "    con.execute(f'SELECT sum(hash(i)) FROM range(0, {n}) t(i)').fetchall()\n"
        "    return time.monotonic() - started\n"
        "n, took = 50_000_000, 0.0\n"
        "for _ in range(6):\n"
        "    took = run(n)\n"
        "    if took > 2.2:\n"
        "        break\n"
        "    n = int(n * max(1.5, 3.0 / max(took, 1e-3)))\n"
        "print('done', took > 2.2)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, str(db_path)], capture_output=True,
                            text=True, cwd=ROOT, timeout=120, check=True)
    assert result.stdout == "done True\n"
    assert "%" not in result.stderr


def test_a_locked_store_is_a_friendly_error_after_a_bounded_wait(db_path: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import store, sys, time\ncon = store.connect(sys.argv[1])\nprint('held', flush=True)\n"
         "time.sleep(60)\n", str(db_path)],
        stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        with pytest.raises(StoreLockedError, match=r"still locked by another process after 1 s"):
            store.connect(db_path, lock_timeout=1.0)
        waited = time.monotonic() - started
        assert 0.9 < waited < 5.0
    finally:
        holder.kill()
        holder.wait()
    store.connect(db_path, lock_timeout=5.0).close()  # free again once the holder is gone
