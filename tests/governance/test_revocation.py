"""Revocation recommended when a bad audit week follows an approval."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import numpy as np
import pytest
from decided import approve_as_stated
from fieldtrust.governance.acts import revoke
from fieldtrust.governance.evidence import load_evidence
from fieldtrust.governance.revocation import revocation_recommendations, weighted_upper_bound
from fieldtrust.store.bar import Bar
from fieldtrust.store.weeks import Week, iso_week
from scipy.stats import beta

from fieldtrust import store
from fieldtrust.errors import InputError, Refused

EVIDENCE = {"threshold": 0.9, "labels": 300, "accuracy": 0.99, "lower_bound": 0.96}


def _week(builder: Any, con: duckdb.DuckDBPyConnection, week: str, field: str,
          n_correct: int, n_wrong: int, *, confidence: float = 0.95) -> None:
    """One audited week of a stratum: labelled items at ``confidence``."""
    start, _ = Week(week).bounds()
    ids = [f"{week}-{field}-{confidence}-{i}" for i in range(n_correct + n_wrong)]
    builder.extractions([
        {"extraction_id": e, "field": field, "confidence": confidence,
         "extracted_at": start + dt.timedelta(hours=1)} for e in ids
    ])
    row = con.execute("SELECT count(*) FROM audit_samples WHERE week = ?", [week]).fetchone()
    version = row[0] + 1 if row else 1
    cell = f"invoice|{field}|high|established"
    builder.sample(f"{week}/v{version}", week,
                   [(e, cell, 0.25, i / 1000, False) for i, e in enumerate(ids)],
                   version=version)
    builder.labels([
        {"extraction_id": e, "reviewer": "alice", "verdict": "correct"} if i < n_correct else
        {"extraction_id": e, "reviewer": "alice", "verdict": "incorrect",
         "corrected_status": "null", "error_type": "total_copied_into_tax"}
        for i, e in enumerate(ids)
    ])


def test_bad_week_after_approval_is_flagged(
    review_store: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    con = review_store
    now_week = iso_week(store.utc_now())
    # A bad week *before* the approval is history the evidence already weighed.
    _week(builder, con, Week(now_week).shift(-1), "total", 30, 30)
    for field in ("total", "tax"):
        approve_as_stated(con, "mona", "invoice", field, 0.9, "certified")
    assert revocation_recommendations(con) == []

    bad, good = Week(now_week).shift(1), Week(now_week).shift(2)
    _week(builder, con, bad, "total", 45, 15)           # 75% above the threshold
    _week(builder, con, bad, "total", 0, 20, confidence=0.5)  # a smaller redraw: not current
    _week(builder, con, good, "total", 40, 0)
    _week(builder, con, bad, "tax", 60, 0)
    (flag,) = revocation_recommendations(con)
    assert (flag.doc_type, flag.field, flag.threshold, flag.approved_by) == (
        "invoice", "total", 0.9, "mona")
    assert [(w.week, w.n, w.failing) for w in flag.weeks] == [(bad, 60, True), (good, 40, False)]
    assert flag.weeks[0].accuracy == pytest.approx(0.75)
    assert flag.weeks[0].upper_bound < 0.95
    assert flag.reason.startswith("revocation recommended: week " + bad)
    assert "0.750" in flag.reason

    # Revoking settles it: a revoked stratum is not flagged again.
    revoked = revoke(con, "mona", "invoice", "total", flag.reason)
    assert revocation_recommendations(con) == []
    # The recommendation is the revocation's evidence, computed by the act itself.
    frozen = load_evidence(con, revoked.evidence_id or "")
    assert frozen.revocation == flag and frozen.certification is None
    # The designs frozen are those of the weeks the recommendation checked.
    assert {d.week for d in frozen.designs} == {bad, good}


def test_the_approvals_own_week_is_watched_like_any_after_it(
    review_store: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    con = review_store
    now_week = iso_week(store.utc_now())
    approve_as_stated(con, "mona", "invoice", "total", 0.9, "certified")
    # The week of the approval is automated from the approval on: a bad audit of it
    # is a slip like any later week's (issue 23: the first automated week was never checked).
    _week(builder, con, now_week, "total", 45, 15)
    (flag,) = revocation_recommendations(con)
    assert [(w.week, w.n, w.failing) for w in flag.weeks] == [(now_week, 60, True)]


def test_upper_bound_is_clopper_pearson_at_the_effective_size() -> None:
    correct = np.array([1.0] * 45 + [0.0] * 15)
    weight = np.full(60, 4.0)
    # Equal weights: var = p(1-p)/(n-1), so n_eff = n - 1.
    n_eff, p = 59, 0.75
    expected = beta.ppf(0.95, p * n_eff + 1, n_eff - p * n_eff)
    assert weighted_upper_bound(correct, weight, 0.95) == pytest.approx(expected)
    assert weighted_upper_bound(np.ones(10), np.ones(10), 0.95) == 1.0
    with pytest.raises(Refused, match="no labels"):
        weighted_upper_bound(np.array([]), np.array([]), 0.95)


def test_bound_covers_the_truth_in_simulation() -> None:
    # Unequal weights (two cells), true accuracy 0.9: the one-sided 95% upper bound
    # should sit below the truth about 5% of the time, not much more.
    rng = np.random.default_rng(11)
    misses = 0
    runs = 400
    for _ in range(runs):
        correct = np.concatenate([rng.random(40) < 0.95, rng.random(40) < 0.85]).astype(float)
        weight = np.concatenate([np.full(40, 1.0), np.full(40, 1.0)])
        misses += weighted_upper_bound(correct, weight, 0.95) < 0.9
    assert misses / runs < 0.08


def test_bad_arguments(review_store: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(InputError, match=r"bar setting target = 1\.0 must be strictly between"):
        revocation_recommendations(review_store, Bar(target=1.0))
