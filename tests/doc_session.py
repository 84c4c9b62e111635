"""Run a document's shell sessions and compare what they print with what it shows.

A session is a fenced block whose lines start with ``$ ``: each such line is a
command, the lines under it up to the next ``$ `` are what it printed when the
page was written. A command shown with output must print that output (after
:func:`normalise`: times, durations, ids and hashes vary by run); a command
shown without output must succeed. ``export NAME=VALUE`` sets the variable for
the commands after it, ``cd DIR`` changes folder, as in a shell.

Regenerate a page's outputs (after a change that alters them) with::

    python tests/doc_session.py docs/quickstart.md

which runs the page the way ``tests/test_first_hour.py`` does (on a clone of
the checkout's last commit: commit first) and rewrites each shown output with
what the command printed.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

#: What varies from one run of a page to the next, and what stands for it.
_VARYING = (
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<hash>"),
    (re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?Z?"), "<time>"),
    (re.compile(r"\b\d+\.\d s\b"), "<s>"),
    (re.compile(r'"seq": \d+'), '"seq": <n>'),
    # The page's home folder (a temporary one in the test) and the key made there.
    (re.compile(r"\S*/\.config/fieldtrust/"), "~/.config/fieldtrust/"),
    (re.compile(r"\bsigning key [0-9a-f]{16}\b"), "signing key <key id>"),
    (re.compile(r'"key_id": "[0-9a-f]{16}"'), '"key_id": "<key id>"'),
    (re.compile(r'"value": "[A-Za-z0-9+/=]{80,}"'), '"value": "<signature>"'),
)


#: A progress line (``[450/1,600 rows, 0.5 s] validating x.csv``): how many a run prints
#: depends on the machine's speed, so comparisons leave them out.
_PROGRESS = re.compile(r"^\[[^\]]*\d s\] ")


def normalise(text: str) -> str:
    """``text`` without progress lines, times, durations, ids and hashes, or trailing blanks."""
    lines = [line for line in text.strip("\n").splitlines() if not _PROGRESS.match(line)]
    text = "\n".join(line.rstrip() for line in lines)
    for pattern, stand_in in _VARYING:
        text = pattern.sub(stand_in, text)
    return text


@dataclass
class Step:
    """One ``$ `` command of a page, what the page shows under it, where it sits."""

    command: str
    shown: str
    line: int  # the command's line in the page, from 1
    output_lines: tuple[int, int] = (0, 0)  # the shown output's lines [start, end)


def steps(page: str) -> list[Step]:
    """Every command of every session of ``page``, in order."""
    found: list[Step] = []
    lines = page.splitlines()
    in_block = False
    current: Step | None = None
    out: list[str] = []

    def close(end: int) -> None:
        nonlocal current
        if current is not None:
            current.shown = "\n".join(out)
            current.output_lines = (current.line, end)
            found.append(current)
            current = None

    for number, text in enumerate(lines):
        if text.startswith("```"):
            if in_block:
                close(number)
            in_block = not in_block
            continue
        if not in_block:
            continue
        if text.startswith("$ "):
            close(number)
            current, out = Step(text[2:], "", number + 1), []
        elif current is not None:
            out.append(text)
    return found


@dataclass
class Shell:
    """A folder and environment in which a page's commands run, one after another."""

    cwd: Path
    env: dict[str, str]
    #: Called with a command before it runs (a test fills a sheet before its import).
    before: Callable[[str, Shell], None] = field(default=lambda command, shell: None)

    def run(self, command: str) -> subprocess.CompletedProcess[str]:
        words = shlex.split(command)
        if words[0] == "export":
            name, value = words[1].split("=", 1)
            if value.startswith("~/"):  # as bash expands a tilde in an assignment
                value = str(Path(self.env.get("HOME") or Path.home()) / value[2:])
            self.env[name] = value
            return subprocess.CompletedProcess(command, 0, "", "")
        if words[0] == "cd":
            self.cwd = (self.cwd / words[1]).resolve()
            return subprocess.CompletedProcess(command, 0, "", "")
        self.before(command, self)
        # One pipe for both streams, unbuffered: the order a terminal shows.
        return subprocess.run(["bash", "-c", command], cwd=self.cwd,
                              env={**self.env, "PYTHONUNBUFFERED": "1"},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=600)


def session(page: str, shell: Shell) -> Iterator[tuple[Step, str]]:
    """Run every command of ``page`` in ``shell``; yield each with what it printed.

    Stops with an AssertionError naming the command when one fails.
    """
    for step in steps(page):
        done = shell.run(step.command)
        printed = done.stdout
        assert done.returncode == 0, f"line {step.line}: `$ {step.command}` failed: {printed}"
        yield step, printed


def rewrite(page: str, outputs: list[tuple[Step, str]]) -> str:
    """``page`` with each shown output replaced by what its command printed."""
    lines = page.splitlines()
    for step, printed in sorted(outputs, key=lambda pair: -pair[0].line):
        if not step.shown.strip():
            continue  # a command shown without output stays so
        start, end = step.output_lines
        lines[start:end] = [line.rstrip() for line in printed.rstrip("\n").splitlines()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    # tests/ holds a folder named fieldtrust: import the installed package first.
    tests = sys.path.pop(0)
    import fieldtrust.cli.main  # noqa: F401

    sys.path.append(tests)
    from test_first_hour import quickstart_shell  # the test's folder, log and sheets

    (doc,) = sys.argv[1:]
    path = Path(doc)
    text = path.read_text(encoding="utf-8")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        shell = quickstart_shell(Path(tmp), text, dict(os.environ))
        path.write_text(rewrite(text, list(session(text, shell))), encoding="utf-8")
