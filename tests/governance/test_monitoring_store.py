"""Monitoring approved segments in a store: approve, later weeks, alarms, suspension, resuming.

Real DuckDB stores, approvals through ``acts.approve`` (certified from the
store) and the CLI. Each stratum's labels come from files declared a random
sample, so every label is design-based with known weights. The heavy
simulations of the chart are in tests/calibration/test_monitoring*.py; here
the store's own path is checked: which weeks are charted, per which segment,
with the parameters frozen at approval, and what the exported policy says.
"""

from __future__ import annotations

import datetime as dt
import json
import zlib
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner
from fieldtrust.calibration.monitoring import STRATUM_ARL0, cusum_path
from fieldtrust.calibration.run_length import (
    alarm_probability,
    alarm_threshold,
    average_run_length,
)
from fieldtrust.governance import monitoring
from fieldtrust.governance.acts import approve, resume, revoke
from fieldtrust.governance.decisions import Decision
from fieldtrust.governance.evidence import load_evidence
from fieldtrust.governance.monitoring import monitor_approvals
from fieldtrust.governance.monitoring_plan import SegmentPlan
from fieldtrust.governance.policy import export_policy, policy_file_problems
from fieldtrust.store.weeks import Week, iso_week

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import PermissionDenied, Refused
from tests.governance.conftest import declare_random_batch, policy_of_50_labels, random_sample_item

NOW = iso_week(store.utc_now())
#: The certification window: the four closed weeks before the approval's.
BEFORE = tuple(NOW.shift(k) for k in (-4, -3, -2, -1))


def _weeks(builder: Any, weeks: tuple[Week, ...], *, form_version: str = "v1",
           extractor: str = "m1", n: int = 150, wrong: float = 0.03, labelled: int | None = None,
           tag: str = "", binomial: bool = False) -> None:
    """``n`` extractions a week of invoice/total, ``wrong`` of them wrong (binomial: each
    wrong with chance ``wrong``), the first ``labelled`` (default: all) labelled."""
    # Seeded by the weeks' places relative to this week, not their names: the same
    # extractions whichever week the suite runs in.
    offsets = [(week.start - NOW.start).days // 7 for week in weeks]
    rng = np.random.default_rng(zlib.crc32(f"{offsets}{form_version}{extractor}{tag}".encode()))
    extractions, labels = [], []
    for week in weeks:
        size = int(rng.binomial(n, wrong)) if binomial else round(n * wrong)
        errors = set(rng.choice(n, size=size, replace=False).tolist())
        for i in range(n):
            extraction_id = f"{week}-{form_version}-{extractor}-{tag}-{i}"
            extraction, label = random_sample_item(
                extraction_id, week, float(rng.uniform(0.9, 1.0)), wrong=i in errors,
                field="total", form_version=form_version, extractor_version=extractor)
            extractions.append(extraction)
            if labelled is None or i < labelled:
                labels.append(label)
    builder.extractions(extractions)
    if labels:
        builder.labels(labels)


@pytest.fixture
def approvable(con: duckdb.DuckDBPyConnection, builder: Any) -> duckdb.DuckDBPyConnection:
    """invoice/total: four closed weeks of 150 labels at 98% (form v1, extractor m1)."""
    policy_of_50_labels(con, builder)
    declare_random_batch(con)
    _weeks(builder, BEFORE, wrong=0.02)
    return con


def _segments(con: duckdb.DuckDBPyConnection, until: Week) -> dict[tuple[str, str], Any]:
    return {(m.form_version, m.extractor_version): m for m in monitor_approvals(con, until=until)}


def _approved(con: duckdb.DuckDBPyConnection) -> tuple[Decision, SegmentPlan]:
    """mona approves invoice/total; the decision and the one segment its evidence charts."""
    decision = approve(con, "mona", "invoice", "total", "four stable weeks")
    plan = load_evidence(con, decision.evidence_id or "").monitoring
    assert plan is not None
    (segment,) = plan.segments
    return decision, segment


def test_a_slide_after_approval_suspends_the_segment_in_the_policy_until_a_person_decides(
    approvable: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    con = approvable
    decision, segment = _approved(con)
    # Frozen at approval: the segment's accuracy above the threshold, the target,
    # a threshold for 200 weeks between false alarms at the labels a week it had.
    assert (segment.form_version, segment.extractor_version) == ("v1", "m1")
    assert 0.96 < segment.in_control < 0.99 and segment.target == 0.95
    assert segment.arl0 == STRATUM_ARL0
    assert segment.threshold == pytest.approx(alarm_threshold(
        segment.arl0, in_control=segment.in_control, target=0.95,
        labels_per_week=segment.labels_per_week))
    assert average_run_length(segment.threshold, in_control=segment.in_control, target=0.95,
                              labels_per_week=segment.labels_per_week) >= 200

    good, bad = NOW, NOW.shift(1)
    _weeks(builder, (good,), wrong=0.02, tag="after")
    assert _segments(con, good)[("v1", "m1")].status == "automated"
    _weeks(builder, (bad,), wrong=0.12, tag="after")   # 88%: a slip
    charted = monitor_approvals(con, until=bad)
    (flagged,) = charted
    assert flagged.suspended and flagged.state is not None
    assert flagged.state.weeks == (str(good), str(bad)) and flagged.state.alarm_week == str(bad)
    assert flagged.statistic >= segment.threshold
    assert flagged.reason is not None and flagged.reason.startswith(f"slip flagged in {bad}")

    policy = export_policy(con, monitors=charted)
    (entry,) = policy["thresholds"]
    assert entry["form_versions"] == ["v1"] and entry["extractor_versions"] == ["m1"]
    assert entry["segments"] == [{"form_version": "v1", "extractor_version": "m1"}]
    assert policy["format"] == 4 and policy["monitoring"] == [{
        "doc_type": "invoice", "field": "total", "decision_id": decision.decision_id,
        "form_version": "v1", "extractor_version": "m1", "status": "suspended",
        "reason": flagged.reason}]
    # The status is the charts' reading, beside the thresholds verify rebuilds: the file,
    # segments included, still matches the store as it stood at its history head.
    assert policy_file_problems(con, policy) == []

    # A reviewer may not resume; a manager may, with a reason, once.
    with pytest.raises(PermissionDenied):
        resume(con, "alice", "invoice", "total", "v1", "m1", "looks fine")
    resumed_at = store.utc_now()
    monkey = pytest.MonkeyPatch()
    try:  # the chart's default end: the last closed week, here the bad one
        monkey.setattr(monitoring, "utc_now", lambda: bad.end + dt.timedelta(hours=1))
        after = resume(con, "mona", "invoice", "total", "v1", "m1", "scanner fixed")
        assert after.status == "automated" and after.since_week == str(bad.shift(1))
        with pytest.raises(Refused, match="is not suspended"):
            resume(con, "mona", "invoice", "total", "v1", "m1", "again")
    finally:
        monkey.undo()
    row = con.execute("SELECT resumed_by, role, alarm_week, comment, resumed_at"
                      " FROM monitoring_resumptions").fetchall()
    assert [r[:4] for r in row] == [("mona", "manager", str(bad), "scanner fixed")]
    assert row[0][4] >= resumed_at
    chained = con.execute("SELECT count(*) FROM history_chain"
                          " WHERE table_name = 'monitoring_resumptions'").fetchall()
    assert chained == [(1,)]  # append-only and chained like every decision
    # Revoking ends the approval: nothing of it is monitored or exported.
    revoke(con, "mona", "invoice", "total", "the slip")
    assert monitor_approvals(con, until=bad) == [] and export_policy(con)["thresholds"] == []


def test_a_new_extractor_version_is_not_covered_and_gets_its_own_evidence(
    approvable: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    con = approvable
    # A new model in the last week, barely labelled: too little evidence of its own.
    _weeks(builder, (BEFORE[-1],), extractor="m2", n=60, labelled=8, wrong=0.0)
    decision = approve(con, "mona", "invoice", "total", "m1 certified")
    evidence = load_evidence(con, decision.evidence_id or "")
    assert evidence.certification is not None
    segments = {c.key: c for c in evidence.certification.segments}
    assert segments[("v1", "m1")].covered and segments[("v1", "m1")].labels_above > 500
    assert not segments[("v1", "m2")].covered and segments[("v1", "m2")].labels_above <= 8
    assert evidence.certification.covered_segments == (("v1", "m1"),)
    (entry,) = export_policy(con)["thresholds"]
    assert entry["extractor_versions"] == ["m1"]
    assert [(s["form_version"], s["extractor_version"]) for s in entry["segments"]] == [
        ("v1", "m1")]
    # Only the model change's own labels, after the approval, can cover it: a new approval.
    _weeks(builder, (NOW,), extractor="m2", n=300, wrong=0.01, tag="own")
    again = approve(con, "mona", "invoice", "total", "m2 labelled")
    covered = load_evidence(con, again.evidence_id or "").certification
    assert covered is not None and ("v1", "m2") in covered.covered_segments


def test_a_degrading_version_beside_a_better_new_one_is_flagged_per_version(
    approvable: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    con = approvable
    _weeks(builder, BEFORE, form_version="v2", wrong=0.01)
    approve(con, "mona", "invoice", "total", "both versions")
    weeks = (NOW, NOW.shift(1))
    _weeks(builder, weeks, form_version="v1", n=100, wrong=0.09, tag="after")  # 91%
    _weeks(builder, weeks, form_version="v2", n=400, wrong=0.005, tag="after")
    charted = _segments(con, weeks[-1])
    assert set(charted) == {("v1", "m1"), ("v2", "m1")}
    assert charted[("v1", "m1")].suspended
    assert not charted[("v2", "m1")].suspended
    # Pooled, the two versions are at 97.4%: above the approval's level, no slip to see.
    items = 100 * 0.91 + 400 * 0.995
    assert items / 500 > 0.97
    # Two segments: each chart is set for 400 weeks, the stratum's spacing stays 200.
    assert {m.plan.arl0 for m in charted.values() if m.plan} == {2 * STRATUM_ARL0}


def test_the_approvals_own_week_is_monitored(
    approvable: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    con = approvable
    approve(con, "mona", "invoice", "total", "four stable weeks")
    _weeks(builder, (NOW,), wrong=0.15, tag="after")   # the week automation started
    (flagged,) = monitor_approvals(con, until=NOW)
    assert flagged.state is not None and flagged.state.weeks == (str(NOW),)
    assert flagged.state.alarm_week == str(NOW)
    # The default end is the last closed week: NOW is still open, so nothing is charted yet.
    (today,) = monitor_approvals(con)
    assert today.weeks_monitored == 0 and not today.suspended


def test_a_good_stratum_is_not_flagged_over_a_year(
    approvable: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    con = approvable
    _, segment = _approved(con)
    year = tuple(NOW.shift(k) for k in range(52))
    # Binomial weeks at the approval's level: the store's chart, from its labels,
    # against the same chart computed from the weeks' counts.
    _weeks(builder, year, wrong=1 - segment.in_control, tag="year", binomial=True)
    (charted,) = monitor_approvals(con, until=year[-1])
    assert charted.weeks_monitored == 52 and charted.state is not None
    counts = con.execute(
        "SELECT count(*) FILTER (WHERE l.verdict = 'incorrect'), count(*)"
        " FROM extractions e JOIN labels l USING (extraction_id)"
        " WHERE e.extraction_id LIKE '%-year-%' AND e.confidence >= ?"
        " GROUP BY strftime(e.extracted_at, '%G-W%V') ORDER BY 1 IS NULL,"
        " strftime(e.extracted_at, '%G-W%V')", [charted.threshold]).fetchall()
    errors, labels = np.array(counts, dtype=float).T
    expected = cusum_path(errors, labels, in_control=segment.in_control, target=0.95)
    assert charted.state.statistic == pytest.approx(tuple(expected))
    # The stated rate: a false alarm in a year at this level has chance at most
    # 1 - exp(-52 / ARL0) = 0.23 (the chain gives 0.14: the chart starts at 0);
    # this seed's year is one without.
    chance = alarm_probability(segment.threshold, in_control=segment.in_control, target=0.95,
                               labels_per_week=segment.labels_per_week,
                               accuracies=[segment.in_control] * 52)
    assert 0.05 < chance <= 1 - np.exp(-52 / segment.arl0)
    assert not charted.suspended, charted.reason


def test_the_cli_shows_the_charts_and_resumes(
    approvable: duckdb.DuckDBPyConnection, builder: Any, db_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    con = approvable
    approve(con, "mona", "invoice", "total", "four stable weeks")
    _weeks(builder, (NOW,), wrong=0.15, tag="after")
    con.close()
    monkeypatch.setattr(monitoring, "utc_now", lambda: NOW.end + dt.timedelta(hours=1))
    runner = CliRunner()
    shown = runner.invoke(cli, ["--db", str(db_path), "monitor", "--json"])
    assert shown.exit_code == 0, shown.output
    (row,) = json.loads(shown.stdout)
    assert (row["status"], row["alarm_week"], row["weeks_monitored"]) == (
        "suspended", str(NOW), 1)
    exported = runner.invoke(cli, ["--db", str(db_path), "policy", "export"])
    (segment,) = json.loads(exported.stdout)["monitoring"]
    assert segment["status"] == "suspended"
    refused = runner.invoke(cli, ["--db", str(db_path), "monitor", "resume", "--doc-type",
                                  "invoice", "--field", "total", "--form-version", "v9",
                                  "--extractor-version", "m1", "--as", "mona", "--comment",
                                  "x"])
    assert refused.exit_code == 2 and "is not suspended" in refused.output
    assert "Traceback" not in refused.output
    done = runner.invoke(cli, ["--db", str(db_path), "monitor", "resume", "--doc-type",
                               "invoice", "--field", "total", "--form-version", "v1",
                               "--extractor-version", "m1", "--as", "mona", "--comment",
                               "re-scanned"])
    assert done.exit_code == 0, done.output
    assert f"charted again from {NOW.shift(1)}, now automated" in done.stdout
