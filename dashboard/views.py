"""Library results reshaped for display: frames with readable columns, short texts.

Nothing here computes a statistic. Functions pick fields from the library's
result objects, rename them for people, and format numbers with their n and
interval, so the pages stay a few lines each.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pyarrow as pa
from fieldtrust.calibration.figures import interval_note, interval_text, share_text
from fieldtrust.calibration.survey import effective_size
from fieldtrust.dashboard import layout
from fieldtrust.store.bar import Bar


def frame_of(rows: Iterable[Any] | pa.Table | pd.DataFrame | None) -> pd.DataFrame:
    """A frame of dataclass rows, an Arrow table or a frame (small results only)."""
    if rows is None:
        return pd.DataFrame()
    if isinstance(rows, pd.DataFrame):
        return rows
    if isinstance(rows, pa.Table):
        return rows.to_pandas()
    records = [
        dataclasses.asdict(r) if dataclasses.is_dataclass(r) and not isinstance(r, type) else r
        for r in rows
    ]
    return pd.DataFrame.from_records(records)


def history_frame(history: Sequence[Any]) -> pd.DataFrame:
    """Decision history, newest first, with who, what, when and the evidence id."""
    frame = frame_of(history)
    if frame.empty:
        return frame
    frame = frame.sort_values("decided_at", ascending=False)
    return frame[["decided_at", "doc_type", "field", "action", "threshold", "decided_by",
                  "role", "comment", "evidence_id", "decision_id"]]


def policy_frame(policy: Sequence[Any]) -> pd.DataFrame:
    """Current policy: one row per decided stratum, active or not."""
    rows = [
        {
            "doc_type": entry.doc_type, "field": entry.field, "status": entry.status,
            "threshold": entry.threshold, "decided_by": entry.decision.decided_by,
            "decided_at": entry.decision.decided_at, "last_action": entry.decision.action,
            "evidence_id": entry.decision.evidence_id,
        }
        for entry in policy
    ]
    return pd.DataFrame(rows)


def monitoring_frame(monitors: Sequence[Any]) -> pd.DataFrame:
    """One row per approved segment: its chart's state against its frozen threshold."""
    rows = [
        {
            "doc_type": m.doc_type, "field": m.field, "form_version": m.form_version,
            "extractor_version": m.extractor_version, "status": m.status,
            "statistic": round(m.statistic, 2),
            "alarm threshold h": round(m.plan.threshold, 2) if m.plan else None,
            "weeks monitored": m.weeks_monitored, "since": m.since_week,
            "labels a week (plan)": m.plan.labels_per_week if m.plan else None,
            "4-point drop caught within 4 weeks": m.plan.detection_rate if m.plan else None,
            "weeks between false alarms": m.plan.arl0 if m.plan else None,
            "alarm week": m.state.alarm_week if m.state else None,
        }
        for m in monitors
    ]
    return pd.DataFrame(rows)


def suspension_text(monitor: Any) -> str:
    """One warning line for a segment its monitoring chart suspended."""
    return (
        f"**{layout.plain(monitor.doc_type)} · {layout.plain(monitor.field)} ·"
        f" {layout.plain(monitor.form_version)} x {layout.plain(monitor.extractor_version)}**"
        f" is suspended (sent to people) until a manager revokes or resumes it:"
        f" {layout.plain(monitor.reason or '')}"
    )


def revocation_text(recommendation: Any) -> str:
    """One warning line for an approved stratum failing its later audits."""
    return (
        f"**{layout.plain(recommendation.doc_type)} · {layout.plain(recommendation.field)}**"
        f" (approved at {recommendation.threshold:.3f} by"
        f" {layout.plain(recommendation.approved_by)}): "
        f"{layout.plain(recommendation.reason)}"
    )


@dataclass(frozen=True)
class Stratum:
    """A stratum a manager can decide on, with what the decision would rest on."""

    doc_type: str
    field: str
    threshold: float | None  # as shown; approving checks it against a fresh certification
    candidate: bool
    active: bool
    summary: str

    @property
    def key(self) -> str:
        return f"{self.doc_type}|{self.field}"

    @property
    def label(self) -> str:
        tags = [t for t, on in (("candidate", self.candidate), ("automated", self.active)) if on]
        return f"{self.doc_type} · {self.field}" + (f"  ({', '.join(tags)})" if tags else "")


def accuracy_text(acc: Any, low: Any, high: Any, n: Any, variance: Any = None) -> str:
    """``97.1% [96.5%, 97.6%] (n = 1,204)``, or a note instead of an interval that says
    nothing (:func:`fieldtrust.calibration.figures.share_text`; ``variance`` gives its
    effective n)."""
    return share_text(acc, low, high, n, _effective_n(acc, variance, n))


def _effective_n(estimate: Any, variance: Any, n: Any) -> float | None:
    """The Korn-Graubard effective size of an estimate (None without its variance)."""
    if variance is None or not n or estimate is None or estimate != estimate:
        return None
    return float(effective_size(estimate, variance, n))


def range_text(low: float, high: float, n: int) -> str:
    """``[0.071, 0.112] (n = 407)``: a metric's interval and label count; "no labels" without."""
    if n == 0 or low != low:  # NaN: nothing to resample
        return "no labels"
    return f"[{low:.3f}, {high:.3f}] (n = {n:,})"


def plan_summary(preview: Any, design: Any) -> str:
    """One line on a previewed design (sampling.planner.DesignPreview): cells, items, budget."""
    cells = preview.cells
    if cells.num_rows == 0:
        return "No extractions in this week."
    boosted = sum(cells.column("boosted").to_pylist())
    budget = f"label budget {design.budget:,}" if design.budget else "no label budget"
    if preview.over_budget:
        budget += " (**the minimums alone exceed it**)"
    return (
        f"**{cells.num_rows:,} cells**, **{preview.n_sample:,} items** to label from"
        f" {preview.n_population:,} extractions; {boosted} cells of new form"
        f" versions boosted x{design.boost:g}; {budget}; minimum {design.minimum} per cell."
    )


def certify_caption(plan: Any) -> str:
    """What the planner's table covers (sampling.certify_plan.CertificatePlan), in one line."""
    strata = plan.strata
    soon = [w for w in strata.column("certify_week").to_pylist() if w is not None]
    return (
        f"{strata.num_rows} strata, n = {sum(strata.column('n_population').to_pylist()):,}"
        f" extractions: {plan.population}. {len(soon)} can certify within the window;"
        " certify_week 1 is the planned week. A planning figure at 80% power, from past"
        " labels' error rates; the certificate itself is decided on the labels."
    )


def progress_by_stratum(cells: pd.DataFrame) -> pd.DataFrame:
    """Drawn and labelled items per (doc_type, field): the progress chart's bars."""
    if cells.empty:
        return pd.DataFrame(columns=["group", "n_sample", "n_labelled"])
    grouped = cells.groupby(["doc_type", "field"], as_index=False)[["n_sample", "n_labelled"]].sum()
    grouped["group"] = grouped["doc_type"] + " · " + grouped["field"]
    return grouped


def trend_series(trend: pd.DataFrame) -> pd.DataFrame:
    """Weekly estimates in the trend chart's columns (week, series, accuracy, low, high, n)."""
    return pd.DataFrame({
        "week": trend["week"],
        "series": trend["doc_type"] + " · " + trend["field"],
        "accuracy": trend["estimate"],
        "low": trend["lower"],
        "high": trend["upper"],
        "n": trend["n"],
    })


def worst_series(series: pd.DataFrame, *, count: int) -> list[str]:
    """The ``count`` series with the lowest estimate in their latest week (chart default)."""
    latest = series.sort_values("week").groupby("series").tail(1)
    return [str(name) for name in latest.sort_values("accuracy")["series"].head(count)]


def alerts_frame(alerts: Sequence[Any]) -> pd.DataFrame:
    """Alerts as a table (interval split into two columns)."""
    rows = []
    for alert in alerts:
        record = dataclasses.asdict(alert)
        low, high = record.pop("interval")
        rows.append({**record, "lower": low, "upper": high})
    return pd.DataFrame(rows)


def adjudication_frame(queue: Sequence[Any]) -> pd.DataFrame:
    """Disagreements waiting for a QA lead: the item and both verdicts."""
    frame = frame_of(queue)
    keep = ["extraction_id", "doc_type", "field", "form_version", "value",
            "primary_reviewer", "primary_verdict", "primary_corrected_value",
            "second_reviewer", "second_verdict", "second_corrected_value", "sample_id"]
    return frame[[c for c in keep if c in frame.columns]]


def reviewer_rates_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """Reviewer rates (labels.reviewer_rates) as shown: each rate beside its n and interval."""
    return pd.DataFrame([{
        "reviewer": r["reviewer"],
        "seeds judged (n)": r["seeds_judged"], "misses": r["misses"],
        "miss rate": r["miss_rate"], "miss 95% low": r["miss_low"],
        "miss 95% high": r["miss_high"],
        "settled correct (n)": r["settled_correct"], "false flags": r["false_flags"],
        "false-flag rate": r["false_flag_rate"], "false-flag 95% low": r["false_flag_low"],
        "false-flag 95% high": r["false_flag_high"],
    } for r in rows])


def candidates_frame(assessments: Sequence[Any]) -> pd.DataFrame:
    """Automation candidates with the evidence a manager approves on (human headers)."""
    rows = []
    for a in assessments:
        if not a.candidate:
            continue
        e = a.evidence
        rows.append({
            "doc type": a.doc_type, "field": a.field, "certified threshold": a.threshold,
            "coverage above it": e.get("coverage"), "labels above it": e.get("labels_above"),
            "accuracy above it": e.get("accuracy"),
            "lower bound of accuracy above it": e.get("accuracy_low"),
            "recent weeks checked": len(a.weeks_checked),
            "form versions covered": ", ".join(a.covered_versions),
            "covers": e.get("coverage_text") or "",
            "design-based labels": e.get("n_labeled"), "extractions": e.get("n_population"),
        })
    return pd.DataFrame(rows)


def non_candidates_frame(report: Any) -> pd.DataFrame:
    """Strata that are not candidates: why (every failing condition) and labels needed."""
    rows = [
        {
            "doc type": row["doc_type"], "field": row["field"], "why not": row["reason_text"],
            "failing conditions": ", ".join(row["reasons"]), "accuracy": row["accuracy"],
            "design-based labels": row["n_labeled"],
            "certified threshold": row["certified_threshold"],
            "labels needed": row["labels_needed"],
            "labels needed above": row["labels_needed_threshold"],
        }
        for row in (s.to_dict() for s in report.strata)
        if not row["candidate"]
    ]
    return pd.DataFrame(rows)


def decision_strata(assessments: Sequence[Any], policy: Sequence[Any]) -> list[Stratum]:
    """Every assessed stratum as something a manager can decide on, candidates first."""
    active = {(p.doc_type, p.field): p.threshold for p in policy if p.status == "active"}
    strata = []
    for a in assessments:
        e = a.evidence
        if a.candidate:
            summary = (
                f"Certified threshold **{a.threshold:.3f}**: accuracy above it"
                f" {layout.pct(e.get('accuracy'))}, lower bound {layout.pct(e.get('accuracy_low'))}"
                f" (one-sided {e.get('confidence', 0.95):.0%}; n = {e.get('labels_above', 0):,}"
                " labels above), coverage"
                f" {layout.pct(e.get('coverage'))} of {e.get('n_population', 0):,} extractions;"
                f" {len(a.weeks_checked)} recent weeks and {len(a.form_versions)} form versions"
                " checked."
            )
        else:
            summary = f"Not a candidate: {layout.plain(a.reason_text or a.reason)}."
        key = (a.doc_type, a.field)
        if key in active:
            summary += f" Automated now above **{active[key]:.3f}**."
        strata.append(Stratum(
            doc_type=a.doc_type, field=a.field, threshold=a.threshold,
            candidate=bool(a.candidate), active=key in active, summary=summary,
        ))
    return strata


def report_args(scope: Any, bar: Bar, *, n_bins: int = 10,
                strategy: str = "quantile") -> tuple[Any, ...]:
    """Arguments of the cached ``calibration_report`` read; equal on every page, so shared."""
    return (scope, bar, n_bins, strategy)


def not_approvable_text(bar: Bar) -> str | None:
    """Why nothing on a page is approvable at these settings, or None when it may be."""
    if bar.approvable:
        return None
    return (f"At these settings, not approvable: {layout.plain(bar.loosened_text())}."
            " Candidates are judged at the store's policy (`fieldtrust policy settings`).")


def strata_frame(report: Any) -> pd.DataFrame:
    """One row per stratum, the calibration report's ``--json`` columns (what charts read)."""
    return pd.DataFrame([s.to_dict() for s in report.strata])


def strata_table(report: Any) -> pd.DataFrame:
    """One row per stratum for people: human headers, each accuracy with its interval or
    the note that replaces it, the labels split by how they were chosen, what it covers."""
    rows = []
    for stratum in report.strata:
        row, t = stratum.to_dict(), stratum.table
        kinds = row["labels_by_provenance"]
        rows.append({
            "doc type": row["doc_type"], "field": row["field"],
            "extractions": row["n_population"], "design-based labels": row["n_labeled"],
            "accuracy": row["accuracy"],
            "95% interval": row["interval_note"]
            or interval_text(t.accuracy_low, t.accuracy_high) or "",
            "mean stated confidence": row["mean_confidence"], "ECE": row["ece"],
            "Brier score": row["brier"], "point threshold": row["point_threshold"],
            "certified threshold": row["certified_threshold"],
            "lower bound above certified": row["certified_accuracy_low"],
            "coverage above certified": row["coverage"], "labels needed": row["labels_needed"],
            "candidate": "yes" if row["candidate"] else row["reason_text"],
            "covers": row["covers"] or "",
            "audit labels": kinds.get("audit", 0),
            "declared random-sample labels": kinds.get("random_import", 0),
            "non-random labels (not in estimates)": kinds.get("non_random", 0),
        })
    return pd.DataFrame(rows)


def headline(report: Any) -> str:
    """``97.1% [96.5%, 97.6%] (n = 1,204) overall, ...; 3 strata below 95%``."""
    overall = report.overall
    below = len(overall.strata_below_target)
    noun = "stratum" if below == 1 else "strata"
    figure = share_text(overall.accuracy, overall.accuracy_low, overall.accuracy_high,
                        overall.n_labeled)
    return (
        f"{figure} overall, over {overall.n_population:,} extractions;"
        f" **{below} {noun} below {report.target:.0%}**"
    )


def labels_caption(report: Any, recorded: int) -> str:
    """Why the overview's n differs from the sidebar's count of labels."""
    return (
        f"n counts {layout.plain(report.overall.labels_text())}: one label per item (an"
        " adjudication stands for the two reviews it settles), from audit samples and files"
        " declared a random sample, in the weeks chosen. The sidebar's"
        f" {recorded:,} labels are every label recorded: second reviews, adjudications,"
        " corrections, unclear verdicts and every week included."
    )


def below_target_frame(report: Any) -> pd.DataFrame:
    """The strata whose estimate is below target, worst first (human headers)."""
    return pd.DataFrame([
        {"doc type": row["doc_type"], "field": row["field"], "accuracy": row["accuracy"],
         "upper end of 95% interval": row["accuracy_high"],
         "design-based labels": row["n_labeled"]}
        for row in report.overall.strata_below_target
    ])


def bins_table(bins: pa.Table) -> pd.DataFrame:
    """Reliability bins for people: edges, labels, stated confidence, accuracy with interval."""
    return pd.DataFrame([
        {"from confidence": b["lower"], "to": b["upper"], "labels": b["n"],
         "mean stated confidence": b["mean_confidence"], "accuracy": b["accuracy"],
         "95% interval": interval_note(b["accuracy_low"], b["accuracy_high"], b["n"])
         or interval_text(b["accuracy_low"], b["accuracy_high"]) or "",
         "under 30 labels": b["small"]}
        for b in bins.to_pylist()
    ])


def curve_table(curve: pd.DataFrame) -> pd.DataFrame:
    """The threshold table for people: what holds above each threshold, and on how many."""
    if curve.empty:
        return curve
    return pd.DataFrame({
        "threshold": curve["threshold"], "coverage above it": curve["coverage"],
        "extractions above it": curve["n_population_above"],
        "labels above it": curve["labels_above"], "accuracy above it": curve["accuracy"],
        "lower bound of accuracy above it": curve["accuracy_low"],
        "tested": curve["tested"], "certified": curve["certified"], "point": curve["point"],
    })


def estimates_table(trend: pd.DataFrame) -> pd.DataFrame:
    """Weekly estimates for people: each week's accuracy with n and its interval or note."""
    if trend.empty:
        return trend
    rows = []
    for r in trend.to_dict(orient="records"):
        note = interval_note(r["lower"], r["upper"], r["n"], r["n_eff"])
        rows.append({
            "week": r["week"], "doc type": r["doc_type"], "field": r["field"],
            "accuracy": r["estimate"],
            "95% interval": note or interval_text(r["lower"], r["upper"]) or "",
            "labels": r["n"], "effective labels": r["n_eff"],
            "extractions covered": r["population"], "audit cells": r["strata"],
            "unweighted share correct": r["unweighted"],
        })
    return pd.DataFrame(rows)


def bins_frame(bins: pa.Table) -> pd.DataFrame:
    """Reliability bins in the chart's columns (confidence, accuracy, low, high, n)."""
    frame = bins.to_pandas()
    shown = frame[frame["n"] > 0]
    return pd.DataFrame({
        "confidence": shown["mean_confidence"], "accuracy": shown["accuracy"],
        "low": shown["accuracy_low"], "high": shown["accuracy_high"], "n": shown["n"],
    })


def histogram_frame(hist: pa.Table | pd.DataFrame) -> pd.DataFrame:
    """Histogram counts with their bin edges on [0, 1] (calibration.histogram's table)."""
    frame = frame_of(hist)
    if frame.empty:
        return pd.DataFrame(columns=["bin_start", "bin_end", "count"])
    return pd.DataFrame({
        "bin_start": frame["lower"], "bin_end": frame["upper"], "count": frame["count"],
    })


def map_frame(stored: Any) -> pd.DataFrame | None:
    """The current recalibration map's knots (x, y), or None without a map."""
    if stored is None:
        return None
    return pd.DataFrame({"x": list(stored.map.x), "y": list(stored.map.y)})


def threshold_text(stratum: Any) -> str:
    """What the thresholds of a stratum say, in one or two sentences."""
    th = stratum.thresholds
    parts = []
    if th.point is not None:
        p = th.point
        parts.append(f"Point threshold **{p.threshold:.3f}** (estimate, no guarantee):"
                     f" accuracy above {layout.pct(p.accuracy)} on n = {p.labels_above:,}"
                     f" labels above, coverage {layout.pct(p.coverage)} of"
                     f" {stratum.table.n_population:,} extractions"
                     f" ({p.n_population_above:,} above).")
    if th.certified is not None:
        c = th.certified
        parts.append(f"Certified threshold **{c.threshold:.3f}**: accuracy above"
                     f" {layout.pct(c.accuracy)}, lower bound {layout.pct(c.accuracy_low)}"
                     f" (n = {c.labels_above:,} labels above), coverage {layout.pct(c.coverage)}.")
    elif th.labels_needed is not None:
        at = th.labels_needed_threshold
        where = f" above {at:.3f}" if at is not None else ""
        parts.append(f"Nothing certifies yet: about **{th.labels_needed:,} more labels**{where}"
                     " would certify the target at the current error rate.")
    else:
        parts.append("Nothing certifies, and more labels would not help at the current error"
                     " rate.")
    return " ".join(parts)


def assessments(report: Any) -> list[Any]:
    """Every stratum's candidacy assessment, candidates first (as automation_candidates)."""
    found = [s.assessment for s in report.strata]
    return sorted(found, key=lambda a: (not a.candidate, a.doc_type, a.field))
