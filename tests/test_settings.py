from __future__ import annotations

from pathlib import Path

import pytest

from fieldtrust.settings import Settings, load_settings


def test_defaults_when_nothing_is_set(tmp_path: Path) -> None:
    assert load_settings(environ={}, config_file=tmp_path / "absent.toml") == Settings()


def test_precedence_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "fieldtrust.toml"
    config.write_text('[fieldtrust]\ntarget = 0.9\nweeks = 6\ndb = "from-file.duckdb"\n')
    env = {"FIELDTRUST_WEEKS": "3", "FIELDTRUST_DB": "from-env.duckdb"}

    resolved = load_settings({"db": "from-flag.duckdb", "n_min": None}, environ=env,
                             config_file=config)

    assert resolved.target == 0.9  # file
    assert resolved.weeks == 3  # environment beats file
    assert resolved.db == "from-flag.duckdb"  # flag beats environment
    assert resolved.n_min == Settings().n_min  # a flag not given changes nothing


def test_unknown_setting_in_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "fieldtrust.toml"
    config.write_text("[fieldtrust]\ntargte = 0.9\n")
    with pytest.raises(ValueError, match="unknown setting 'targte'"):
        load_settings(environ={}, config_file=config)


def test_bad_environment_value_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="setting weeks: 'many' is not a whole number"):
        load_settings(environ={"FIELDTRUST_WEEKS": "many"}, config_file=tmp_path / "x.toml")


def test_every_setting_has_help() -> None:
    assert all(line.strip() for line in Settings.help_lines().values())


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("target", "1.5", "target: 1.5 must be strictly between 0 and 1"),
        ("confidence", "0", "confidence: 0.0 must be strictly between 0 and 1"),
        ("n_min", "0", "n_min: 0 must be at least 1"),
        ("port", "70000", "port: 70000 is not a TCP port"),
    ],
)
def test_out_of_range_values_are_refused(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        load_settings(environ={f"FIELDTRUST_{name.upper()}": value}, config_file=tmp_path / "x")
