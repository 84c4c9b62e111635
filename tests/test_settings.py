from __future__ import annotations

from pathlib import Path

import pytest
from fieldtrust.store.bar import SETTINGS as BAR_SETTINGS
from fieldtrust.store.bar import Ask, Criteria

from fieldtrust.errors import InputError
from fieldtrust.settings import SERVED_ENV, Settings, load_settings, served_settings


def test_defaults_when_nothing_is_set(tmp_path: Path) -> None:
    assert load_settings(environ={}, config_file=tmp_path / "absent.toml") == Settings()


def test_precedence_file_then_environment_then_flags(tmp_path: Path) -> None:
    config = tmp_path / "fieldtrust.toml"
    config.write_text('[fieldtrust]\ntarget = 0.9\nweeks = 6\ndb = "from-file.duckdb"\n')
    env = {"FIELDTRUST_WEEKS": "3", "FIELDTRUST_DB": "from-env.duckdb"}

    resolved = load_settings({"db": "from-flag.duckdb", "n_min": None}, environ=env,
                             config_file=config)

    asks = {a.name: (a.value, a.source) for a in resolved.criteria.asks}
    assert asks["target"] == (0.9, str(config))  # file
    assert asks["weeks"] == (3, "FIELDTRUST_WEEKS")  # environment beats file
    assert resolved.db == "from-flag.duckdb"  # flag beats environment
    assert "n_min" not in asks  # a flag not given asks nothing
    # A command's flag beats them all, and says where it came from.
    flagged = resolved.with_flags(weeks=2, port=9000).criteria.asks
    assert [(a.name, a.value, a.source) for a in flagged if a.name == "weeks"] == [
        ("weeks", 2, "--weeks")]


def test_bar_settings_are_asks_not_fields_and_their_defaults_are_the_bars() -> None:
    # Declared once, in store.bar: Settings has no field of the bar's.
    assert not set(BAR_SETTINGS) & set(Settings.__dataclass_fields__)
    resolved = load_settings(environ={"FIELDTRUST_MIN_WEEK_LABELS": "80"}, config_file="/absent")
    assert resolved.criteria == Criteria(
        (Ask("min_week_labels", 80, "FIELDTRUST_MIN_WEEK_LABELS"),))


def test_unknown_setting_in_file_is_named(tmp_path: Path) -> None:
    config = tmp_path / "fieldtrust.toml"
    config.write_text("[fieldtrust]\ntargte = 0.9\n")
    with pytest.raises(ValueError, match="unknown setting 'targte'"):
        load_settings(environ={}, config_file=config)


def test_a_source_table_beside_the_fieldtrust_table_is_read(tmp_path: Path) -> None:
    # Before, [fieldtrust] hid every other table: this [source] was silently ignored.
    config = tmp_path / "team.toml"
    config.write_text('[fieldtrust]\ndb = "a.duckdb"\n\n[source]\nkind = "parquet"\n'
                      'path = "/lake/x"\n\n[source.columns]\nconfidence = "score"\n')
    resolved = load_settings(environ={}, config_file=config)
    assert (resolved.db, resolved.source, resolved.source_path) == ("a.duckdb", "parquet",
                                                                     "/lake/x")
    assert resolved.source_columns == "confidence=score"


@pytest.mark.parametrize(("text", "message"), [
    ('[fieldtrust]\ndb = "a"\n\n[sorce]\nkind = "parquet"\n', "unknown setting 'sorce'"),
    ('[fieldtrust]\ndb = "a"\n\n[source]\nknd = "parquet"\n', "unknown key 'knd' in [source]"),
    ('db = "b"\n[fieldtrust]\ndb = "a"\n', "setting 'db' is given twice"),
    ("[fieldtrust]\ntarget = \n", "not a TOML file"),
])
def test_a_table_or_name_the_file_does_not_know_is_an_error(
    tmp_path: Path, text: str, message: str
) -> None:
    config = tmp_path / "team.toml"
    config.write_text(text)
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("]", r"\]")):
        load_settings(environ={}, config_file=config)


def test_bad_environment_value_is_named(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="setting weeks: 'many' is not a valid int"):
        load_settings(environ={"FIELDTRUST_WEEKS": "many"}, config_file=tmp_path / "x.toml")


@pytest.mark.parametrize("text", ["weeks = 8.5\n", "weeks = true\n", "n_min = 1.5\n"])
def test_a_number_is_never_rounded_into_a_setting(tmp_path: Path, text: str) -> None:
    config = tmp_path / "fieldtrust.toml"
    config.write_text(text)
    with pytest.raises(InputError, match="is not a valid int"):
        load_settings(environ={}, config_file=config)


def test_every_setting_has_help() -> None:
    assert all(line.strip() for line in Settings.help_lines().values())


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("target", "1.5", "target (from FIELDTRUST_TARGET): 1.5 must be strictly between 0 and 1"),
        ("confidence", "0", "confidence (from FIELDTRUST_CONFIDENCE): 0.0 must be strictly"),
        ("n_min", "0", "n_min (from FIELDTRUST_N_MIN): 0 must be at least 1"),
        ("weeks", "600", "weeks (from FIELDTRUST_WEEKS): 600 must be between 1 and 520 weeks"),
        ("port", "70000", "port (from FIELDTRUST_PORT): 70000 is not a TCP port"),
    ],
)
def test_out_of_range_values_are_refused(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_settings(environ={f"FIELDTRUST_{name.upper()}": value}, config_file=tmp_path / "x")


def test_settings_handed_to_the_server_are_read_back_whole(tmp_path: Path) -> None:
    config = tmp_path / "team.toml"
    config.write_text('target = 0.99\nport = 9001\nuser = "ann"\n')
    resolved = load_settings(environ={"FIELDTRUST_N_MIN": "300"}, config_file=config)
    # The server reads what `serve` resolved, not the file again (which may have changed).
    config.write_text("target = 0.5\n")
    served = served_settings({SERVED_ENV: resolved.to_json(), "FIELDTRUST_TARGET": "0.6"})
    assert served == resolved
    assert served.criteria.asked() == {"target": 0.99, "n_min": 300}


def test_a_server_started_without_serve_resolves_its_own(tmp_path: Path) -> None:
    config = tmp_path / "team.toml"
    config.write_text("target = 0.97\n")
    served = served_settings({"FIELDTRUST_CONFIG": str(config)})
    assert served.criteria.asked() == {"target": 0.97}
    with pytest.raises(InputError, match=f"{SERVED_ENV} does not hold settings"):
        served_settings({SERVED_ENV: "{not json"})
