"""Rows done of a long step, read from DuckDB's own query progress.

DuckDB knows how far a running statement has got (``query_progress()``, a
percentage). :class:`RowProgress` reads it on a daemon thread while a step
runs and turns it into calls of ``progress(stage, rows_done, rows_total)``,
at most every :data:`POLL_SECONDS`, so a bar can show rows, rate and time
left during a single long statement (parsing a CSV, the insert). A step made
of several statements (validation asks one query per rule) is split into
parts: rows done = rows x (parts finished + the running statement's share) /
parts. Within a step the reports only go up. Nothing here prints: the caller's
callback decides what to show.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from types import TracebackType

import duckdb

#: ``progress(stage, done, total)``: ``stage`` names the step running now
#: ("validating a.csv"); ``done`` of its ``total`` rows are through it
#: (``total`` 0: not known yet, as while a CSV file is parsed).
Progress = Callable[[str, int, int], None]

#: Seconds between two reads of DuckDB's query progress.
POLL_SECONDS = 0.25

# DuckDB tracks a statement's progress only with its progress bar on; its own
# printing stays off (a library never prints).
_SETTINGS = {"enable_progress_bar": "true", "enable_progress_bar_print": "false"}


class RowProgress:
    """Report the rows done of each step to ``report`` between :meth:`start` and :meth:`stop`.

    Also a context manager. With ``report`` None every method does nothing
    (and no thread starts).
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, report: Progress | None) -> None:
        self._con = con
        self._report = report
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._saved: dict[str, str] = {}
        self._stage, self._rows, self._done = "", 0, 0
        self._finished, self._parts = 0, 1

    def __enter__(self) -> RowProgress:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Turn DuckDB's progress tracking on and start reading it."""
        if self._report is None or self._thread is not None:
            return
        for name, value in _SETTINGS.items():
            row = self._con.execute(f"SELECT current_setting('{name}')::VARCHAR").fetchone()
            self._saved[name] = str(row[0]).lower() if row else "false"
            self._con.execute(f"SET {name} = {value}")
        self._thread = threading.Thread(target=self._poll, name="fieldtrust-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop reading and put DuckDB's progress settings back as they were."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        for name, value in self._saved.items():
            self._con.execute(f"SET {name} = {'true' if value == 'true' else 'false'}")

    def step(self, stage: str, rows: int) -> None:
        """A new step over ``rows`` rows (0: not known) starts now."""
        if self._report is None:
            return
        with self._lock:
            self._stage, self._rows, self._done = stage, rows, 0
            self._finished, self._parts = 0, 1
            self._report(stage, 0, rows)

    def finish(self, rows: int) -> None:
        """Everything is done: report ``("done", rows, rows)`` and stop."""
        if self._report is None:
            return
        self.stop()
        self._report("done", rows, rows)

    def part(self, finished: int, parts: int) -> None:
        """``finished`` of the step's ``parts`` statements are done."""
        if self._report is None:
            return
        with self._lock:
            self._finished, self._parts = finished, max(parts, 1)
            self._advance(0.0)

    def _advance(self, share: float) -> None:
        """Report the rows done if they went up; ``share`` of the running part is done."""
        done = int(self._rows * min(1.0, (self._finished + share) / self._parts))
        if done > self._done and self._report is not None:
            self._done = done
            self._report(self._stage, done, self._rows)

    def _poll(self) -> None:
        while not self._stop.wait(POLL_SECONDS):
            try:
                percent = self._con.query_progress()
            except duckdb.Error:  # the connection is busy closing: nothing to show
                continue
            if percent >= 0:
                with self._lock:
                    self._advance(min(percent, 100.0) / 100.0)
