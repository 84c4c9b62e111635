"""Flag approved strata that later audits show failing: "revocation recommended".

For every stratum whose current policy is an approval, the approval's own
ISO week and each week after it are checked on their own audit labels above
the approved threshold, read through
:func:`fieldtrust.store.labelled.labelled_items` (adjudicated verdicts and
design weights count as everywhere else). The approval's week is automated
from the approval on, so it is watched like any later week. A week fails when its
accuracy is significantly below the target, one-sided at level
``1 - confidence``: the upper confidence bound on the design-weighted
accuracy is below the target. The bound is Korn-Graubard (STATS.md section
3): Clopper-Pearson at the effective sample size ``n_eff = p(1 - p) /
var(p)``, with ``var(p)`` the linearised (with-replacement) variance of the
Hajek ratio estimator, ``n_eff`` capped at the label count (conservative);
approximate, as the docs say. A recommendation never revokes anything by
itself: a manager decides.

References: Korn & Graubard, "Confidence intervals for proportions with small
expected number of positive counts estimated from survey data", Survey
Methodology 24, 1998; Clopper & Pearson, Biometrika 26, 1934.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
from fieldtrust.calibration import survey
from fieldtrust.governance.decisions import PolicyEntry, current_policy
from fieldtrust.store.bar import Bar, resolve_bar
from fieldtrust.store.labelled import design_based_items
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import iso_week

from fieldtrust.errors import Refused


@dataclass(frozen=True)
class WeekCheck:
    """One week's audit of an approved stratum above its threshold."""

    week: str
    n: int
    accuracy: float
    upper_bound: float
    failing: bool


@dataclass(frozen=True)
class RevocationRecommendation:
    """An approved stratum with at least one failing week after its approval."""

    doc_type: str
    field: str
    threshold: float
    approved_by: str
    approved_at: dt.datetime
    decision_id: str
    weeks: list[WeekCheck]
    reason: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form (the approval time as ISO text)."""
        record = dataclasses.asdict(self)
        record["approved_at"] = self.approved_at.isoformat()
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> RevocationRecommendation:
        """Read :meth:`to_dict`'s form back."""
        values = dict(record)
        values["approved_at"] = dt.datetime.fromisoformat(values["approved_at"])
        values["weeks"] = [WeekCheck(**w) for w in values["weeks"]]
        return cls(**values)


@dataclass(frozen=True)
class PolicyReview:
    """A decided stratum's current policy and, if later audits fail it, the recommendation."""

    entry: PolicyEntry
    revocation: RevocationRecommendation | None

    def to_dict(self) -> dict[str, Any]:
        """One row of ``fieldtrust policy show --json``: the policy, then the revocation reason."""
        reason = self.revocation.reason if self.revocation else None
        return {**self.entry.to_dict(), "revocation": reason}


def policy_review(con: duckdb.DuckDBPyConnection, bar: Bar | None = None) -> list[PolicyReview]:
    """Every decided stratum (as :func:`current_policy`) with its revocation recommendation.

    ``bar`` as :func:`revocation_recommendations`.
    """
    flagged = {(r.doc_type, r.field): r for r in revocation_recommendations(con, bar)}
    return [PolicyReview(e, flagged.get((e.doc_type, e.field))) for e in current_policy(con)]


def revocation_recommendations(
    con: duckdb.DuckDBPyConnection, bar: Bar | None = None
) -> list[RevocationRecommendation]:
    """Approved strata whose audits after the approval show accuracy below the bar's target.

    Parameters
    ----------
    bar
        Its ``target`` is the accuracy an automated stratum must keep, its
        ``confidence`` ``1 - delta`` of the one-sided test (the upper bound's
        level). None: the store's policy (:func:`fieldtrust.store.bar.resolve_bar`).

    Returns
    -------
    list of RevocationRecommendation
        One per flagged stratum, with every week checked and a reason naming
        the failing weeks.
    """
    bar = resolve_bar(con) if bar is None else bar
    target, confidence = bar.target, bar.confidence
    flagged = []
    for entry in current_policy(con):
        if entry.status != "active" or entry.threshold is None:
            continue
        checks = _weekly_checks(con, entry.doc_type, entry.field, entry.threshold,
                                iso_week(entry.decision.decided_at), target, confidence)
        failing = [c for c in checks if c.failing]
        if not failing:
            continue
        reason = "; ".join(
            f"week {c.week}: accuracy {c.accuracy:.3f} above threshold {entry.threshold}"
            f" (n={c.n}), upper {confidence:.0%} bound {c.upper_bound:.3f} < target {target}"
            for c in failing
        )
        flagged.append(
            RevocationRecommendation(
                doc_type=entry.doc_type,
                field=entry.field,
                threshold=entry.threshold,
                approved_by=entry.decision.decided_by,
                approved_at=entry.decision.decided_at,
                decision_id=entry.decision.decision_id,
                weeks=checks,
                reason=f"revocation recommended: {reason}",
            )
        )
    return flagged


def weighted_upper_bound(correct: np.ndarray, weight: np.ndarray, confidence: float) -> float:
    """One-sided Korn-Graubard upper bound on a design-weighted proportion.

    Clopper-Pearson at ``n_eff = p(1 - p) / var(p)`` (capped at n), with the
    linearised variance of the Hajek ratio ``p = sum(w y) / sum(w)``
    (Korn & Graubard 1998; R ``survey::svyciprop(method = "beta")``).
    """
    n = len(correct)
    if n == 0:
        raise Refused("no labels: the bound needs at least one")
    p = survey.hajek(correct, weight)
    one_cell = np.zeros(n, dtype=np.int64)
    variance = survey.linearised_variance(correct, weight, one_cell, np.zeros(n),
                                          confidence=confidence)
    return float(survey.korn_graubard_bound(p, variance, n, confidence=confidence, side="upper"))


def _weekly_checks(
    con: duckdb.DuckDBPyConnection,
    doc_type: str,
    field: str,
    threshold: float,
    approval_week: str,
    target: float,
    confidence: float,
) -> list[WeekCheck]:
    items = design_based_items(con, Scope(doc_types=(doc_type,), fields=(field,)))
    week = np.asarray(items.column("week").to_pylist(), dtype=object)
    above = np.asarray(items.column("confidence").to_numpy()) >= threshold
    keep = above & (week >= approval_week)
    correct = np.asarray(items.column("correct").to_numpy(), dtype=float)[keep]
    weight = np.asarray(items.column("weight").to_numpy(), dtype=float)[keep]
    week = week[keep]
    checks = []
    for label in sorted(set(week.tolist())):
        mask = week == label
        accuracy = float(np.sum(weight[mask] * correct[mask]) / np.sum(weight[mask]))
        upper = weighted_upper_bound(correct[mask], weight[mask], confidence)
        checks.append(WeekCheck(label, int(mask.sum()), accuracy, upper, upper < target))
    return checks
