"""Certification: whether a stratum may be automated, computed from the store.

The one function every decision calls for its evidence
(:func:`fieldtrust.governance.acts.approve` and ``reject``). It certifies the
whole stratum, every form version, over the certification window (the last
``weeks`` ISO weeks of the store, a setting of the bar), whatever filters a
report or a dashboard page shows, at the bar :func:`fieldtrust.store.bar.resolve_bar`
resolves: the store's policy, made stricter where the caller's
:class:`~fieldtrust.store.bar.Criteria` (flags, environment, TOML) asks. A
looser ask is refused (:meth:`fieldtrust.store.bar.Bar.for_approval`). The
statistics are :mod:`fieldtrust.calibration.candidates`' (STATS.md sections 6
and 7).
"""

from __future__ import annotations

import duckdb
from fieldtrust.calibration.candidates import METHOD, REASONS, automation_candidates
from fieldtrust.calibration.segments import segment_checks
from fieldtrust.governance.evidence import Certification
from fieldtrust.store.bar import Criteria, Value, policy_bar, resolve_bar
from fieldtrust.store.scope import Scope, last_weeks

from fieldtrust.errors import Refused


def certify(
    con: duckdb.DuckDBPyConnection,
    doc_type: str,
    field: str,
    criteria: Criteria | None = None,
) -> Certification:
    """Certify the whole (doc_type, field) from the store, as a decision freezes it.

    At the store's policy bar, over its window (the store's last ``weeks``
    weeks), made stricter by ``criteria`` where it asks.

    Raises
    ------
    Refused
        ``criteria`` asks for something looser than the store's policy, or
        the store has no such stratum.
    """
    bar = resolve_bar(con, criteria).for_approval()
    policy = policy_bar(con)
    window = _window(con, bar.weeks)
    scope = Scope(weeks=window, doc_types=(doc_type,), fields=(field,))
    assessments = automation_candidates(con, scope, bar)
    match = next((a for a in assessments if (a.doc_type, a.field) == (doc_type, field)), None)
    if match is None:
        raise Refused(
            f"no extractions of doc_type {doc_type!r}, field {field!r} in the store;"
            " check the spelling (`fieldtrust info`)"
        )
    point = match.certified
    segments = () if match.threshold is None else segment_checks(con, scope, match.threshold, bar)
    return Certification(
        candidate=match.candidate,
        reasons=match.reasons,
        threshold=match.threshold,
        target=bar.target,
        confidence=bar.confidence,
        n_min=bar.n_min,
        stability_weeks=bar.stability_weeks,
        window=window,
        method=str(match.evidence.get("method", METHOD)),
        coverage=point.coverage if point else None,
        labels_above=point.labels_above if point else None,
        accuracy=point.accuracy if point else None,
        accuracy_low=point.accuracy_low if point else None,
        bound_exact_clopper_pearson=point.exact if point else None,
        n_population=match.n_population,
        n_labeled=match.n_labeled,
        weeks=match.weeks,
        audit_weeks=match.audit_weeks,
        weeks_checked=match.weeks_checked,
        form_versions=match.form_versions,
        covered_versions=match.covered_versions,
        segments=segments,
        policy=policy.as_dict(),
        stricter=_stricter(criteria, policy.bar.values()),
        held_to=bar.values(),
    )


def reason_text(certification: Certification) -> str:
    """Why a certification is not a candidate, in the words of calibration's reasons."""
    first = certification.reasons[0] if certification.reasons else ""
    return REASONS.get(first, first or "not certified")


def _stricter(criteria: Criteria | None, policy: dict[str, Value]) -> dict[str, Value]:
    """What the caller raised above the policy (an ask equal to the policy asks nothing)."""
    asked = criteria.asked() if criteria is not None else {}
    return {name: value for name, value in asked.items() if value != policy[name]}


def _window(con: duckdb.DuckDBPyConnection, weeks: int) -> tuple[str, ...]:
    # A cursor of its own: store.scope.latest_week leaves a fetchone() result open.
    cursor = con.cursor()
    try:
        return last_weeks(cursor, weeks)
    finally:
        cursor.close()
