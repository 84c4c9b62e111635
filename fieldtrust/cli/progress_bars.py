"""Progress of long work on stderr: a rich bar on a terminal, plain lines otherwise.

Library functions report ``progress(stage, done, total)``; this turns the
calls into a bar with what is done, the rate and the time left (rich), or,
when stderr is not a terminal (a log, CI), one line per stage or per tenth
of the work. Commands pass no callback with ``--json``. A ``total`` of 0
means not known yet (ingest parsing a CSV file): the bar then shows the
time spent only.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import click

from fieldtrust.cli.terminal import echo

Progress = Callable[[str, int, int], None]


def stage_progress(unit: str = "steps", plain: Progress | None = None) -> Progress:
    """A progress callback for the current command (closed when it ends).

    ``plain`` replaces the default plain lines when stderr is not a terminal.
    """
    if sys.stderr.isatty():
        return _rich_progress(unit)
    return plain or _plain_progress(unit)


def _plain_progress(unit: str) -> Progress:
    start = time.monotonic()
    last = {"stage": "", "tenth": -1}

    def report(stage: str, done: int, total: int) -> None:
        tenth = (10 * done) // total if total else 10
        if stage == "done" or (stage == last["stage"] and tenth == last["tenth"]):
            return
        last["stage"], last["tenth"] = stage, tenth
        elapsed = time.monotonic() - start
        counts = f"{done:,}/{total:,} {unit}, " if total else ""
        echo(f"[{counts}{elapsed:.1f} s] {stage}", err=True)

    return report


def _rich_progress(unit: str) -> Progress:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        ProgressColumn,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.progress import Progress as RichProgress
    from rich.text import Text

    class RateColumn(ProgressColumn):  # rich's speed column counts bytes
        def render(self, task):  # type: ignore[no-untyped-def]
            return Text("" if task.speed is None else f"{task.speed:,.1f} {unit}/s")

    bar = RichProgress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn(unit), TaskProgressColumn(), RateColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), transient=False,
    )
    task = bar.add_task("", total=None)

    def report(stage: str, done: int, total: int) -> None:
        if not bar.live.is_started:
            # Started at the first report, so work that reports nothing (a draw
            # on the store's own rows) shows no empty bar.
            bar.start()
            ctx = click.get_current_context(silent=True)
            if ctx is not None:
                ctx.call_on_close(bar.stop)
        if stage != bar.tasks[0].description:  # rate and time left are per stage
            bar.reset(task, description=stage, completed=done, total=total or None)
        bar.update(task, completed=done, total=total or None)
        if stage == "done":
            bar.stop()

    return report
