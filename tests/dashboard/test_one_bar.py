"""One bar: the CLI, the dashboard and governance judge candidates at the same settings.

On the demo store (real DuckDB file, the real dashboard script under AppTest, the
real CLI): an admin's policy change reaches the Automation page as it reaches
`fieldtrust candidates`; a looser ask is shown as "at these settings, not
approvable" on both; the dashboard runs on the settings `fieldtrust serve`
resolved, not on a second reading of the file; a bad settings file is a message
on the page, not a traceback.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from fieldtrust.dashboard import state
from fieldtrust.store.access import list_users
from streamlit.testing.v1 import AppTest

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.settings import SERVED_ENV
from tests.conftest import file_rows
from tests.dashboard.test_apptest import APP, TIMEOUT, _open, _shown, _texts

CANDIDATE = "invoice|currency"  # a candidate of the demo store at the default policy


def _cli(db: Path, *args: str, **env: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args], env=env)
    return result.exit_code, result.stdout + result.stderr


def _admin(db: Path) -> str:
    con = store.connect(db, read_only=True)
    try:
        return next(u.user_name for u in list_users(con) if "admin" in u.roles)
    finally:
        con.close()


def _approve_enabled(at: AppTest, key: str) -> bool:
    at.selectbox(key=state.AUTO_STRATUM).set_value(key).run()
    return not at.button(key=state.AUTO_APPROVE).disabled


def test_the_policy_an_admin_sets_is_the_bar_of_the_cli_and_the_page(
    demo_db: Path, use_db: Callable[[Path], None]
) -> None:
    use_db(demo_db)
    # At the default policy both see the candidate (so the checks below can fail).
    code, out = _cli(demo_db, "candidates", "--json")
    assert [c["field"] for c in json.loads(out)["candidates"]] == [
        "currency", "invoice_number", "po_number"]
    at = _open("automation", user="maya")
    assert _approve_enabled(at, CANDIDATE)
    # Before, the page passed four settings and calibration's defaults supplied the
    # rest: it kept offering Approve on a stratum the CLI and governance refused.
    code, out = _cli(demo_db, "policy", "settings", "--target", "0.99",
                     "--as", _admin(demo_db))
    assert code == 0, out
    code, out = _cli(demo_db, "candidates")
    assert out.startswith("0 automation candidate(s) at target 99%:"), out
    at = _open("automation", user="maya")
    assert "No stratum is an automation candidate" in _texts(at)
    assert not _approve_enabled(at, CANDIDATE)
    assert "(candidate)" not in at.selectbox(key=state.AUTO_STRATUM).format_func(CANDIDATE)
    assert "Not a candidate: cannot certify at this volume" in _texts(at)


def test_a_looser_ask_is_shown_as_not_approvable_and_refused_as_an_approval(
    demo_db: Path, use_db: Callable[[Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    use_db(demo_db)
    looser = "target 0.9 (from FIELDTRUST_TARGET) is looser than the store's policy (0.95)"
    monkeypatch.setenv("FIELDTRUST_TARGET", "0.9")
    code, out = _cli(demo_db, "candidates", "--json")
    payload = json.loads(out)
    assert payload["candidates"] == [] and payload["not_approvable_because"] == looser
    currency = next(c for c in payload["not_candidates"] if c["field"] == "currency")
    assert currency["reasons"] == ["not_at_policy"]
    at = _open("automation", user="maya")
    assert f"At these settings, not approvable: {looser}." in _texts(at)
    assert not _approve_enabled(at, CANDIDATE)
    code, out = _cli(demo_db, "decide", "approve", "--doc-type", "invoice", "--field",
                     "currency", "--as", "maya", "--comment", "at 90%")
    assert code == 2 and f"error: {looser}: approvals use the store's policy" in out
    assert file_rows(demo_db, "SELECT count(*) FROM decisions") == [(0,)]


def test_the_dashboard_runs_on_the_settings_serve_resolved(
    shared_demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    team = tmp_path / "team.toml"
    team.write_text("[fieldtrust]\ntarget = 0.99\n")
    handed: dict[str, str] = {}

    def become_the_server(path: str, argv: list[str], env: dict[str, str]) -> None:
        handed.update(env)
        raise SystemExit(0)

    code, out = _cli(shared_demo_db, "--config", str(team), "calibrate")
    assert "(target 99%, confidence 95%)" in out  # what the CLI says
    monkeypatch.setattr(os, "execve", become_the_server)
    code, out = _cli(shared_demo_db, "--config", str(team), "serve", "--as", "maya")
    assert code == 0, out
    # The server reads what serve resolved: the file may change, or its path not be
    # known to the server at all; the page still says 99%, as the CLI did.
    team.write_text("[fieldtrust]\ntarget = 0.5\n")
    monkeypatch.delenv("FIELDTRUST_CONFIG", raising=False)
    monkeypatch.delenv("FIELDTRUST_DB", raising=False)
    monkeypatch.setenv(SERVED_ENV, handed[SERVED_ENV])
    at = _open("overview", user="maya")
    headline = next(m.value for m in at.markdown if "overall" in m.value)
    assert "below 99%" in headline  # before: 95%, the server read the settings again


def test_a_bad_settings_file_is_a_message_on_the_page(
    shared_demo_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A dashboard started without serve reads the file itself; before, a bad one
    # gave a traceback page (the settings were read outside every error handler).
    bad = tmp_path / "fieldtrust.toml"
    bad.write_text("[fieldtrust]\ntargte = 0.9\n")
    monkeypatch.setenv("FIELDTRUST_CONFIG", str(bad))
    monkeypatch.setenv("FIELDTRUST_DB", str(shared_demo_db))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT)
    at.run()
    assert not at.exception, at.exception[0].message
    (error,) = at.error
    assert _shown(error.value).startswith(f"{bad}: unknown setting 'targte'; known: db, ")
