"""Automation candidates: which strata may skip human review above a threshold, and why not.

A stratum is a candidate when (STATS.md sections 6 and 7)

1. it has extractions in the scope (else ``no_coverage``);
2. a threshold is certified (else ``accuracy_below_target`` when no
   candidate threshold even estimates the target, ``too_few_labels``
   otherwise);
3. no week among the last K with labels is significantly below the target
   above it (else ``unstable_week``);
4. every form version with extractions above it has enough labels of its own
   there (else ``new_form_version_without_evidence``).

The evidence of a candidate is a plain, JSON-ready dict: what a manager's
approval freezes.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

import duckdb
from fieldtrust.calibration.population import StratumData, empty_stratum, load_strata, strata_names
from fieldtrust.calibration.stability import VersionCheck, WeekCheck, version_checks, week_checks
from fieldtrust.calibration.thresholds import ThresholdResult, select_thresholds
from fieldtrust.store.scope import Scope

import fieldtrust

#: The closed set of reasons a stratum is not a candidate, with the text shown to people.
REASONS: dict[str, str] = {
    "no_coverage": "no extractions in the selected weeks: nothing to automate",
    "no_labels": (
        "no labels yet: draw an audit sample (fieldtrust sample) and label it"
    ),
    "accuracy_below_target": (
        "accuracy is below the target at every threshold with labels; more labels will not help"
    ),
    "too_few_labels": "too few labels above the best threshold to certify the target",
    "unstable_week": "a recent week is significantly below the target above the threshold",
    "new_form_version_without_evidence": (
        "a form version above the threshold has too few labels of its own"
    ),
}


@dataclass(frozen=True)
class CandidateAssessment:
    """Whether one stratum is an automation candidate, the reason if not, and the evidence."""

    doc_type: str
    field: str
    candidate: bool
    reason: str | None  # the first failing condition, a key of REASONS
    reasons: tuple[str, ...]  # every failing condition
    threshold: float | None
    labels_needed: int | None = None  # more labels above `labels_needed_threshold` to certify
    labels_needed_threshold: float | None = None
    weeks_checked: tuple[WeekCheck, ...] = ()
    form_versions: tuple[VersionCheck, ...] = ()
    evidence: dict[str, Any] = dataclass_field(default_factory=dict)

    @property
    def reason_text(self) -> str | None:
        return REASONS[self.reason] if self.reason else None


def assess(
    data: StratumData,
    thresholds: ThresholdResult,
    *,
    target: float,
    confidence: float,
    n_min: int,
    stability_weeks: int,
    scope: Scope = Scope(),
) -> CandidateAssessment:
    """Decide candidacy of one stratum from its certified threshold and its checks."""
    reasons: list[str] = []
    certified = thresholds.certified
    weeks: list[WeekCheck] = []
    versions: list[VersionCheck] = []
    if data.n_population == 0:
        reasons.append("no_coverage")
    elif data.n_labeled == 0:
        reasons.append("no_labels")
    elif certified is None:
        reasons.append("too_few_labels" if thresholds.point else "accuracy_below_target")
    elif certified.coverage <= 0:
        reasons.append("no_coverage")
    if certified is not None:
        weeks = week_checks(
            data, certified.threshold, target=target, confidence=confidence, weeks=stability_weeks
        )
        versions = version_checks(data, certified.threshold, n_min=n_min)
        if not weeks or any(w.below_target for w in weeks):
            reasons.append("unstable_week")
        if any(not v.enough_labels for v in versions):
            reasons.append("new_form_version_without_evidence")
    evidence = _evidence(data, thresholds, weeks, versions, target, confidence, n_min, scope)
    return CandidateAssessment(
        doc_type=data.doc_type,
        field=data.field,
        candidate=not reasons,
        reason=reasons[0] if reasons else None,
        reasons=tuple(reasons),
        threshold=certified.threshold if certified else None,
        labels_needed=thresholds.labels_needed,
        labels_needed_threshold=thresholds.labels_needed_threshold,
        weeks_checked=tuple(weeks),
        form_versions=tuple(versions),
        evidence=evidence,
    )


def _evidence(
    data: StratumData,
    thresholds: ThresholdResult,
    weeks: list[WeekCheck],
    versions: list[VersionCheck],
    target: float,
    confidence: float,
    n_min: int,
    scope: Scope,
) -> dict[str, Any]:
    certified = thresholds.certified
    return {
        "doc_type": data.doc_type,
        "field": data.field,
        "target": target,
        "confidence": confidence,
        "n_min": n_min,
        "method": "learn-then-test, fixed sequence on a 0.005 grid (STATS.md section 6)",
        "threshold": certified.threshold if certified else None,
        "coverage": certified.coverage if certified else None,
        "labels_above": certified.labels_above if certified else None,
        "accuracy": certified.accuracy if certified else None,
        "accuracy_low": certified.accuracy_low if certified else None,
        "bound_exact_clopper_pearson": certified.exact if certified else None,
        "n_population": data.n_population,
        "n_labeled": data.n_labeled,
        "weeks": sorted(data.week_hist),  # the certification window (weeks with extractions)
        "audit_weeks": sorted({c.week for c in data.cells}),
        "weeks_checked": [w.as_dict() for w in weeks],
        "form_versions": [v.as_dict() for v in versions],
        "code_version": fieldtrust.__version__,
        "scope": {
            "weeks": list(scope.weeks),
            "doc_types": list(scope.doc_types),
            "form_versions": list(scope.form_versions),
            "fields": list(scope.fields),
        },
    }


def automation_candidates(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    *,
    target: float = 0.95,
    confidence: float = 0.95,
    n_min: int = 100,
    stability_weeks: int = 4,
) -> list[CandidateAssessment]:
    """Assess every stratum of the store; candidates first, then by (doc_type, field).

    Parameters
    ----------
    con
        Store connection (read-only is enough).
    scope
        Weeks and filters; certification uses the labels of these weeks.
    target, confidence, n_min
        As :func:`fieldtrust.calibration.thresholds.select_thresholds`.
    stability_weeks
        How many of the most recent weeks with labels must each hold the target.

    Returns
    -------
    list of CandidateAssessment
        One per (doc_type, field) in the store matching the scope's filters,
        including strata with no extractions in the scope's weeks
        (``no_coverage``). ``evidence`` is JSON-ready.
    """
    assessments = []
    loaded = {(s.doc_type, s.field): s for s in load_strata(con, scope)}
    # Without a weeks filter every stratum the filters select has extractions.
    names = set(strata_names(con, scope)) | set(loaded) if scope.weeks else set(loaded)
    for name in sorted(names):
        data = loaded.get(name) or empty_stratum(*name)
        thresholds = select_thresholds(
            data.design, data.labels, target=target, confidence=confidence, n_min=n_min
        )
        assessments.append(
            assess(
                data, thresholds, target=target, confidence=confidence, n_min=n_min,
                stability_weeks=stability_weeks, scope=scope,
            )
        )
    return sorted(assessments, key=lambda a: (not a.candidate, a.doc_type, a.field))
