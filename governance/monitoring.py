"""Monitoring approved strata: each covered segment's weekly chart, and its suspension.

For every stratum whose current decision is an approval, each segment the
approval covers (one form version x one extractor version, never pooled)
is charted week by week (:func:`fieldtrust.calibration.monitoring.detector_state`)
from the **approval's own week** on, through the last closed week, on the
design-based audit labels above the approved threshold (read through
:func:`fieldtrust.store.labelled.design_based_items`, so adjudicated verdicts
and design weights count as everywhere else). The chart's parameters are
the ones frozen in the approval's evidence
(:mod:`fieldtrust.governance.monitoring_plan`), never recomputed.

A segment whose chart alarmed is **suspended**: the exported policy sends
it to people (:func:`fieldtrust.governance.policy.export_policy`) until a
person decides, by revoking the stratum or by resuming the segment with a
reason (:func:`fieldtrust.governance.acts.resume`, an append-only row). A
resumed chart starts again at 0 in the week after the alarm it answered.

An approval frozen before monitoring existed has no chart parameters: its
covered form versions are listed as not monitored (re-approve to monitor
them), never as passing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from fieldtrust.calibration.monitoring import DetectorState, WeekEvidence, detector_state
from fieldtrust.calibration.segments import ANY_EXTRACTOR
from fieldtrust.governance.decisions import PolicyEntry, current_policy
from fieldtrust.governance.evidence import evidence_payload
from fieldtrust.governance.monitoring_plan import MonitoringPlan, SegmentPlan
from fieldtrust.store.connection import utc_now
from fieldtrust.store.labelled import design_based_items
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import Week, iso_week


@dataclass(frozen=True)
class SegmentMonitor:
    """One covered segment of an approved stratum: its chart and whether it is suspended."""

    doc_type: str
    field: str
    form_version: str
    extractor_version: str  # "*": every extractor (a lake store, or evidence before segments)
    threshold: float
    decision_id: str
    approval_week: str
    since_week: str  # the chart's first week: the approval's, or after a resumed alarm
    plan: SegmentPlan | None  # None: approved before monitoring, not monitored
    state: DetectorState | None

    @property
    def suspended(self) -> bool:
        """True while the chart has alarmed and no person has resumed the segment."""
        return self.state is not None and self.state.alarm

    @property
    def status(self) -> str:
        """``suspended``, ``automated`` or ``not monitored`` (no chart frozen)."""
        if self.plan is None:
            return "not monitored"
        return "suspended" if self.suspended else "automated"

    @property
    def reason(self) -> str | None:
        """Why the segment is suspended (or not monitored); None while it is watched and fine."""
        if self.plan is None:
            return ("approved before monitoring: no chart was frozen with the approval;"
                    " re-approve to monitor it")
        return self.state.reason if self.state is not None else None

    @property
    def statistic(self) -> float:
        """The chart's latest value (0 before its first week)."""
        return self.state.statistic[-1] if self.state and self.state.statistic else 0.0

    @property
    def weeks_monitored(self) -> int:
        return len(self.state.weeks) if self.state else 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``fieldtrust monitor --json``): the segment, its chart and status."""
        plan = self.plan
        return {
            "doc_type": self.doc_type, "field": self.field,
            "form_version": self.form_version, "extractor_version": self.extractor_version,
            "threshold": self.threshold, "decision_id": self.decision_id,
            "approval_week": self.approval_week, "since_week": self.since_week,
            "status": self.status, "statistic": self.statistic,
            "alarm_threshold": plan.threshold if plan else None,
            "in_control": plan.in_control if plan else None,
            "target": plan.target if plan else None,
            "arl0": plan.arl0 if plan else None,
            "labels_per_week": plan.labels_per_week if plan else None,
            "detection_rate": plan.detection_rate if plan else None,
            "weeks_monitored": self.weeks_monitored,
            "alarm_week": self.state.alarm_week if self.state else None,
            "weeks": list(self.state.weeks) if self.state else [],
            "weeks_without_evidence": list(self.state.weeks_without_evidence)
            if self.state else [],
            "reason": self.reason,
        }


def monitor_approvals(
    con: duckdb.DuckDBPyConnection, *, until: str | None = None
) -> list[SegmentMonitor]:
    """Every covered segment of every approved stratum, charted through ``until``.

    ``until``: the last week charted (default: the last closed week, the one
    before the current UTC week). Sorted by stratum, form version, extractor
    version. The one path the CLI (``fieldtrust monitor``), the dashboard and
    the policy export read.
    """
    last = Week(until) if until is not None else iso_week(utc_now()).shift(-1)
    resumed = _resumptions(con)
    monitors: list[SegmentMonitor] = []
    for entry in current_policy(con):
        if entry.status != "active" or entry.threshold is None:
            continue
        monitors.extend(_stratum_monitors(con, entry, last, resumed))
    return monitors


def approval_plan(con: duckdb.DuckDBPyConnection, evidence_id: str | None) -> MonitoringPlan | None:
    """The monitoring plan frozen with an approval (None before monitoring existed)."""
    if evidence_id is None:
        return None
    record = evidence_payload(con, evidence_id).get("monitoring")
    return MonitoringPlan.from_dict(record) if record else None


def covered_form_versions(con: duckdb.DuckDBPyConnection, evidence_id: str | None) -> list[str]:
    """The form versions an approval's evidence covers; none known means none covered."""
    if evidence_id is None:
        return []
    certification = evidence_payload(con, evidence_id).get("certification") or {}
    if "covered_versions" in certification:
        return [str(v) for v in certification["covered_versions"]]
    # Evidence frozen before approvals named their versions: the checks that covered.
    return [str(v["form_version"]) for v in certification.get("form_versions") or []
            if isinstance(v, dict) and v.get("covered")]


def covered_segments(
    con: duckdb.DuckDBPyConnection, evidence_id: str | None
) -> list[tuple[str, str]]:
    """The (form version, extractor version) segments an approval covers, as it froze them.

    From the evidence alone, so the policy as it stood at any history entry
    rebuilds them: the monitoring plan's segments, or, for evidence frozen
    before monitoring, each covered form version with every extractor (``*``).
    """
    plan = approval_plan(con, evidence_id)
    if plan is None:
        return [(v, ANY_EXTRACTOR) for v in covered_form_versions(con, evidence_id)]
    return [(s.form_version, s.extractor_version) for s in plan.segments]


def _stratum_monitors(
    con: duckdb.DuckDBPyConnection, entry: PolicyEntry, last: Week,
    resumed: dict[tuple[str, str, str], str],
) -> list[SegmentMonitor]:
    decision = entry.decision
    approval_week = iso_week(decision.decided_at)
    plan = approval_plan(con, decision.evidence_id)
    threshold = float(entry.threshold or 0.0)

    def monitor(form_version: str, extractor_version: str, since: Week,
                plan: SegmentPlan | None, state: DetectorState | None) -> SegmentMonitor:
        return SegmentMonitor(entry.doc_type, entry.field, form_version, extractor_version,
                              threshold, decision.decision_id, str(approval_week), str(since),
                              plan, state)

    if plan is None:
        return [monitor(v, ANY_EXTRACTOR, approval_week, None, None)
                for v in covered_form_versions(con, decision.evidence_id)]
    items = design_based_items(con, Scope(doc_types=(entry.doc_type,), fields=(entry.field,)))
    monitors = []
    for segment in plan.segments:
        alarm = resumed.get((decision.decision_id, segment.form_version,
                             segment.extractor_version))
        since = Week(alarm).shift(1) if alarm is not None else approval_week
        weekly = _weekly_evidence(items, segment, threshold, since, last)
        state = detector_state(weekly, in_control=segment.in_control, target=segment.target,
                               arl0=segment.arl0, labels_per_week=segment.labels_per_week)
        # The frozen threshold decides, not one recomputed from today's code.
        if abs(state.threshold - segment.threshold) > 1e-9:
            state = _with_threshold(state, segment.threshold)
        monitors.append(monitor(segment.form_version, segment.extractor_version, since,
                                segment, state))
    return monitors


def _with_threshold(state: DetectorState, threshold: float) -> DetectorState:
    """The same chart alarmed at the frozen ``threshold``."""
    above = [i for i, v in enumerate(state.statistic) if v >= threshold]
    alarm = state.weeks[above[0]] if above else None
    return dataclasses.replace(state, threshold=threshold, alarm_week=alarm)


def _weekly_evidence(
    items: pa.Table, segment: SegmentPlan, threshold: float, since: Week, last: Week
) -> list[WeekEvidence]:
    """One :class:`WeekEvidence` per week from ``since`` through ``last`` (none: no weeks)."""
    week = np.asarray(items.column("week").to_pylist(), dtype=object)
    keep = np.asarray(items.column("confidence").to_numpy(), dtype=float) >= threshold
    keep &= np.asarray(items.column("form_version").to_pylist(), dtype=object) == \
        segment.form_version
    if segment.extractor_version != ANY_EXTRACTOR:
        keep &= np.asarray(items.column("extractor_version").to_pylist(), dtype=object) == \
            segment.extractor_version
    correct = np.asarray(items.column("correct").to_numpy(), dtype=float)
    weight = np.asarray(items.column("weight").to_numpy(), dtype=float)
    weekly = []
    current = since
    while current <= last:
        mask = keep & (week == str(current))
        weekly.append(WeekEvidence.from_labels(str(current), correct[mask], weight[mask]))
        current = current.shift(1)
    return weekly


def _resumptions(con: duckdb.DuckDBPyConnection) -> dict[tuple[str, str, str], str]:
    """The latest resumed alarm week per (decision, form version, extractor version)."""
    rows = con.execute(
        "SELECT decision_id, form_version, extractor_version, max(alarm_week)"
        " FROM monitoring_resumptions GROUP BY ALL"
    ).fetchall()
    return {(str(d), str(f), str(e)): str(w) for d, f, e, w in rows}
