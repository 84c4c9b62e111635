"""Approval bound to evidence: the store's policy, never looser settings, never hand-made evidence.

Through the CLI with lowered ``FIELDTRUST_*`` settings in the environment, with a
stricter one, after an admin raises the store's bar, and by a non-admin trying
to lower it; through the library with thresholds below and above the certified
one; and the public API: no function takes evidence from its caller.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from pathlib import Path

import fieldtrust.governance
import fieldtrust.governance.acts
import numpy as np
import pytest
from click.testing import CliRunner
from fieldtrust.governance.acts import approve
from fieldtrust.governance.certification import certify
from fieldtrust.governance.evidence import evidence_payload
from fieldtrust.governance.policy import export_policy
from fieldtrust.store.bar import Criteria

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import Refused
from tests.conftest import Builder, file_fingerprint, table_fingerprint
from tests.governance.conftest import WEEKS, random_sample_item, write_random_sample

APPROVE = ["decide", "approve", "--doc-type", "invoice", "--field", "total", "--as", "mona",
           "--comment", "four stable weeks"]


@pytest.fixture
def approvable(db_path: Path) -> Path:
    """invoice/total: 4 weeks x 120 random labels, all correct, form version v1; the
    store's policy (set by the admin root) asks for 50 labels above a threshold."""
    con = store.connect(db_path)
    builder = Builder(con)
    rng = np.random.default_rng(5)
    write_random_sample(con, builder, [
        random_sample_item(f"{week}-total-{i}", week, float(rng.uniform(0.9, 1.0)),
                           field="total")
        for week in WEEKS for i in range(120)])
    con.close()
    return db_path


def _run(path: Path, args: list[str], **env: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", str(path), *args], env=env)
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("FIELDTRUST_TARGET", "0.5", "target 0.5 (from FIELDTRUST_TARGET) is looser than the"
     " store's policy (0.95)"),
    ("FIELDTRUST_N_MIN", "1", "n_min 1 (from FIELDTRUST_N_MIN) is looser than the store's"
     " policy (50)"),
    ("FIELDTRUST_STABILITY_WEEKS", "1", "stability_weeks 1 (from FIELDTRUST_STABILITY_WEEKS) is"
     " looser than the store's policy (4)"),
    ("FIELDTRUST_MIN_WEEK_LABELS", "5", "min_week_labels 5 (from FIELDTRUST_MIN_WEEK_LABELS) is"
     " looser than the store's policy (50)"),
    ("FIELDTRUST_HORIZON_WEEKS", "4", "horizon_weeks 4 (from FIELDTRUST_HORIZON_WEEKS) is"
     " looser than the store's policy (52)"),
])
def test_lowered_settings_in_the_environment_cannot_loosen_an_approval(
    approvable: Path, variable: str, value: str, message: str
) -> None:
    before = file_fingerprint(approvable)
    code, out = _run(approvable, APPROVE, **{variable: value})
    assert code == 2, out
    assert message in out
    assert "an admin changes it with `fieldtrust policy settings" in out
    assert "Traceback" not in out
    assert file_fingerprint(approvable) == before


def test_a_stricter_setting_is_honoured_and_the_approval_names_its_form_versions(
    approvable: Path,
) -> None:
    code, out = _run(approvable, APPROVE, FIELDTRUST_N_MIN="60", FIELDTRUST_TARGET="0.96")
    assert code == 0, out
    assert ("covers form versions v1; segments (form x extractor version) v1 x unknown;"
            " production sends any other to a human") in out
    con = store.connect(approvable, read_only=True)
    try:
        (decision_evidence,) = con.execute("SELECT evidence_id FROM decisions").fetchone() or ()
        frozen = evidence_payload(con, decision_evidence)["certification"]
        exported = export_policy(con)["thresholds"]
    finally:
        con.close()
    assert (frozen["n_min"], frozen["target"]) == (60, 0.96)  # the stricter request
    assert frozen["stricter"] == {"n_min": 60, "target": 0.96}
    assert frozen["policy"]["n_min"] == 50 and frozen["policy"]["set_by"] == "root"
    assert frozen["held_to"]["n_min"] == 60 and frozen["held_to"]["weeks"] == 8
    assert frozen["held_to"]["horizon_weeks"] == frozen["policy"]["horizon_weeks"] == 52
    assert frozen["covered_versions"] == ["v1"]
    assert [(t["field"], t["form_versions"]) for t in exported] == [("total", ["v1"])]
    code, out = _run(approvable, ["policy", "export"])
    assert json.loads(out)["thresholds"][0]["form_versions"] == ["v1"]


def test_an_admin_raising_the_bar_makes_an_approvable_stratum_refused(approvable: Path) -> None:
    code, out = _run(approvable, ["policy", "settings", "--n-min", "5000", "--as", "root"])
    assert code == 0, out
    assert "policy settings changed by root: n_min = 5000" in out
    code, out = _run(approvable, ["policy", "settings", "--horizon-weeks", "104", "--as", "root"])
    assert code == 0 and "policy settings changed by root: horizon_weeks = 104" in out
    code, out = _run(approvable, ["policy", "settings", "--json"])
    shown = json.loads(out)
    assert (shown["n_min"], shown["target"], shown["set_by"]) == (5000, 0.95, "root")
    assert shown["horizon_weeks"] == 104
    before = file_fingerprint(approvable)
    code, out = _run(approvable, APPROVE)
    assert code == 2, out
    assert "invoice/total is not an automation candidate (" in out
    assert "as a whole stratum at the store's policy settings" in out
    assert file_fingerprint(approvable) == before


@pytest.mark.parametrize("who", ["mona", "carol", "alice"])
def test_only_an_admin_changes_the_policy(approvable: Path, who: str) -> None:
    before = file_fingerprint(approvable)
    code, out = _run(approvable, ["policy", "settings", "--n-min", "1", "--target", "0.5",
                                  "--as", who])
    assert code == 2, out
    assert f"{who} (role " in out and "may not" in out
    assert file_fingerprint(approvable) == before
    code, out = _run(approvable, ["policy", "settings", "--n-min", "1"])  # no --as
    assert code == 2 and "needs --as NAME" in out
    assert file_fingerprint(approvable) == before


def test_an_out_of_range_policy_setting_is_refused(approvable: Path) -> None:
    before = file_fingerprint(approvable)
    code, out = _run(approvable, ["policy", "settings", "--target", "1.5", "--as", "root"])
    assert code == 2 and "policy setting target = 1.5 must be strictly between 0 and 1" in out
    assert file_fingerprint(approvable) == before


def test_the_threshold_must_be_at_or_above_the_certified_one(approvable: Path) -> None:
    con = store.connect(approvable)
    try:
        certified = certify(con, "invoice", "total").threshold
        assert certified is not None and certified < 0.99
        before = table_fingerprint(con)
        with pytest.raises(Refused, match=r"is below it: approve at or above"):
            approve(con, "mona", "invoice", "total", "lower", threshold=certified - 0.01)
        assert table_fingerprint(con) == before
        decision = approve(con, "mona", "invoice", "total", "higher", threshold=0.99)
        assert decision.threshold == 0.99
        frozen = evidence_payload(con, decision.evidence_id or "")["certification"]
        assert frozen["threshold"] == certified  # the evidence keeps the certified one
    finally:
        con.close()


def test_library_criteria_looser_than_the_policy_are_refused(approvable: Path) -> None:
    con = store.connect(approvable)
    try:
        before = table_fingerprint(con)
        for looser, pattern in (
            (Criteria.of(version_share=0.5), r"version_share 0\.5 .* \(0\.05\)"),
            (Criteria.of(weeks=1),
             r"weeks 1 \(from your settings\) is not the store's policy \(8\)"),
            (Criteria.of(confidence=0.5), r"confidence 0\.5 .* \(0\.95\)"),
        ):
            with pytest.raises(Refused, match=pattern):
                approve(con, "mona", "invoice", "total", "looser", criteria=looser)
        assert table_fingerprint(con) == before
    finally:
        con.close()


def test_no_public_governance_function_takes_evidence_from_its_caller() -> None:
    package = fieldtrust.governance
    checked = []
    for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        module = importlib.import_module(info.name)
        for name, member in vars(module).items():
            if name.startswith("_") or getattr(member, "__module__", None) != module.__name__:
                continue
            functions = [member] if inspect.isfunction(member) else [
                m for n, m in vars(member).items()
                if not n.startswith("_") and inspect.isfunction(m)
            ] if inspect.isclass(member) else []
            for function in functions:
                checked.append(function.__qualname__)
                parameters = inspect.signature(function).parameters
                assert "evidence" not in parameters, f"{info.name}.{function.__qualname__}"
    assert {"approve", "reject", "revoke", "certify"} <= set(checked)
    for act in (approve, fieldtrust.governance.acts.reject, fieldtrust.governance.acts.revoke):
        assert not {"evidence", "certification", "revocation"} & set(
            inspect.signature(act).parameters), act.__name__


def test_the_dashboard_and_cli_share_one_certification_path() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("fieldtrust.calibration.certify")


def test_settings_not_given_ask_nothing_of_the_bar() -> None:
    # The bar's defaults are declared once (store.bar); settings left alone ask nothing.
    from fieldtrust.settings import Settings

    assert Settings().criteria.asked() == {}
    assert not {"target", "confidence", "n_min", "weeks"} & set(Settings.help_lines())
