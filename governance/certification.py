"""Certification: whether a stratum may be automated, computed from the store.

The one function every decision calls for its evidence
(:func:`fieldtrust.governance.acts.approve` and ``reject``). It certifies the
whole stratum, every form version, over the certification window (the last
``Criteria.weeks`` ISO weeks of the store), whatever filters a report or a
dashboard page shows. The statistics are :mod:`fieldtrust.calibration.candidates`'
(STATS.md sections 6 and 7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import duckdb
from fieldtrust.calibration.candidates import METHOD, REASONS, automation_candidates
from fieldtrust.governance.errors import DecisionError
from fieldtrust.governance.evidence import Certification
from fieldtrust.store.scope import Scope, last_weeks


class _CriteriaSource(Protocol):
    @property
    def target(self) -> float: ...
    @property
    def confidence(self) -> float: ...
    @property
    def n_min(self) -> int: ...
    @property
    def stability_weeks(self) -> int: ...
    @property
    def weeks(self) -> int | None: ...


@dataclass(frozen=True)
class Criteria:
    """What certification demands; the defaults are the settings' (docs/settings.md)."""

    target: float = 0.95  # accuracy an automated stratum must hold above its threshold
    confidence: float = 0.95  # 1 - delta of the one-sided bounds
    n_min: int = 100  # labels above a threshold before it is tested
    stability_weeks: int = 4  # recent weeks with labels that must each hold the target
    weeks: int | None = None  # certification window: the store's last N weeks; None: all
    version_share: float = 0.05  # share above the threshold that makes a form version material
    min_week_labels: int = 50  # design-based labels above the threshold each stable week needs
    prior_error: float | None = 0.03  # where the walk starts (STATS.md section 6); None: n_min

    @classmethod
    def of(cls, settings: _CriteriaSource) -> Criteria:
        """The criteria of a :class:`fieldtrust.settings.Settings` (or anything alike)."""
        return cls(
            target=settings.target, confidence=settings.confidence, n_min=settings.n_min,
            stability_weeks=settings.stability_weeks, weeks=settings.weeks,
        )


def certify(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, criteria: Criteria = Criteria()
) -> Certification:
    """Certify (doc_type, field) from the store, as a decision freezes it.

    Raises
    ------
    DecisionError
        The store has no such stratum.
    """
    window = _window(con, criteria.weeks)
    scope = Scope(weeks=window, doc_types=(doc_type,), fields=(field,))
    assessments = automation_candidates(
        con, scope, target=criteria.target, confidence=criteria.confidence,
        n_min=criteria.n_min, stability_weeks=criteria.stability_weeks,
        version_share=criteria.version_share, min_week_labels=criteria.min_week_labels,
        prior_error=criteria.prior_error,
    )
    match = next((a for a in assessments if (a.doc_type, a.field) == (doc_type, field)), None)
    if match is None:
        raise DecisionError(
            f"no extractions of doc_type {doc_type!r}, field {field!r} in the store;"
            " check the spelling (`fieldtrust info`)"
        )
    point = match.certified
    return Certification(
        candidate=match.candidate,
        reasons=match.reasons,
        threshold=match.threshold,
        target=criteria.target,
        confidence=criteria.confidence,
        n_min=criteria.n_min,
        stability_weeks=criteria.stability_weeks,
        window=window,
        method=METHOD,
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
    )


def reason_text(certification: Certification) -> str:
    """Why a certification is not a candidate, in the words of calibration's reasons."""
    first = certification.reasons[0] if certification.reasons else ""
    return REASONS.get(first, first or "not certified")


def _window(con: duckdb.DuckDBPyConnection, weeks: int | None) -> tuple[str, ...]:
    if weeks is None:
        return ()
    # A cursor of its own: store.scope.latest_week leaves a fetchone() result open.
    cursor = con.cursor()
    try:
        return last_weeks(cursor, weeks)
    finally:
        cursor.close()
