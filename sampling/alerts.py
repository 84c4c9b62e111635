"""Weekly alerts: a stratum below target, a stratum slipping, a new form version worse.

Three one-sided tests per (doc_type, field), each at level ``1 - confidence``,
on the design-weighted estimates of :mod:`fieldtrust.sampling.estimates`:

``below_target``
    The week's accuracy is significantly below the target: the one-sided
    upper Korn-Graubard bound (Clopper-Pearson at the effective size) is
    below it. Same evidence as STATS.md section 7's stability check.
``drop``
    The week's accuracy is significantly below the pooled previous
    ``lookback`` weeks (their cells as separate strata).
``new_version``
    A new form version's accuracy this week is significantly below the
    established versions' of the same (doc_type, field).

The two comparisons are one-sided Fisher exact tests on effective counts:
each side enters as its Korn-Graubard effective sample size with
``(1 - p) n_eff`` errors, rounded to whole labels (dividing counts by the
design effect, as Rao & Scott 1984, J. Roy. Statist. Soc. A, do for
chi-squared tests). Exact, because errors are rare here: a pooled z test
calls one error in 100 against none in 400 significant (p = 0.02), Fisher
does not (p = 0.2).

Multiplicity (STATS.md section 11): every stratum and kind is tested each
week, so the week's p-values are held together to the Benjamini-Hochberg
procedure at level ``1 - confidence``: sorted, the ``i``-th smallest of ``m``
alerts when it is at most ``i / m * alpha``. Without it, 22 stable strata at
5% showed a false alert in one week of four; with it, a week where every
stratum is stable shows any alert with probability at most ``alpha``, and on
average at most a share ``alpha`` of the alerts shown are false
(:func:`false_alert_note` says so beside them).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from fieldtrust.sampling.estimates import audit_labels, estimate_labels
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import parse_week, shift_week
from scipy import stats


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


KINDS = ("below_target", "drop", "new_version")


def weekly_alerts(
    con: duckdb.DuckDBPyConnection,
    week: str | None = None,
    *,
    target: float = 0.95,
    confidence: float = 0.95,
    lookback: int = 4,
) -> list[Alert]:
    """Alerts for ISO ``week`` (default: the newest week with an audit sample).

    Parameters
    ----------
    con
        Store connection.
    week
        The week to check.
    target
        Accuracy a stratum should reach.
    confidence
        ``1 - alpha`` of each one-sided test.
    lookback
        Previous weeks pooled as the baseline of the ``drop`` test.

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
        raise ValueError(f"target {target} and confidence {confidence} must be in (0, 1)")
    if lookback < 1:
        raise ValueError(f"lookback must be at least 1 week, got {lookback}")
    week = week or _latest_sampled_week(con)
    if week is None:
        return []
    parse_week(week)
    labels = audit_labels(con, Scope(weeks=alert_weeks(week, lookback)))
    return alerts_from_labels(
        con, labels, week, target=target, confidence=confidence, lookback=lookback
    )


def alert_weeks(week: str, lookback: int) -> tuple[str, ...]:
    """The weeks an alert on ``week`` reads: the ``lookback`` before it, then itself."""
    return (*(shift_week(week, -k) for k in range(lookback, 0, -1)), week)


def alerts_from_labels(
    con: duckdb.DuckDBPyConnection,
    labels: pa.Table,
    week: str,
    *,
    target: float = 0.95,
    confidence: float = 0.95,
    lookback: int = 4,
) -> list[Alert]:
    """:func:`weekly_alerts` on labels already read by :func:`~.estimates.audit_labels`.

    ``labels`` must cover :func:`alert_weeks` of ``week``.
    """
    alpha = 1 - confidence
    previous = alert_weeks(week, lookback)[:-1]
    stratum = ("doc_type", "field")
    now = estimate_labels(con, labels, by=stratum, confidence=confidence, weeks=(week,))
    before = estimate_labels(con, labels, by=stratum, confidence=confidence, weeks=previous)
    # Every test of the week, alerting or not: the false discovery rate is
    # controlled over all of them.
    tests = _below_target(now, week, target, 1.0)
    tests += _drops(now, before, week, previous, 1.0)
    tests += _new_versions(con, labels, week, confidence, 1.0)
    q_values = benjamini_hochberg([a.p_value for a in tests])
    alerts = [dataclasses.replace(a, q_value=float(q)) for a, q in zip(tests, q_values, strict=True)
              if q <= alpha]
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(alerts, key=lambda a: (order[a.kind], a.p_value, a.doc_type, a.field))


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
    con: duckdb.DuckDBPyConnection, labels: pa.Table, week: str, *, lookback: int = 4
) -> int:
    """How many tests the alerts of ``week`` hold together (strata x kinds with labels).

    ``labels`` as for :func:`alerts_from_labels`.
    """
    stratum = ["doc_type", "field"]
    now = estimate_labels(con, labels, by=stratum, weeks=(week,))
    before = estimate_labels(con, labels, by=stratum, weeks=alert_weeks(week, lookback)[:-1])
    both = now.merge(before, on=stratum) if not now.empty and not before.empty else now[:0]
    versions = estimate_labels(con, labels, by=("doc_type", "field", "version_status",
                                                "form_version"), weeks=(week,))
    new = int((versions["version_status"] == "new").sum()) if not versions.empty else 0
    return len(now) + len(both) + new
