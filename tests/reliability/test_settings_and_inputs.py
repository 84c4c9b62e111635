"""Settings values, weeks and input files that ended in tracebacks or silent changes (issue 25).

Fault 17: ``fieldtrust = 5``, ``seed = inf``, ``weeks = 1e999`` and ``port =
inf`` raised; ``weeks = 2.9`` silently became 2 and ``port = true`` became 1.
Fault 18: ``plan --week 9999-W52``, a deeply nested ``--design`` file, a
300-character ``--design`` name, and ``verify --policy /dev/zero``, which read
until the kernel killed it. Policy, design and settings files are read with a
size cap (``store.files.read_capped``).
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fieldtrust.sampling.design import load_design
from fieldtrust.store.files import MAX_INPUT_BYTES

from fieldtrust.cli.main import cli
from fieldtrust.errors import InputError
from fieldtrust.settings import load_settings
from tests.conftest import file_fingerprint


def _settings_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "fieldtrust.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "said"), [
    ("fieldtrust = 5\n", "fieldtrust must be a table ([fieldtrust]), not 5"),
    ("seed = inf\n", "setting seed: inf is not a valid int"),
    ("weeks = 1e999\n", "setting weeks: inf is not a valid int"),
    ("port = inf\n", "setting port: inf is not a valid int"),
    ("port = nan\n", "setting port: nan is not a valid int"),
    ("weeks = 2.9\n", "setting weeks: 2.9 is not a valid int"),
    ("port = true\n", "setting port: True is not a valid int"),
    ("future_days = true\n", "setting future_days: True is not a valid float"),
    ("future_days = inf\n", "inf must be between 0 and 3650"),
    ("db = 5\n", "setting db: 5 is not text"),
    ("weeks = [1]\n", "setting weeks: [1] is not a valid int"),
    pytest.param("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply",
                 id="nested 5,000 deep"),
    pytest.param("x = '" + "y" * MAX_INPUT_BYTES + "'\n", "larger than 1,048,576 bytes",
                 id="over 1 MB"),
])
def test_a_settings_value_is_refused_by_name_never_changed(
    text: str, said: str, tmp_path: Path
) -> None:
    path = _settings_file(tmp_path, text)
    with pytest.raises(InputError, match=re.escape(said)):
        load_settings(config_file=path, environ={})
    result = CliRunner().invoke(cli, ["--config", str(path), "settings"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and said in result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("text", "name", "value"), [
    ("seed = 3.0\n", "seed", 3),
    ("[fieldtrust]\nport = 8600\n", "port", 8600),
    ("future_days = 2\n", "future_days", 2.0),
    ("future_days = '0.5'\n", "future_days", 0.5),
])
def test_whole_and_written_numbers_are_still_read(text: str, name: str, value: Any,
                                                 tmp_path: Path) -> None:
    got = getattr(load_settings(config_file=_settings_file(tmp_path, text), environ={}), name)
    assert got == value and type(got) is type(value)


def test_the_last_week_of_the_calendar_is_one_error(populated: Path) -> None:
    before = file_fingerprint(populated)
    for args in (["plan", "--week", "9999-W52"],
                 ["sample", "--week", "9999-W52", "--as", "quinn"]):
        result = CliRunner().invoke(cli, ["--db", str(populated), *args])
        assert result.exit_code == 2, result.output
        # The week is checked where the option is read: a usage error naming it.
        assert "Invalid value for '--week': week '9999-W52' is the calendar's last week" \
            in result.stderr
        assert "Traceback" not in result.stderr
    assert file_fingerprint(populated) == before


@pytest.mark.parametrize("case", ["nested JSON", "nested TOML", "a long name", "too large",
                                  "a folder"])
def test_a_design_file_that_cannot_be_a_design_is_one_error(case: str, populated: Path,
                                                            tmp_path: Path) -> None:
    if case == "nested JSON":
        path = tmp_path / "deep.json"
        path.write_text("[" * 100_000 + "]" * 100_000)
        said = "nested too deeply"
    elif case == "nested TOML":
        path = tmp_path / "deep.toml"
        path.write_text("bands = " + "[" * 5000 + "]" * 5000 + "\n")
        said = "nested too deeply"
    elif case == "a long name":
        path = tmp_path / ("d" * 300 + ".toml")
        said = "file name too long"
    elif case == "too large":
        path = tmp_path / "big.json"
        path.write_text(json.dumps({"base_rate": 0.1, "pad": "x" * MAX_INPUT_BYTES}))
        said = "larger than 1,048,576 bytes"
    else:
        path = tmp_path / "folder.toml"
        path.mkdir()
        said = "is a directory"
    with pytest.raises(InputError, match=said):
        load_design(path)
    result = CliRunner().invoke(cli, ["--db", str(populated), "plan", "--week", "2026-W48",
                                      "--design", str(path)])
    assert result.exit_code == 2, result.output
    assert said in result.output.lower() and "Traceback" not in result.output


def test_verify_reads_a_policy_file_with_a_bound(populated: Path) -> None:
    # A subprocess held to 3 GB: before the cap it read /dev/zero until memory ran out.
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    done = subprocess.run(
        [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(populated), "verify",
         "--policy", "/dev/zero"],
        capture_output=True, text=True, timeout=120, preexec_fn=limit_memory,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == ("error: policy file /dev/zero: larger than 16,777,216 bytes,"
                                   " which no policy file is; is it the right file?")
