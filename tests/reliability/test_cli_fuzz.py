"""Fuzzing the CLI: random argv from each command's own options, and random input files.

Hypothesis picks a command (every leaf of ``fieldtrust --help``), then for
each of its options and arguments, maybe, a value of the option's kind: 0,
negatives, huge numbers, NaN, empty strings, odd unicode, the store's user
names and weeks, paths to random files (random bytes or random rows in every
input format), missing paths and folders. Whatever it builds, the CLI exits
0 or 2, never with a traceback, and an exit 2 leaves the store's fingerprint
unchanged. Bounded: a fixed number of examples from a fixed seed, no deadline.

``serve`` is run with its final exec replaced (it would become the server);
``extract`` runs without an API key (it refuses before any network call).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from rel_store import record_figure

from fieldtrust.cli.main import cli
from tests.conftest import file_fingerprint

EXAMPLES = 120


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            found += _leaves(command, (*prefix, name))
        else:
            found.append((*prefix, name))
    return found


COMMANDS = _leaves(cli)


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = cli
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


ODD_TEXT = st.sampled_from([
    "", " ", "0", "-1", "nan", "inf", "1e309", "9" * 40, "root", "quinn", "maya", "ana",
    "mallory", "2026-W48", "2026-W99", "invoice", "total", "receipt", "x\u200by", "\u202eabc",
    "a\x00b", "line\nbreak", "'; DROP TABLE labels; --", "=1+1", "ü" * 300, "../../etc",
]) | st.text(max_size=12)
NUMBERS = st.sampled_from(["0", "-1", "-0.5", "1", "2", "0.5", "0.95", "1.5", "10", "1e30",
                           str(2**63), "nan", "-inf", ""]) | st.integers(-10**6, 10**6).map(str)


def _input_file(folder: Path, counter: itertools.count[int]) -> st.SearchStrategy[str]:
    """Paths to random files in every format, written when drawn."""
    header = "extraction_id,doc_id,doc_type,field,confidence,extracted_at,verdict\n"

    def write(parts: tuple[str, bytes]) -> str:
        suffix, body = parts
        path = folder / f"in{next(counter)}{suffix}"
        path.write_bytes(body)
        return str(path)

    rows = st.lists(st.lists(ODD_TEXT, min_size=7, max_size=7), max_size=4).map(
        lambda rs: header + "".join(",".join(json.dumps(c) for c in r) + "\n" for r in rs))
    jsonl = st.lists(st.dictionaries(st.sampled_from(header.strip().split(",")), ODD_TEXT),
                     max_size=4).map(lambda rs: "".join(json.dumps(r) + "\n" for r in rs))
    return st.tuples(
        st.sampled_from([".csv", ".jsonl", ".json", ".parquet", ".toml", ".txt", ""]),
        st.one_of(st.binary(max_size=200), rows.map(str.encode), jsonl.map(str.encode)),
    ).map(write)


def _value(param: click.Parameter, files: st.SearchStrategy[str],
           folder: Path) -> st.SearchStrategy[str]:
    kind = param.type
    if isinstance(kind, click.Choice):
        return st.sampled_from([str(c) for c in kind.choices]) | ODD_TEXT
    if isinstance(kind, click.types._NumberParamTypeBase):
        return NUMBERS
    if isinstance(kind, click.Path | click.File):
        return files | st.sampled_from([str(folder / "missing.csv"), str(folder),
                                        str(folder / "out.csv"), str(folder / "out.parquet"),
                                        "/proc/no/such/dir/x.csv", ""])
    return ODD_TEXT


def _argv(data: st.DataObject, path: tuple[str, ...], folder: Path,
          files: st.SearchStrategy[str]) -> list[str]:
    argv = list(path)
    for param in _command(path).params:
        if isinstance(param, click.Option):
            if param.hidden or "--help" in param.opts or not data.draw(st.booleans()):
                continue
            argv.append(param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0])
            if not param.is_flag:
                argv.append(data.draw(_value(param, files, folder)))
        elif isinstance(param, click.Argument):
            count = 1 if param.nargs == 1 else data.draw(st.integers(0, 2))
            argv += [data.draw(_value(param, files, folder)) for _ in range(count)]
    return argv


@pytest.mark.slow
def _file_bytes(path: Path) -> tuple[bytes, ...]:
    """Digests of the store file and its WAL (b"" for a missing one)."""
    files = (path, path.with_name(path.name + ".wal"))
    return tuple(hashlib.sha256(f.read_bytes()).digest() if f.exists() else b"" for f in files)


def test_random_argv_never_crashes_and_an_exit_2_changes_nothing(
    populated: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fieldtrust.cli.serve_cmds as serve_cmds

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)

    def no_exec(*args: Any) -> None:
        raise SystemExit(0)

    monkeypatch.setattr(serve_cmds.os, "execve", no_exec)
    folder = tmp_path / "files"
    folder.mkdir()
    files = _input_file(folder, itertools.count())
    tried: dict[str, int] = {}
    exits = {0: 0, 2: 0}
    started = time.monotonic()
    # The store's tables as last fingerprinted, and its files' bytes then: an example that
    # leaves the bytes as they were changed nothing, and skips the fingerprint (most exit 2
    # on their arguments before opening the store; fingerprinting was half the test's time).
    last = {"bytes": _file_bytes(populated), "tables": file_fingerprint(populated)}

    @seed(20261201)
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data: st.DataObject) -> None:
        path = data.draw(st.sampled_from(COMMANDS))
        argv = _argv(data, path, folder, files)
        result = CliRunner().invoke(cli, ["--db", str(populated), *argv])
        shown = f"fieldtrust {' '.join(map(repr, argv))}\n{result.output}"
        assert result.exit_code in (0, 2), (shown, result.exc_info)
        assert result.exception is None or isinstance(result.exception, SystemExit), shown
        assert "Traceback" not in result.output, shown
        now = _file_bytes(populated)
        if now != last["bytes"]:
            tables = file_fingerprint(populated)
            if result.exit_code == 2:
                assert tables == last["tables"], shown
            last.update(bytes=now, tables=tables)
        tried[" ".join(path)] = tried.get(" ".join(path), 0) + 1
        exits[result.exit_code] += 1

    run()
    record_figure("cli_fuzz", {"examples": sum(tried.values()), "commands": len(tried),
                               "exits": exits, "seconds": round(time.monotonic() - started, 1)})
    assert len(tried) >= len(COMMANDS) // 2  # the draw reaches most commands


def test_the_fuzz_knows_every_command() -> None:
    assert {"ingest", "init", "serve", "demo", "extract"} <= {p[-1] for p in COMMANDS}
    assert ("labels", "import") in COMMANDS and ("users", "grant") in COMMANDS
    assert os.environ.get("FIELDTRUST_DB") is None or COMMANDS
