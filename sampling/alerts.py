"""Weekly alerts: a stratum below target, a stratum slipping, a new form version worse.

Four one-sided tests per (doc_type, field), each at level ``1 - confidence``,
on the design-weighted estimates of :mod:`fieldtrust.sampling.estimates`:

``below_target``
    The week's accuracy is significantly below the target: the one-sided
    upper Korn-Graubard bound (Clopper-Pearson at the effective size) is
    below it. Same evidence as STATS.md section 7's stability check.
``drop``
    The week's accuracy is significantly below the pooled previous
    ``lookback`` weeks (their cells as separate strata).
``sustained_drop``
    The last two weeks pooled are significantly below the ``lookback`` weeks
    before them. A drop that lasts is caught in its second week with twice
    the labels, against a baseline the first bad week has not entered.
    Tested only where both weeks hold labels of the stratum (a count, never
    an outcome, decides), so a stratum with one week adds no second test.
``new_version``
    A new form version's accuracy this week is significantly below the
    established versions' of the same (doc_type, field).

The comparisons are one-sided Fisher tests (mid-p) on effective counts:
each side enters as its Korn-Graubard effective sample size with
``(1 - p) n_eff`` errors, rounded to whole labels (dividing counts by the
design effect, as Rao & Scott 1984, J. Roy. Statist. Soc. A, do for
chi-squared tests). Exact, because errors are rare here: a pooled z test
calls one error in 100 against none in 400 significant (p = 0.02), Fisher
does not (p = 0.2).

The baseline is :data:`LOOKBACK` (8) weeks: its own error rate is estimated,
and a baseline of 480 labels made the test of 120 labels lose more to that
uncertainty than one of 960 (a 97% -> 90% drop caught in its first week in
47% against 57% of runs).

Multiplicity (STATS.md section 11): every stratum and kind is tested each
week, so the week's p-values are held together to the Benjamini-Hochberg
procedure at level ``1 - confidence``: sorted, the ``i``-th smallest of ``m``
alerts when it is at most ``i / m * alpha``. Without it, 22 stable strata at
5% showed a false alert in one week of four; with it, a week where every
stratum is stable shows any alert with probability at most ``alpha``, and on
average at most a share ``alpha`` of the alerts shown are false
(:func:`false_alert_note` says so beside them). The tests of one stratum
share labels and move together (positive dependence), under which
Benjamini-Hochberg keeps its level (Benjamini & Yekutieli 2001).

Reads: the labels with their cells (:func:`~.estimates.audit_labels`, from
the sampled copy and the rollup), never the extraction rows.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from fieldtrust.sampling.estimates import audit_labels, estimate_frame
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import Week
from scipy import stats

from fieldtrust.errors import InputError


@dataclass(frozen=True)
class Alert:
    """One alert on one (doc_type, field), or one of its form versions.

    ``interval`` is the two-sided interval of ``estimate`` at the alert's
    confidence; ``baseline`` is what it was compared with (the target, the
    previous weeks' accuracy or the established versions').
    """

    kind: str
    doc_type: str
    field: str
    form_version: str | None
    week: str
    estimate: float
    interval: tuple[float, float]
    baseline: float
    p_value: float
    n: int
    message: str
    q_value: float = float("nan")  # Benjamini-Hochberg adjusted p-value of the week


KINDS = ("below_target", "drop", "sustained_drop", "new_version")

#: Weeks pooled as the baseline of the ``drop`` and ``sustained_drop`` tests.
LOOKBACK = 8


def weekly_alerts(
    con: duckdb.DuckDBPyConnection,
    week: Week | str | None = None,
    *,
    target: float = 0.95,
    confidence: float = 0.95,
    lookback: int = LOOKBACK,
) -> list[Alert]:
    """Alerts for ISO ``week`` (default: the newest week with an audit sample).

    Parameters
    ----------
    week
        The week to check.
    target
        Accuracy a stratum should reach.
    confidence
        ``1 - alpha`` of each one-sided test.
    lookback
        Previous weeks pooled as the baseline of the ``drop`` test (and, one
        week earlier, of ``sustained_drop``).

    Returns
    -------
    list of Alert
        Sorted by kind (as in :data:`KINDS`), then p-value.

    References
    ----------
    Clopper & Pearson (1934); Korn & Graubard (1998); Rao & Scott (1984);
    Fisher (1935), The Design of Experiments.
    """
    if not 0 < target < 1 or not 0 < confidence < 1:
        raise InputError(f"target {target} and confidence {confidence} must be in (0, 1)")
    if lookback < 1:
        raise InputError(f"lookback must be at least 1 week, got {lookback}")
    checked = Week(week) if week else _latest_sampled_week(con)
    if checked is None:
        return []
    labels = audit_labels(con, Scope(weeks=alert_weeks(checked, lookback)))
    tests = week_tests(con, labels, checked, target=target, confidence=confidence,
                       lookback=lookback)
    return alerts_from_tests(tests, confidence=confidence)


def alert_weeks(week: Week | str, lookback: int) -> tuple[Week, ...]:
    """The weeks an alert on ``week`` reads, oldest first: ``lookback + 1`` before it, then itself.

    ``drop`` compares ``week`` with the ``lookback`` weeks before it;
    ``sustained_drop`` compares ``week`` and the one before with the
    ``lookback`` weeks before those.
    """
    week = Week(week)
    return (*(week.shift(-k) for k in range(lookback + 1, 0, -1)), week)


def alerts_from_tests(tests: Sequence[Alert], *, confidence: float = 0.95) -> list[Alert]:
    """The tests of a week (:func:`week_tests`) that alert, with their q-values, sorted.

    The false discovery rate is held at ``1 - confidence`` over all of them
    (Benjamini & Hochberg, 1995); sorted by kind (as in :data:`KINDS`), then
    p-value.
    """
    q_values = benjamini_hochberg([a.p_value for a in tests])
    alerts = [dataclasses.replace(a, q_value=float(q)) for a, q in zip(tests, q_values, strict=True)
              if q <= 1 - confidence]
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(alerts, key=lambda a: (order[a.kind], a.p_value, a.doc_type, a.field))


def week_tests(
    con: duckdb.DuckDBPyConnection,
    labels: pa.Table,
    week: Week | str,
    *,
    target: float = 0.95,
    confidence: float = 0.95,
    lookback: int = LOOKBACK,
) -> list[Alert]:
    """Every test of ``week``, alerting or not (``q_value`` unset), in :data:`KINDS` order.

    The false discovery rate is controlled over all of them
    (:func:`alerts_from_tests`); their number is what :func:`false_alert_note`
    reports. ``labels`` are :func:`~.estimates.audit_labels` of at least
    :func:`alert_weeks` of ``week``.
    """
    week = Week(week)
    weeks = alert_weeks(week, lookback)
    labelled = set(labels.column("week").to_pylist())
    previous = tuple(w for w in weeks[1:-1] if w in labelled)  # named in the messages
    before_two = tuple(w for w in weeks[:-2] if w in labelled)
    stratum = ("doc_type", "field")
    now = estimate_frame(con, labels, by=stratum, confidence=confidence, weeks=(week,))
    before = estimate_frame(con, labels, by=stratum, confidence=confidence, weeks=previous)
    tests = _below_target(now, week, target, 1.0)
    tests += _drops(now, before, week, previous, 1.0)
    # The sustained test only where last week holds labels of the stratum too.
    last = estimate_frame(con, labels, by=stratum, confidence=confidence, weeks=weeks[-2:-1])
    both = estimate_frame(con, labels, by=stratum, confidence=confidence, weeks=weeks[-2:])
    if not last.empty and not both.empty and not now.empty:
        both = both.merge(last[list(stratum)], on=list(stratum)).merge(
            now[list(stratum)], on=list(stratum))
        earlier = estimate_frame(con, labels, by=stratum, confidence=confidence,
                                  weeks=before_two)
        tests += _drops(both, earlier, week, before_two, 1.0, sustained=weeks[-2])
    tests += _new_versions(con, labels, week, confidence, 1.0)
    return [a for a in tests if np.isfinite(a.p_value)]


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values); NaN p-values are never rejected.

    A test is rejected at level ``alpha`` exactly when its q-value is at most
    ``alpha`` (step-up: the largest ``i`` with ``p_(i) <= i alpha / m``).
    Equals ``scipy.stats.false_discovery_control(p, method="bh")`` on finite p.

    References
    ----------
    Benjamini & Hochberg (1995), J. Roy. Statist. Soc. B 57:289.
    """
    p = np.asarray(p_values, dtype=float)
    q = np.full(p.shape, np.inf)
    finite = np.isfinite(p)
    m = int(finite.sum())
    if m == 0:
        return q
    order = np.argsort(p[finite])
    ranked = p[finite][order] * m / np.arange(1, m + 1)
    adjusted = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(adjusted, 1.0)
    q[finite] = out
    return q


def false_alert_note(n_tests: int, confidence: float = 0.95) -> str:
    """What to expect by chance, in words, for a week of ``n_tests`` tests at this level."""
    alpha = 1.0 - confidence
    unadjusted = n_tests * alpha
    return (
        f"{n_tests} tests this week, false discovery rate held at {alpha:.0%} (Benjamini-Hochberg):"
        f" if nothing changed, a false alert shows in at most {alpha:.0%} of weeks"
        f" (untested one by one, {unadjusted:.1f} false alerts a week would be expected);"
        f" of the alerts shown, at most {alpha:.0%} are false on average"
    )


def count_tests(
    con: duckdb.DuckDBPyConnection, labels: pa.Table, week: Week | str, *,
    lookback: int = LOOKBACK,
) -> int:
    """How many tests the alerts of ``week`` hold together (:func:`week_tests`).

    ``labels`` as for :func:`week_tests`.
    """
    return len(week_tests(con, labels, week, lookback=lookback))


def below_target_p_value(estimate: float, n_eff: float, target: float) -> float:
    """Exact binomial p-value of "accuracy >= target" at the effective size.

    ``P(X <= x)`` for ``X ~ Binomial(n_eff, target)``, ``x = estimate * n_eff``,
    through the beta form ``I_{1 - target}(n - x, x + 1)`` so fractional
    effective counts work; it is below ``alpha`` exactly when the one-sided
    Clopper-Pearson upper bound is below the target.
    """
    return float(below_target_p_values(estimate, n_eff, target))


def below_target_p_values(
    estimate: npt.ArrayLike, n_eff: npt.ArrayLike, target: float
) -> npt.NDArray[np.float64]:
    """:func:`below_target_p_value` elementwise over arrays (NaN where it is undefined)."""
    estimate, n_eff = np.broadcast_arrays(np.asarray(estimate, float), np.asarray(n_eff, float))
    x = estimate * n_eff
    with np.errstate(invalid="ignore"):
        defined = np.isfinite(x) & (n_eff > 0)
        inside = defined & (x < n_eff)
        p = stats.beta.cdf(1 - target, np.where(inside, n_eff - x, 1.0),
                           np.where(inside, x + 1, 1.0))
    return np.where(inside, p, np.where(defined, 1.0, np.nan)).astype(np.float64)


def lower_rate_p_value(p1: float, n1: float, p0: float, n0: float) -> float:
    """One-sided p-value that accuracy ``p1`` is below ``p0``: Fisher's exact test, mid-p.

    The 2x2 table holds, per side, ``round((1 - p) n)`` errors and the rest
    correct, ``n`` being an effective sample size; the alternative is a larger
    share of errors on side 1. Conditional on the margins the errors of side
    1 are hypergeometric (Fisher 1935); the mid-p value ``P(X > x) + P(X = x) / 2``
    (Lancaster 1961) removes the exact test's conservatism from discreteness,
    which Benjamini-Hochberg across every stratum could not afford (a 97% ->
    90% drop with 120 labels a week was caught in 44% of weeks with the plain
    exact p-value).
    """
    return float(lower_rate_p_values(p1, n1, p0, n0))


def lower_rate_p_values(
    p1: npt.ArrayLike, n1: npt.ArrayLike, p0: npt.ArrayLike, n0: npt.ArrayLike
) -> npt.NDArray[np.float64]:
    """:func:`lower_rate_p_value` elementwise over arrays (NaN where it is undefined)."""
    p1, n1, p0, n0 = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (p1, n1, p0, n0)))
    # Callers pass effective sizes capped at the label counts: with a nearly
    # complete census the finite-population correction drives n_eff towards
    # infinity, and an exact test on such a table neither ends nor means more.
    with np.errstate(invalid="ignore"):
        defined = (np.minimum(n1, n0) > 0) & np.isfinite(p1) & np.isfinite(p0)
    size1 = np.rint(np.where(defined, n1, 1.0))
    size0 = np.rint(np.where(defined, n0, 1.0))
    wrong1 = np.rint((1 - np.where(defined, p1, 1.0)) * size1)
    wrong0 = np.rint((1 - np.where(defined, p0, 1.0)) * size0)
    law = stats.hypergeom(size1 + size0, wrong1 + wrong0, size1)
    p = np.minimum(1.0, law.sf(wrong1) + 0.5 * law.pmf(wrong1))
    return np.where(defined, p, np.nan).astype(np.float64)


def _latest_sampled_week(con: duckdb.DuckDBPyConnection) -> Week | None:
    rows = con.sql("SELECT max(week) FROM audit_samples").fetchall()
    return Week(rows[0][0]) if rows and rows[0][0] is not None else None


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _alert(kind: str, row: Any, week: str, baseline: float, p_value: float, message: str, *,
           form_version: str | None = None) -> Alert:
    """An alert on the estimate of ``row`` (a row of :func:`~.estimates.estimate_frame`)."""
    return Alert(kind, row.doc_type, row.field, form_version, week, row.estimate,
                 (row.lower, row.upper), baseline, p_value, int(row.n), message)


def _interval(row: Any) -> str:
    return f"{_pct(row.estimate)} [{_pct(row.lower)}, {_pct(row.upper)}]"


def _below_target(now: pd.DataFrame, week: str, target: float, alpha: float) -> list[Alert]:
    alerts = []
    for row in now.itertuples(index=False):
        p_value = below_target_p_value(row.estimate, row.n_eff, target)
        if p_value <= alpha:
            alerts.append(_alert(
                "below_target", row, week, target, p_value,
                f"{row.doc_type}/{row.field}: accuracy {_interval(row)} in {week} is below the "
                f"{_pct(target)} target (p = {p_value:.3g}, {row.n} labels)",
            ))
    return alerts


def _drops(
    now: pd.DataFrame, before: pd.DataFrame, week: str, previous: tuple[str, ...], alpha: float,
    *, sustained: str | None = None,
) -> list[Alert]:
    """``drop`` tests of ``now`` against ``before``; ``sustained_drop`` when ``now`` pools
    the week ``sustained`` with ``week``."""
    if now.empty or before.empty:
        return []
    both = now.merge(before, on=["doc_type", "field"], suffixes=("", "_before"))
    span = f"{previous[0]}..{previous[-1]}" if len(previous) > 1 else previous[0]
    seen = f"{sustained} and {week}" if sustained else week
    alerts = []
    for row in both.itertuples(index=False):
        p_value = lower_rate_p_value(
            row.estimate, min(row.n_eff, row.n), row.estimate_before,
            min(row.n_eff_before, row.n_before),
        )
        if p_value <= alpha:
            alerts.append(_alert(
                "sustained_drop" if sustained else "drop", row, week, row.estimate_before, p_value,
                f"{row.doc_type}/{row.field}: accuracy fell from {_pct(row.estimate_before)} "
                f"in {span} to {_interval(row)} in {seen} (p = {p_value:.3g})",
            ))
    return alerts


def _new_versions(
    con: duckdb.DuckDBPyConnection, labels: pa.Table, week: str, confidence: float,
    alpha: float,
) -> list[Alert]:
    versions = estimate_frame(
        con,
        labels,
        by=("doc_type", "field", "version_status", "form_version"),
        confidence=confidence,
        weeks=(week,),
    )
    status = estimate_frame(
        con,
        labels,
        by=("doc_type", "field", "version_status"),
        confidence=confidence,
        weeks=(week,),
    )
    new = versions[versions["version_status"] == "new"]
    established = status[status["version_status"] == "established"]
    if new.empty or established.empty:
        return []
    both = new.merge(established, on=["doc_type", "field"], suffixes=("", "_old"))
    alerts = []
    for row in both.itertuples(index=False):
        p_value = lower_rate_p_value(
            row.estimate, min(row.n_eff, row.n), row.estimate_old, min(row.n_eff_old, row.n_old)
        )
        if p_value <= alpha:
            alerts.append(_alert(
                "new_version", row, week, row.estimate_old, p_value,
                f"{row.doc_type}/{row.field}: new form version {row.form_version} has accuracy "
                f"{_interval(row)} in {week}, below {_pct(row.estimate_old)} on established"
                f" versions (p = {p_value:.3g})",
                form_version=row.form_version,
            ))
    return alerts
