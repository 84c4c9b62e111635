"""The whole calibration report: every stratum's table, thresholds and candidacy.

This is what ``fieldtrust calibrate`` prints and the dashboard draws. The
overall accuracy is never shown alone: it comes with the strata below target
(STATS.md section 1).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from fieldtrust.calibration.candidates import (
    CandidateAssessment,
    across_strata,
    assess,
    automation_candidates,
)
from fieldtrust.calibration.figures import interval_note
from fieldtrust.calibration.population import (
    Coverage,
    StratumData,
    empty_stratum,
    load_strata,
    strata_names,
)
from fieldtrust.calibration.survey import effective_size, korn_graubard_interval
from fieldtrust.calibration.table import StratumTable, stratum_bins, stratum_table
from fieldtrust.calibration.thresholds import ThresholdResult, select_thresholds
from fieldtrust.store.bar import Bar, resolve_bar
from fieldtrust.store.scope import Scope

from fieldtrust.errors import InputError


def _num(value: float | None) -> float | None:
    """NaN becomes None, so JSON shows null where a figure is not defined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return float(value)


@dataclass(frozen=True)
class StratumReport:
    """One (doc_type, field): table row, reliability bins, thresholds, candidacy."""

    table: StratumTable
    bins: pa.Table  # calibration.bins.reliability_bins
    thresholds: ThresholdResult
    assessment: CandidateAssessment
    coverage: Coverage | None = None
    labels_by_provenance: dict[str, int] | None = None

    @property
    def doc_type(self) -> str:
        return self.table.doc_type

    @property
    def field(self) -> str:
        return self.table.field

    @property
    def effective_labels(self) -> float | None:
        """The Korn-Graubard effective size of the accuracy (None without labels)."""
        t = self.table
        if not t.n_labeled or math.isnan(t.accuracy):
            return None
        return float(effective_size(t.accuracy, t.accuracy_variance, t.n_labeled))

    def to_dict(self, *, include_bins: bool = False) -> dict[str, Any]:
        """The stratum as the ``--json`` output shows it (null where undefined)."""
        t, th, a = self.table, self.thresholds, self.assessment
        point, cert = th.point, th.certified
        n_eff = self.effective_labels
        out: dict[str, Any] = {
            "doc_type": t.doc_type,
            "field": t.field,
            "n_population": t.n_population,
            "n_labeled": t.n_labeled,  # design-based labels only
            "labels_by_provenance": dict(self.labels_by_provenance or {}),
            "covered_weeks": list(self.coverage.covered_weeks) if self.coverage else [],
            "uncovered_weeks": list(self.coverage.uncovered_weeks) if self.coverage else [],
            "n_population_covered": self.coverage.n_population_covered if self.coverage else 0,
            "covers": self.coverage.text() if self.coverage else None,
            "accuracy": _num(t.accuracy),
            "accuracy_low": _num(t.accuracy_low),
            "accuracy_high": _num(t.accuracy_high),
            # What the labels weigh as under the design (Korn-Graubard), and why the
            # interval says nothing when it does not (calibration.figures).
            "n_eff": _num(n_eff),
            "interval_note": interval_note(t.accuracy_low, t.accuracy_high, t.n_labeled, n_eff),
            "mean_confidence": _num(t.mean_confidence),
            "ece": _num(t.ece),
            "ece_debiased": _num(t.ece_debiased),
            "brier": _num(t.brier),
            "point_threshold": point.threshold if point else None,
            "point_accuracy": _num(point.accuracy) if point else None,
            "point_accuracy_low": _num(point.accuracy_low) if point else None,
            "point_coverage": point.coverage if point else None,
            "certified_threshold": cert.threshold if cert else None,
            "certified_accuracy": _num(cert.accuracy) if cert else None,
            "certified_accuracy_low": _num(cert.accuracy_low) if cert else None,
            "coverage": cert.coverage if cert else None,
            "labels_above": cert.labels_above if cert else None,
            "labels_needed": a.labels_needed,
            "labels_needed_threshold": a.labels_needed_threshold,
            "candidate": a.candidate,
            "form_versions": list(a.covered_versions),
            "excluded_form_versions": list(a.excluded_versions),
            "reason": a.reason,
            "reason_text": a.reason_text,
            "reasons": list(a.reasons),
        }
        if include_bins:
            out["bins"] = [
                {k: (_num(v) if isinstance(v, float) else v) for k, v in row.items()}
                for row in self.bins.to_pylist()
            ]
        return out


@dataclass(frozen=True)
class OverallSummary:
    """All strata together, next to the ones below target."""

    n_strata: int
    n_population: int
    n_labeled: int
    accuracy: float  # strata with labels, each weighted by its extractions
    accuracy_low: float
    accuracy_high: float
    strata_below_target: tuple[dict[str, Any], ...]  # estimate below target, worst first
    n_significantly_below: int  # upper end of the interval below target
    n_candidates: int
    summary: str
    # Every label with a verdict in scope, design-based or not, and the non-random ones
    # (queue, ad hoc, undeclared imports): why n_labeled is smaller than "labels".
    n_labels_in_scope: int = 0
    n_non_random: int = 0

    def labels_text(self) -> str:
        """``4,367 design-based labels (of 4,994 in scope: 600 non-random, 27 waiting)``.

        Design-based labels are the ones every estimate uses; the others are
        counted so a reader sees why the figure is smaller than a count of
        every label.
        """
        text = f"{self.n_labeled:,} design-based labels"
        others = self.n_labels_in_scope - self.n_labeled
        if others <= 0:
            return text
        waiting = others - self.n_non_random
        parts = [f"{self.n_non_random:,} non-random (review queue, ad hoc, undeclared"
                 " imports)"] if self.n_non_random else []
        if waiting > 0:
            parts.append(f"{waiting:,} waiting behind an unlabelled item of their audit cell")
        return f"{text} (of {self.n_labels_in_scope:,} in scope: {'; '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_strata": self.n_strata,
            "n_population": self.n_population,
            "n_labeled": self.n_labeled,
            "accuracy": _num(self.accuracy),
            "accuracy_low": _num(self.accuracy_low),
            "accuracy_high": _num(self.accuracy_high),
            "n_below_target": len(self.strata_below_target),
            "strata_below_target": list(self.strata_below_target),
            "n_significantly_below": self.n_significantly_below,
            "n_candidates": self.n_candidates,
            "summary": self.summary,
            "n_labels_in_scope": self.n_labels_in_scope,
            "n_non_random": self.n_non_random,
        }


@dataclass(frozen=True)
class CalibrationReport:
    """Calibration of every stratum in a scope at one bar, worst accuracy first."""

    bar: Bar
    scope: Scope
    overall: OverallSummary
    strata: tuple[StratumReport, ...]

    @property
    def target(self) -> float:
        return self.bar.target

    @property
    def confidence(self) -> float:
        return self.bar.confidence

    def stratum(self, doc_type: str, field: str) -> StratumReport:
        """The report of one stratum; ``InputError`` if it is not in the store."""
        for s in self.strata:
            if (s.doc_type, s.field) == (doc_type, field):
                return s
        raise InputError(
            f"no stratum doc_type={doc_type!r}, field={field!r} in this report;"
            f" known: {', '.join(f'{s.doc_type}/{s.field}' for s in self.strata) or 'none'}"
        )

    @property
    def across_strata(self) -> dict[str, Any]:
        """What is promised across the strata shown (:func:`~fieldtrust.calibration.candidates.
        across_strata`)."""
        return across_strata([s.assessment for s in self.strata], self.bar)

    def to_dict(self, *, include_bins: bool = False) -> dict[str, Any]:
        """``{"target", "confidence", "bar", "approvable", "not_approvable_because",
        "across_strata", "overall", "strata"}``: the ``--json`` shape."""
        return {
            "target": self.target,
            "confidence": self.confidence,
            "bar": self.bar.values(),
            "approvable": self.bar.approvable,
            "not_approvable_because": self.bar.loosened_text() or None,
            "across_strata": self.across_strata,
            "overall": self.overall.to_dict(),
            "strata": [s.to_dict(include_bins=include_bins) for s in self.strata],
        }


def _overall(strata: list[StratumReport], bar: Bar) -> OverallSummary:
    target, confidence = bar.target, bar.confidence
    tables = [s.table for s in strata]
    labelled = [t for t in tables if t.n_labeled > 0]
    n_pop = sum(t.n_population for t in tables)
    if labelled:
        sizes = np.array([t.n_population for t in labelled], dtype=float)
        shares = sizes / sizes.sum()
        accuracy = float(np.sum(shares * [t.accuracy for t in labelled]))
        variance = float(np.sum(shares**2 * [t.accuracy_variance for t in labelled]))
        n_lab = sum(t.n_labeled for t in labelled)
        low, high = korn_graubard_interval(accuracy, variance, n_lab, confidence=confidence)
    else:
        accuracy = low = high = float("nan")
    below = sorted(
        (t for t in labelled if t.accuracy < target), key=lambda t: t.accuracy
    )
    below_rows = tuple(
        {"doc_type": t.doc_type, "field": t.field, "accuracy": _num(t.accuracy),
         "accuracy_high": _num(t.accuracy_high), "n_labeled": t.n_labeled}
        for t in below
    )
    n_candidates = sum(s.assessment.candidate for s in strata)
    if labelled:
        worst = ", ".join(f"{t.doc_type}/{t.field} {t.accuracy:.1%}" for t in below[:3])
        summary = (
            f"{accuracy:.1%} overall; {len(below)} of {len(labelled)} labelled strata below"
            f" {target:.0%}" + (f" (worst: {worst})" if below else "")
            + f"; {n_candidates} automation candidate{'s' if n_candidates != 1 else ''}"
            + ("" if bar.approvable else f" (at these settings, not approvable:"
               f" {bar.loosened_text()})")
        )
    else:
        summary = "no labels yet: label an audit sample to see accuracy"
    return OverallSummary(
        n_strata=len(tables),
        n_population=n_pop,
        n_labeled=sum(t.n_labeled for t in tables),
        accuracy=accuracy,
        accuracy_low=float(low),
        accuracy_high=float(high),
        strata_below_target=below_rows,
        n_significantly_below=sum(t.accuracy_high < target for t in labelled),
        n_candidates=n_candidates,
        summary=summary,
        n_labels_in_scope=sum(sum((s.labels_by_provenance or {}).values()) for s in strata),
        n_non_random=sum((s.labels_by_provenance or {}).get("non_random", 0) for s in strata),
    )


def _worst_first(report: StratumReport) -> tuple[bool, float, str, str]:
    acc = report.table.accuracy
    return (math.isnan(acc), acc if not math.isnan(acc) else 0.0, report.doc_type, report.field)


def stratum_report(
    data: StratumData,
    bar: Bar,
    *,
    n_bins: int,
    strategy: str,
    scope: Scope = Scope(),
    assessment: CandidateAssessment | None = None,
) -> StratumReport:
    """Table, bins, thresholds and candidacy of one stratum at ``bar``.

    ``assessment``: the stratum's candidacy when already decided (the anytime
    certificate decides every stratum of the store at once); else the fixed
    certificate's, computed here.
    """
    if assessment is None or assessment.thresholds is None:
        thresholds = select_thresholds(data.design, data.labels, bar)
        assessment = assess(data, thresholds, bar, scope=scope)
    else:
        thresholds = assessment.thresholds
    confidence = bar.confidence
    return StratumReport(
        table=stratum_table(data, confidence=confidence, n_bins=n_bins, strategy=strategy),
        bins=stratum_bins(data, n_bins=n_bins, strategy=strategy, confidence=confidence),
        thresholds=thresholds,
        assessment=assessment,
        coverage=data.coverage,
        labels_by_provenance=dict(data.labels_by_provenance),
    )


def calibration_report(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    bar: Bar | None = None,
    *,
    n_bins: int = 10,
    strategy: str = "quantile",
) -> CalibrationReport:
    """Calibration tables, thresholds and automation candidacy for every stratum.

    Parameters
    ----------
    scope
        The weeks (and document types, form versions, fields) to look at.
    bar
        Every setting the thresholds and candidacy use (its ``confidence`` is
        also the level of every interval); None is the store's policy
        (:func:`fieldtrust.store.bar.resolve_bar`). A bar that is not
        approvable makes no candidate: a stratum that passes it is reported
        ``not_at_policy``.
    n_bins, strategy
        Reliability bins and ECE (``"quantile"`` or ``"uniform"``).

    Returns
    -------
    CalibrationReport
        Strata worst accuracy first (strata without labels last), with the
        overall figure beside the strata below target. ``.to_dict()`` is the
        ``fieldtrust calibrate --json`` output.

    References
    ----------
    STATS.md sections 1-7.
    """
    bar = resolve_bar(con) if bar is None else bar
    loaded = {(s.doc_type, s.field): s for s in load_strata(con, scope)}
    names = sorted(set(strata_names(con, scope)) | set(loaded)) if scope.weeks else sorted(loaded)
    # The certificate reads its horizon's strata; on a store younger than the horizon
    # they are the ones just read (a second read was a third of a warm report).
    decided = {(a.doc_type, a.field): a for a in automation_candidates(
        con, scope, bar, loaded=list(loaded.values()))} if bar.certificate == "anytime" else {}
    reports = [
        stratum_report(loaded.get(name) or empty_stratum(*name), bar, n_bins=n_bins,
                       strategy=strategy, scope=scope, assessment=decided.get(name))
        for name in names
    ]
    reports.sort(key=_worst_first)
    return CalibrationReport(
        bar=bar,
        scope=scope,
        overall=_overall(reports, bar),
        strata=tuple(reports),
    )
