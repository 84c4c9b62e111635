"""Helpers of the tests that start a real dashboard server and drive it in Chromium."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    """A TCP port nobody listens on now, on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Wait until the server at ``url`` answers its health check (never through a proxy)."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited early with code {process.returncode}")
        try:
            with opener.open(f"{url}/_stcore/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"the dashboard at {url} did not become healthy in {timeout:.0f} s")


#: True in the page while Streamlit runs the script, a rerun is asked for, or a skeleton is
#: still drawn. The app's own script state (``data-test-script-state`` on ``stApp``, which
#: Streamlit's frontend sets the moment a widget asks for a rerun) says so at once; the
#: status widget shows only once a run has lasted a while.
SCRIPT_RUNNING = (
    "() => document.querySelector('[data-testid=\"stApp\"]')?.dataset.testScriptState"
    " !== 'notRunning'"
    " || !!document.querySelector('[data-testid=\"stStatusWidget\"]')"
    " || !!document.querySelector('[data-testid=\"stSkeleton\"]')"
)
#: How long a page must stay quiet to count as settled: the gap between two runs (a
#: callback's rerun, a fragment after the page) is far shorter.
QUIET_SECONDS = 0.5


class QuietClock:
    """Says when a page has stayed quiet (not running) for ``seconds`` in a row.

    One look at the page at a time, so the sync and the async drivers share it.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._since: float | None = None

    def settled(self, running: bool) -> bool:
        """Record one look (``running``: :data:`SCRIPT_RUNNING`'s answer); True once quiet."""
        if running:
            self._since = None
            return False
        now = time.monotonic()
        if self._since is None:
            self._since = now
        return now - self._since > self.seconds


def settle(page: Any, timeout: float = 240.0) -> None:
    """Wait until Streamlit has finished running the script (quiet for :data:`QUIET_SECONDS`)."""
    page.wait_for_selector("[data-testid='stApp']")
    clock = QuietClock(QUIET_SECONDS)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if clock.settled(page.evaluate(SCRIPT_RUNNING)):
            return
        time.sleep(0.2)
    raise AssertionError(f"the page kept running for more than {timeout:.0f} s")


def server_env() -> dict[str, str]:
    """The environment of a server the tests start: this checkout importable first."""
    paths = [p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


@contextlib.contextmanager
def serving(db: Path, folder: Path, *serve_args: str,
            options: tuple[str, ...] = ()) -> Iterator[tuple[int, Path]]:
    """``fieldtrust --db DB OPTIONS serve --port P SERVE_ARGS``, run in ``folder``, until the
    block ends: (P, its log).

    The log's tail is printed when the block ends (pytest shows it for a failed test).
    """
    port = free_port()
    log_path = folder / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(db), *options, "serve",
             "--port", str(port), *serve_args],
            stdout=log, stderr=subprocess.STDOUT, cwd=folder, env=server_env(),
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", process)
        yield port, log_path
    finally:
        print(log_path.read_text(errors="replace")[-4000:])
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
