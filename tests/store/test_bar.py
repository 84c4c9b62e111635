"""The bar: one value, one resolver (the store's policy, then a caller's asks)."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.store.bar import (
    DEFAULT_POLICY,
    SETTINGS,
    Ask,
    Bar,
    Criteria,
    policy_bar,
    resolve_bar,
    setting_direction,
    setting_help,
)

from fieldtrust import store
from fieldtrust.errors import InputError, PermissionDenied, Refused
from tests.conftest import Builder, table_fingerprint


@pytest.fixture
def con(tmp_path: Path) -> duckdb.DuckDBPyConnection:
    connection = store.connect(tmp_path / "bar.duckdb")
    Builder(connection).users()
    yield connection
    connection.close()


def test_every_setting_has_help_a_direction_and_a_column_of_the_policy_table(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # A setting added to the Bar without its migration would fail here, not at an approval.
    columns = {row[0] for row in con.execute("DESCRIBE policy_settings").fetchall()}
    assert set(SETTINGS) <= columns
    for name in SETTINGS:
        assert setting_help(name).endswith(".")
        assert setting_direction(name) in ("higher", "lower", "same")
    assert "loosened" not in SETTINGS and Bar().values() == DEFAULT_POLICY.bar.values()


def test_a_store_without_a_policy_row_holds_the_default_bar(
    con: duckdb.DuckDBPyConnection,
) -> None:
    assert policy_bar(con) == DEFAULT_POLICY
    assert resolve_bar(con) == Bar()


def test_stricter_asks_are_honoured_and_looser_ones_are_recorded(
    con: duckdb.DuckDBPyConnection,
) -> None:
    set_policy_settings(con, "root", n_min=200, target=0.96)
    asks = Criteria((Ask("target", 0.97, "--target"), Ask("n_min", 150, "team.toml"),
                     Ask("version_share", 0.1, "FIELDTRUST_VERSION_SHARE"),
                     Ask("weeks", 12, "--weeks")))
    bar = resolve_bar(con, asks)
    # Every ask is used (a view shows what it was asked) ...
    assert (bar.target, bar.n_min, bar.version_share, bar.weeks) == (0.97, 150, 0.1, 12)
    # ... but only the stricter one leaves the bar approvable.
    assert [(item.name, item.policy) for item in bar.loosened] == [
        ("n_min", 200), ("version_share", 0.05), ("weeks", 8)]
    assert not bar.approvable
    assert bar.loosened_text() == (
        "n_min 150 (from team.toml) is looser than the store's policy (200);"
        " version_share 0.1 (from FIELDTRUST_VERSION_SHARE) is looser than the store's"
        " policy (0.05); weeks 12 (from --weeks) is not the store's policy (8)")
    with pytest.raises(Refused, match=r"^n_min 150 \(from team\.toml\) is looser than the"
                       r" store's policy \(200\): approvals use the store's policy; an admin"
                       r" changes it with `fieldtrust policy settings --n-min 150 --as ADMIN`"):
        bar.for_approval()
    # Revocation keeps what is stricter and puts the rest back at the policy's.
    kept = bar.policy_or_stricter()
    assert kept.approvable and (kept.target, kept.n_min, kept.version_share, kept.weeks) == (
        0.97, 200, 0.05, 8)
    stricter = resolve_bar(con, Criteria.of("--target", target=0.97, version_share=0.01))
    assert stricter.approvable and stricter.for_approval() is stricter


@pytest.mark.parametrize(("name", "value"), [("prior_error", 0.01), ("prior_error", 0.05),
                                             ("weeks", 4), ("weeks", 9)])
def test_settings_that_must_be_the_policys_depart_either_way(
    con: duckdb.DuckDBPyConnection, name: str, value: float
) -> None:
    bar = resolve_bar(con, Criteria.of(**{name: value}))
    assert [item.name for item in bar.loosened] == [name]


def test_an_ask_that_cannot_be_met_is_an_error_not_a_quiet_bar(
    con: duckdb.DuckDBPyConnection,
) -> None:
    with pytest.raises(InputError, match=r"stability_weeks 10 \(from FIELDTRUST_STABILITY_WEEKS"
                       r"\) is longer than the window \(8 weeks\); ask for at most 8"):
        resolve_bar(con, Criteria.of("FIELDTRUST_STABILITY_WEEKS", stability_weeks=10))
    # A shorter window asked with the policy's stability weeks is only a looser view.
    assert not resolve_bar(con, Criteria.of("--weeks", weeks=1)).approvable


@pytest.mark.parametrize(("values", "message"), [
    ({"nmin": 5}, "no bar setting 'nmin'; the settings are target, confidence, n_min"),
    ({"n_min": 2.5}, r"setting n_min \(from x\): 2\.5 must be a whole number"),
    ({"target": True}, r"setting target \(from x\): True must be a number"),
    ({"version_share": 0.0}, r"0\.0 must be in \(0, 1\]"),
    ({"prior_error": 1.0}, r"1\.0 must be in \[0, 1\)"),
])
def test_an_ask_out_of_range_names_its_source(values: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        Criteria.of("x", **values)  # type: ignore[arg-type]


def test_the_policy_is_the_newest_row_and_only_an_admin_writes_one(
    con: duckdb.DuckDBPyConnection,
) -> None:
    first = set_policy_settings(con, "root", n_min=300)
    second = set_policy_settings(con, "root", target=0.97)
    assert policy_bar(con) == second
    assert (second.bar.n_min, second.bar.target, second.set_by) == (300, 0.97, "root")
    assert first.set_at is not None and second.set_at is not None
    assert second.as_dict() == {**second.bar.values(), "set_by": "root",
                                "set_at": second.set_at.isoformat()}
    before = table_fingerprint(con)
    with pytest.raises(PermissionDenied, match="may not"):
        set_policy_settings(con, "mona", target=0.5)
    with pytest.raises(InputError, match="no policy setting 'targte'"):
        set_policy_settings(con, "root", targte=0.9)
    with pytest.raises(InputError, match="policy setting weeks = 0 must be between 1 and 520"):
        set_policy_settings(con, "root", weeks=0)
    with pytest.raises(InputError, match="stability_weeks = 9 is longer than the window"):
        set_policy_settings(con, "root", stability_weeks=9)
    assert table_fingerprint(con) == before


def test_a_policy_row_written_before_the_horizon_existed_holds_its_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.store import migrations
    from fieldtrust.store.access import grant_role
    from fieldtrust.store.chain import chain_returned
    from fieldtrust.store.verify import verify_history

    path = tmp_path / "old.duckdb"
    later = ("0023_policy_horizon_weeks", "0050_policy_max_own_label_share")
    before_horizon = tuple(m for m in migrations.MIGRATIONS if m.name not in later)
    monkeypatch.setattr(migrations, "MIGRATIONS", before_horizon)
    old = store.connect(path)
    grant_role(old, "root", "root", "admin")  # chained, as the library writes it
    # What the writer of that fieldtrust stored: every setting it knew, chained.
    inserted = old.execute(
        "INSERT INTO policy_settings (setting_id, target, confidence, n_min, stability_weeks,"
        " version_share, min_week_labels, prior_error, weeks, set_by, set_at) VALUES"
        " ('s1', 0.97, 0.95, 300, 4, 0.05, 50, 0.03, 8, 'root', now()::TIMESTAMP) RETURNING *")
    chain_returned(old, "policy_settings", inserted)
    old.close()
    monkeypatch.undo()
    con = store.connect(path)  # gains migrations 0023 and 0050
    try:
        bar = policy_bar(con).bar
        assert (bar.target, bar.n_min, bar.horizon_weeks) == (0.97, 300, 52)
        assert bar.max_own_label_share == 1.0
        assert verify_history(con).intact  # the new column does not alter the chained row
        changed = set_policy_settings(con, "root", horizon_weeks=104)
        assert (changed.bar.horizon_weeks, changed.bar.n_min) == (104, 300)
        assert resolve_bar(con, Criteria.of("--x", horizon_weeks=26)).loosened_text() == (
            "horizon_weeks 26 (from --x) is looser than the store's policy (104)")
        with pytest.raises(InputError, match="horizon_weeks = 521 must be between 1 and 520"):
            set_policy_settings(con, "root", horizon_weeks=521)
        assert verify_history(con).intact
    finally:
        con.close()
