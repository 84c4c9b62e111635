"""Every numeric option of every command, given 0, -1 and an absurdly large value.

The command either does its work (exit 0) or refuses the value with one
``error:`` line and exit code 2; it never shows a traceback. The commands
are found by walking the click tree, so a new command or option is covered
without editing this file.

Run in-process with click's CliRunner on a small demo store (2,000 rows);
each command gets its own copy, since some of them write (sample, recalibrate,
decide). Two commands are not run in-process:

- ``serve`` replaces the process with a Streamlit server (``os.execve``); it
  runs as a subprocess with a timeout, so a value it wrongly accepts shows as
  a server that had to be killed rather than as a hung test run.
- ``extract`` calls the Anthropic API (its numeric options, ``--wait`` and
  ``--poll-interval``, only matter while polling a batch there); its option
  checks are covered by tests/fieldtrust/cli/test_extract_cmds.py over a mock transport.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from fieldtrust.cli.main import cli

VALUES = ("0", "-1", str(10**12))
WEEK = "2026-W48"

#: What each command needs besides the option under test (required arguments, a user).
BASE_ARGS: dict[str, list[str]] = {
    "demo": ["--rows", "200", "--no-labels"],
    "histogram": ["--doc-type", "invoice", "--field", "total"],
    "sample": ["--week", WEEK, "--as", "quinn"],
    "decide": ["reject", "--doc-type", "invoice", "--field", "total", "--as", "maya",
               "--comment", "checking option values"],
}
#: Commands run elsewhere (see the module docstring).
SUBPROCESS = {"serve"}
NOT_RUN = {"extract"}


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        else:
            yield " ".join((*path, name)), command


def _numeric_options(command: click.Command) -> list[str]:
    return [
        p.opts[0]
        for p in command.params
        if isinstance(p, click.Option) and not p.is_flag
        and isinstance(p.type, click.types.IntParamType | click.types.FloatParamType)
    ]


CASES = [
    (name, option, value)
    for name, command in _leaves(cli)
    for option in _numeric_options(command)
    for value in VALUES
]


def _with(base: list[str], option: str, value: str) -> list[str]:
    """``base`` with ``option`` set to ``value`` (replacing a value ``base`` gives it)."""
    args = list(base)
    if option in args:
        del args[args.index(option) : args.index(option) + 2]
    return [*args, option, value]


def _check(exit_code: int, output: str, what: str) -> None:
    assert exit_code in (0, 2), f"{what}: exit {exit_code}\n{output}"
    assert "Traceback" not in output, f"{what}:\n{output}"
    if exit_code == 2:
        errors = [line for line in output.splitlines() if line.lower().startswith("error:")]
        assert len(errors) == 1, f"{what}: expected one error line\n{output}"


@pytest.fixture(scope="module")
def small_demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("option-values") / "demo.duckdb"
    result = CliRunner().invoke(cli, ["--db", str(path), "demo", "--rows", "2000"])
    assert result.exit_code == 0, result.output
    return path


def test_the_walk_finds_the_numeric_options() -> None:
    found = {(name, option) for name, option, _ in CASES}
    assert {("calibrate", "--weeks"), ("histogram", "--bins"), ("queue", "--limit"),
            ("demo", "--rows"), ("serve", "--port")} <= found
    assert len(found) >= 15


@pytest.mark.parametrize(("name", "option", "value"),
                         [c for c in CASES if c[0] not in SUBPROCESS | NOT_RUN])
def test_numeric_option_exits_0_or_2_without_a_traceback(
    small_demo: Path, tmp_path: Path, name: str, option: str, value: str
) -> None:
    # demo refuses a store that holds extractions: give it a fresh path.
    db = tmp_path / "s.duckdb"
    if name != "demo":
        shutil.copyfile(small_demo, db)
    args = ["--db", str(db), *name.split(), *_with(BASE_ARGS.get(name, []), option, value)]
    result = CliRunner().invoke(cli, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        pytest.fail(f"{' '.join(args[2:])}: {result.exception!r}\n{result.output}")
    _check(result.exit_code, result.output, " ".join(args[2:]))


@pytest.mark.parametrize("value", VALUES)
def test_serve_refuses_a_port_that_is_not_one(small_demo: Path, tmp_path: Path,
                                              value: str) -> None:
    db = shutil.copyfile(small_demo, tmp_path / "s.duckdb")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(db), "serve",
             "--port", value],
            capture_output=True, text=True, timeout=60,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"serve --port {value} started a server")
    _check(done.returncode, done.stdout + done.stderr, f"serve --port {value}")
    assert done.returncode == 2
