"""No bare builtin error reaches a user: fieldtrust errors, or a bug's traceback.

The library raises what a person can act on as a :class:`fieldtrust.errors.FieldtrustError`
(with the value and what to do); the CLI's one boundary
(``FieldtrustGroup.invoke``) prints it as one ``error:`` line with exit code
2, and lets anything else keep its traceback, because anything else is a bug.

Two checks hold the library to that. Statically: every ``raise`` of a class
in the library raises a fieldtrust error, or a class that only a bug raises
(``AssertionError``, ``NotImplementedError``). Dynamically: every command, on
a store that reads a lake (the source the settings name, where the draw and
the queue run other code than on the store's own rows), with each of its
options given an odd value of its kind, exits 0, 1 or 2 with no traceback,
and an exit 2 says why in one ``error:`` line.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import fieldtrust.errors
from fieldtrust.cli.main import cli
from tests.ingest.lake import fresh_store, lake_rows, refreshed_store, write_parquet_lake

ROOT = Path(__file__).resolve().parents[2]
#: Library code: what the CLI and the dashboard call.
LIBRARY = ("store", "ingest", "calibration", "extraction", "labels", "sampling", "governance",
           "fieldtrust/demo", "fieldtrust/settings.py", "fieldtrust/errors.py")
OURS = {name for name, value in vars(fieldtrust.errors).items()
        if isinstance(value, type) and issubclass(value, Exception)}
#: Raised only by a bug: an unreachable branch, a method a subclass must provide.
BUGS = {"AssertionError", "NotImplementedError"}


def _library_files() -> list[Path]:
    return [path for entry in LIBRARY for path in
            ([ROOT / entry] if entry.endswith(".py") else sorted((ROOT / entry).rglob("*.py")))]


def _raised_classes(path: Path) -> list[tuple[int, str]]:
    """(line, class name) of each ``raise`` of a class (a capitalised name) in ``path``.

    ``raise`` alone re-raises; ``raise exc`` / ``raise problems[0]`` /
    ``raise no_space_error(...)`` raise a value the type checker holds to its
    declared type.
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name[:1].isupper():
            found.append((node.lineno, name))
    return found


def test_the_library_raises_fieldtrust_errors_or_a_bug() -> None:
    files = _library_files()
    assert len(files) > 100
    raised = [(str(path.relative_to(ROOT)), line, name)
              for path in files for line, name in _raised_classes(path)]
    assert len(raised) > 200  # the walk sees the library's raises
    bare = [f"{path}:{line} raises {name}" for path, line, name in raised
            if name not in OURS | BUGS]
    assert bare == []


def test_the_boundary_translates_fieldtrust_errors_and_keeps_a_bugs_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fieldtrust.sampling.queue as queue

    db = tmp_path / "s.duckdb"
    fresh_store(db).close()
    runner = CliRunner()

    def refused(*args: object, **kwargs: object) -> object:
        raise fieldtrust.errors.Refused("the queue is closed today; come back tomorrow")

    monkeypatch.setattr(queue, "priority_queue", refused)
    result = runner.invoke(cli, ["--db", str(db), "queue"])
    assert (result.exit_code, result.output) == (
        2, "error: the queue is closed today; come back tomorrow\n")

    def broken(*args: object, **kwargs: object) -> object:
        raise KeyError("a bug")

    monkeypatch.setattr(queue, "priority_queue", broken)
    result = runner.invoke(cli, ["--db", str(db), "queue"])
    assert result.exit_code == 1
    assert isinstance(result.exception, KeyError)  # not dressed up as the user's fault


# --- every command on a lake store -------------------------------------------------------

WEEK = "2026-W03"
#: What a command needs besides the option under test.
BASE_ARGS: dict[str, list[str]] = {
    "adjudicate": ["--queue"],
    "decide": ["reject", "--doc-type", "invoice", "--field", "total", "--as", "mona",
               "--comment", "odd values"],
    "histogram": ["--doc-type", "invoice", "--field", "total"],
    "plan": ["--week", WEEK],
    "sample": ["--week", WEEK, "--as", "quinn"],
    "users grant": ["alice", "reviewer", "--as", "root"],
    "users revoke": ["alice", "reviewer", "--as", "root"],
}
#: ``serve`` becomes a server and ``extract`` calls the API; both are fuzzed elsewhere.
NOT_RUN = {"serve", "extract"}
ODD_TEXT = "\u202e'; DROP TABLE labels; --"


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _leaves(command, (*path, name))
        else:
            found.append((" ".join((*path, name)), command))
    return found


def _odd(param: click.Parameter, folder: Path) -> str | None:
    """An odd value of the parameter's kind (None: a flag or a closed choice, left to click)."""
    kind = param.type
    if (isinstance(param, click.Option) and param.is_flag) or isinstance(kind, click.Choice):
        return None
    if isinstance(kind, click.types._NumberParamTypeBase):
        return "-1"
    if isinstance(kind, click.Path):
        return str(folder)  # a folder where a file is expected
    if kind.name == "week":
        return "2026-W60"
    return ODD_TEXT


def _cases() -> list[tuple[str, list[str]]]:
    cases = []
    for name, command in _leaves(cli):
        if name in NOT_RUN:
            continue
        base = BASE_ARGS.get(name, [])
        cases.append((name, base))
        for param in command.params:
            if isinstance(param, click.Option) and (param.hidden or "--help" in param.opts):
                continue
            odd = _odd(param, Path("FOLDER"))
            if odd is None:
                if isinstance(param, click.Option) and param.is_flag:
                    cases.append((name, [*base, param.opts[0]]))
                continue
            if isinstance(param, click.Argument):
                continue  # the base arguments are positional: replacing them is the fuzz's job
            args = list(base)
            if param.opts[0] in args:
                del args[args.index(param.opts[0]):args.index(param.opts[0]) + 2]
            cases.append((name, [*args, param.opts[0], odd]))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def lake_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("boundary")
    lake = write_parquet_lake(lake_rows(900, weeks=2, seed=9), folder / "lake")
    db = folder / "lake-store.duckdb"
    return db, refreshed_store(db, lake, user="")


def test_the_walk_reaches_every_command() -> None:
    names = {name for name, _ in CASES}
    assert {"sample", "queue", "refresh", "source", "plan", "labels import"} <= names
    assert len(names) == len(_leaves(cli)) - len(NOT_RUN)
    assert len(CASES) > 80


@pytest.mark.parametrize(("name", "args"), CASES,
                         ids=[f"{n}:{' '.join(a[-2:])}" for n, a in CASES])
def test_every_command_on_a_lake_store_fails_in_words_or_not_at_all(
    lake_store: tuple[Path, dict[str, str]], tmp_path: Path, name: str, args: list[str]
) -> None:
    template, env = lake_store
    db = tmp_path / "s.duckdb"
    shutil.copyfile(template, db)
    argv = ["--db", str(db), *name.split(), *(str(tmp_path) if a == "FOLDER" else a
                                              for a in args)]
    result = CliRunner().invoke(cli, argv, env=env)
    shown = f"fieldtrust {' '.join(argv[2:])}: exit {result.exit_code}\n{result.output}"
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        shown, result.exc_info)
    assert result.exit_code in (0, 1, 2), shown
    assert "Traceback" not in result.output, shown
    if result.exit_code == 2:
        errors = [line for line in result.output.splitlines()
                  if line.lower().startswith("error:")]
        assert len(errors) == 1, shown
