"""Run a function in a fresh child process and measure that child's peak memory.

The child is forked from the benchmark process after the libraries are
imported, so it starts with fieldtrust, DuckDB, pandas and scipy loaded (as
a CLI or dashboard process would be) but with no DuckDB database open and no
data in memory. Its peak resident set size comes from ``os.wait4``: the
kernel's ``ru_maxrss`` of exactly that child (``getrusage(RUSAGE_CHILDREN)``
would give the largest of all children so far).

The parent never opens a DuckDB database: DuckDB's thread pool and file
locks must not be inherited by a fork.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class ChildFailed(RuntimeError):
    """The child raised; the message carries its traceback."""


class ChildTimeout(ChildFailed):
    """The child ran longer than allowed and was killed."""


@dataclass(frozen=True)
class Isolated:
    """What the child returned, and its peak resident memory in bytes."""

    value: Any
    peak_rss: int


def run_isolated(
    fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kwargs: Any
) -> Isolated:
    """``fn(*args, **kwargs)`` in a forked child; its result must pickle.

    A child still running after ``timeout`` seconds is killed
    (:class:`ChildTimeout`): one hung case must not stall the whole run.
    """
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: run, send the result, leave without cleanup handlers
        os.close(read_fd)
        code = 0
        try:
            payload = pickle.dumps(("ok", fn(*args, **kwargs)))
        except BaseException:
            payload = pickle.dumps(("error", traceback.format_exc()))
            code = 1
        with os.fdopen(write_fd, "wb") as pipe:
            pipe.write(payload)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    os.close(write_fd)
    try:
        data = _read_all(read_fd, pid, timeout)
    finally:
        os.close(read_fd)
    _, status, usage = os.wait4(pid, 0)
    if data is None:
        raise ChildTimeout(f"killed after {timeout:.0f} s without finishing")
    if not data:
        raise ChildFailed(f"the child died without a result (wait status {status})")
    kind, value = pickle.loads(data)
    if kind == "error":
        raise ChildFailed(value)
    return Isolated(value, int(usage.ru_maxrss) * 1024)  # Linux reports kilobytes


def _read_all(fd: int, pid: int, timeout: float | None) -> bytes | None:
    """Everything the child writes to ``fd``; None (and the child killed) on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    chunks: list[bytes] = []
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            return None
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
