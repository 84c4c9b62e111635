"""What a design can certify, and when: the planner's answer per stratum (STATS.md 16-17).

For each (doc_type, field) of a week, under a sampling design: which band
edge is the likely threshold, how many labels a week the design puts above
it, the first week a certificate becomes possible if errors keep their
rate, and, where none is possible inside the certification window, why. A
goal ("invoice/total within 4 weeks") sizes the design the other way round:
the weekly labels above the threshold, and the share of the stratum labelled.

A planning figure, not a certificate: it assumes every coming week looks
like the planned one (its cells, sizes and the bands' error rates, from
earlier labels shrunk towards the policy's ``prior_error``) and asks the
expected evidence of :func:`fieldtrust.calibration.certificate.labels_needed`
to clear the bar at 80% power. It leaves out the allowances for reviewer
misses and week-to-week variation, which only the labels can set, so a real
certificate comes no sooner than planned. Nothing here writes to the store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from fieldtrust.calibration.bets import growth_bets
from fieldtrust.calibration.betting import CellLabels
from fieldtrust.calibration.certificate import Allowances, planned_evidence
from fieldtrust.sampling.cells import band_error_rates, plan_frame
from fieldtrust.sampling.design import Design
from fieldtrust.store.bar import Bar
from fieldtrust.store.weeks import Week

from fieldtrust.errors import InputError

#: Power the planner asks of a week's expected evidence (issue 24: "80% power").
PLAN_POWER = 0.8

PLAN_COLUMNS = (
    "doc_type", "field", "n_population", "threshold", "n_above", "error_rate",
    "labels_per_week", "share_labelled", "labels_needed", "certify_week", "reason",
)


@dataclass(frozen=True)
class Goal:
    """"Certify ``doc_type/field`` within ``weeks`` weeks": what a design is sized for."""

    doc_type: str
    field: str
    weeks: int

    @classmethod
    def parse(cls, text: str) -> Goal:
        """``"invoice/total within 4 weeks"`` (``week`` or ``weeks``; spaces free)."""
        match = re.fullmatch(r"\s*([^/]+?)\s*/\s*(.+?)\s+within\s+(\d+)\s+weeks?\s*", text)
        if match is None:
            raise InputError(f"goal {text!r}: write it as DOC_TYPE/FIELD within N weeks,"
                             " e.g. \"invoice/total within 4 weeks\"")
        weeks = int(match.group(3))
        if weeks < 1:
            raise InputError(f"goal {text!r}: the weeks must be at least 1")
        return cls(match.group(1), match.group(2), weeks)


@dataclass(frozen=True)
class Sizing:
    """The weekly labels above the threshold that meet a :class:`Goal`, if any do."""

    goal: Goal
    threshold: float | None
    n_above: int  # the stratum's items a week above the threshold
    labels_per_week: int | None  # above the threshold; None: no size meets the goal
    share_labelled: float | None  # of the items above the threshold
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        goal = {"doc_type": self.goal.doc_type, "field": self.goal.field,
                "weeks": self.goal.weeks}
        rest = {k: getattr(self, k) for k in ("threshold", "n_above", "labels_per_week",
                                               "share_labelled", "reason")}
        return {"goal": goal, **rest}


@dataclass(frozen=True)
class CertificatePlan:
    """Per stratum of ``week``: what ``design`` yields above its likely threshold, and when.

    ``strata`` has one row per (doc_type, field), columns :data:`PLAN_COLUMNS`:
    the stratum's items this week (n_population), the likely threshold (the
    band edge where a certificate comes soonest; null when none can),
    n_above and error_rate (items a week above it, their expected error
    rate), labels_per_week (the design's sample above it) and
    share_labelled, labels_needed (over the weeks to the certificate),
    certify_week (1 = the week planned), and reason (why none is possible
    within the ``window`` weeks).
    """

    week: Week
    window: int
    target: float
    confidence: float
    strata: pa.Table
    sizing: Sizing | None = None

    @property
    def population(self) -> str:
        return (f"extractions of {self.week} per (doc_type, field), each coming week assumed"
                f" alike; certificates at accuracy >= {self.target:g} with confidence"
                f" {self.confidence:g} over a {self.window}-week window")

    def to_dict(self) -> dict[str, Any]:
        """What ``fieldtrust plan --certify --json`` prints under ``"certify"``."""
        out: dict[str, Any] = {
            "week": str(self.week), "window": self.window, "target": self.target,
            "confidence": self.confidence, "population": self.population,
            "strata": self.strata.to_pylist(),
        }
        if self.sizing is not None:
            out["sizing"] = self.sizing.to_dict()
        return out


@dataclass(frozen=True)
class _Stratum:
    """One stratum's cells of the planned week: band edge, N_h, n_h, p_h.

    ``split`` is how more labels would be spread over the cells: ``N_h``
    (boosted for new versions) under proportional allocation, what raising
    the base rate does; the design's own ``n_h`` under Neyman allocation.
    """

    edge: np.ndarray[Any, np.dtype[np.float64]]
    population: np.ndarray[Any, np.dtype[np.int64]]
    sample: np.ndarray[Any, np.dtype[np.int64]]
    error: np.ndarray[Any, np.dtype[np.float64]]
    split: np.ndarray[Any, np.dtype[np.float64]]


@dataclass(frozen=True)
class _When:
    """The soonest certificate at one threshold: its week, labels, or why none."""

    week: int | None
    labels: int | None
    reason: str | None
    more_labels_would_do: bool = False


def plan_certificates(
    con: duckdb.DuckDBPyConnection, week: Week | str, design: Design, bar: Bar, *,
    goal: Goal | None = None,
) -> CertificatePlan:
    """Per stratum, the labels ``design`` yields above the likely threshold and when it certifies.

    The certification window is ``bar.weeks``; a certificate also needs
    ``bar.n_min`` labels above its threshold. ``goal`` adds the sizing that
    certifies that stratum within its weeks.

    Raises
    ------
    InputError
        The week holds no extractions, or ``goal`` names a stratum it does not hold.
    """
    week = Week(week)
    cells = plan_frame(con, week, design, from_rollup=True)  # a preview, as preview_design
    # Past labels shrunk towards the policy's prior_error: before any label the planner
    # answers at the rate the policy expects (the design's own prior sizes Neyman cells).
    cells["p"] = band_error_rates(con, week, replace(design, prior_error=bar.prior_error), cells)
    allowances = Allowances(target=bar.target, delta=1.0 - bar.confidence)
    rows = []
    strata = {}
    for (doc_type, field), group in cells.groupby(["doc_type", "field"], sort=True):
        stratum = _stratum(group, design)
        strata[(doc_type, field)] = stratum
        rows.append({"doc_type": doc_type, "field": field,
                     "n_population": int(stratum.population.sum()),
                     **_best_threshold(stratum, bar, allowances)})
    table = pa.Table.from_pandas(pd.DataFrame(rows, columns=list(PLAN_COLUMNS)),
                                 preserve_index=False)
    sizing = None
    if goal is not None:
        key = (goal.doc_type, goal.field)
        if key not in strata:
            known = ", ".join(f"{d}/{f}" for d, f in sorted(strata))
            raise InputError(f"goal names {goal.doc_type}/{goal.field}, which {week} does not"
                             f" hold; its strata: {known}")
        sizing = _size_for_goal(goal, strata[key], bar, allowances)
    return CertificatePlan(week, bar.weeks, bar.target, bar.confidence, table, sizing)


def _stratum(group: pd.DataFrame, design: Design) -> _Stratum:
    edges = np.asarray(design.bands[:-1], dtype=float)
    population = group["n_population"].to_numpy(dtype=np.int64)
    sample = group["n_sample"].to_numpy(dtype=np.int64)
    if design.allocation_rule == "neyman":
        split = np.maximum(sample, 1).astype(np.float64)
    else:
        split = population * np.where(group["boosted"].to_numpy(dtype=bool), design.boost, 1.0)
    return _Stratum(edge=edges[group["band_index"].to_numpy(dtype=np.int64)],
                    population=population, sample=sample,
                    error=group["p"].to_numpy(dtype=np.float64), split=split)


def _best_threshold(stratum: _Stratum, bar: Bar, allowances: Allowances) -> dict[str, Any]:
    """The band edge with the soonest certificate (ties: the lower edge covers more)."""
    best: tuple[float, _When] | None = None
    reasons: list[_When] = []
    for edge in _edges(stratum):
        when = _when(stratum, edge, bar, allowances)
        if when.week is None:
            reasons.append(when)
        elif best is None or when.week <= (best[1].week or 0):
            best = (edge, when)
    if best is None:
        # Say what would help: at the lowest edge where more labels would do, else the top.
        fixable = [r for r in reasons if r.more_labels_would_do]
        reason = (fixable[-1] if fixable else reasons[0]).reason
        return {"threshold": None, "n_above": None, "error_rate": None,
                "labels_per_week": None, "share_labelled": None, "labels_needed": None,
                "certify_week": None, "reason": reason}
    edge, when = best
    above = stratum.edge >= edge
    n_above = int(stratum.population[above].sum())
    per_week = int(stratum.sample[above].sum())
    return {"threshold": edge, "n_above": n_above,
            "error_rate": float(np.sum(stratum.population[above] * stratum.error[above])
                                / n_above),
            "labels_per_week": per_week, "share_labelled": per_week / n_above,
            "labels_needed": when.labels, "certify_week": when.week, "reason": None}


def _when(stratum: _Stratum, edge: float, bar: Bar, allowances: Allowances) -> _When:
    """The first week (1..window) whose planned labels above ``edge`` certify, if any.

    Week ``w`` certifies when ``w`` closed weeks like the planned one, each
    labelled as the design draws it, give enough expected evidence
    (:func:`~fieldtrust.calibration.certificate.planned_evidence` at
    :data:`PLAN_POWER`) and at least ``bar.n_min`` labels.
    """
    above = stratum.edge >= edge
    population, planned = stratum.population[above], stratum.sample[above]
    error = stratum.error[above]
    per_week = int(planned.sum())
    if per_week == 0:
        return _When(None, None, f"the design draws no labels above {edge:g}")
    rate = float(np.sum(population * error) / population.sum())
    level = allowances.max_error
    if rate >= level:
        return _When(None, None, f"cannot certify at any volume: the expected error rate"
                     f" above {edge:g} ({rate:.1%}) is not below the allowance {level:.1%}")
    bets = growth_bets(population, planned / population, error, max_error=1.0 - bar.target)
    week_cells = [CellLabels(int(n), np.zeros(0), 0.0) for n in population]

    def enough(weeks: int, sample: np.ndarray[Any, np.dtype[np.int64]]) -> bool:
        evidence = planned_evidence(
            week_cells * weeks, np.tile(sample, weeks), rates=np.tile(error, weeks),
            future_bets=np.tile(bets, weeks), budget=level * float(population.sum()) * weeks,
            power=PLAN_POWER)
        return evidence >= allowances.log_threshold and int(sample.sum()) * weeks >= bar.n_min

    if not enough(bar.weeks, planned):
        if not enough(bar.weeks, population):
            return _When(None, None, f"cannot certify at this volume: {int(population.sum())}"
                         f" items a week above {edge:g}, all labelled for {bar.weeks} weeks,"
                         " would not do")
        return _When(None, None, f"{per_week} labels a week above {edge:g} do not certify"
                     f" within the {bar.weeks}-week window: raise the sample (see --goal)",
                     more_labels_would_do=True)
    low, high = 0, bar.weeks  # enough(high): the first week that is, by bisection
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle, planned) else (middle, high)
    return _When(high, per_week * high, None)


def _size_for_goal(goal: Goal, stratum: _Stratum, bar: Bar, allowances: Allowances) -> Sizing:
    """The fewest weekly labels, at the best band edge, that certify within ``goal.weeks``."""
    if goal.weeks > bar.weeks:
        return Sizing(goal, None, 0, None, None,
                      f"{goal.weeks} weeks is longer than the {bar.weeks}-week window")
    sizings = [s for edge in _edges(stratum)
               if (s := _size_at(goal, stratum, edge, bar, allowances)) is not None]
    if not sizings:
        return Sizing(goal, None, 0, None, None,
                      f"{goal.doc_type}/{goal.field} cannot certify within {goal.weeks} weeks"
                      " even with every item labelled")
    return min(sizings, key=lambda s: (s.labels_per_week, -(s.threshold or 0.0)))


def _size_at(goal: Goal, stratum: _Stratum, edge: float, bar: Bar,
             allowances: Allowances) -> Sizing | None:
    """The smallest share labelled above ``edge`` (to 0.5%) that meets the goal, if any does.

    More labels are spread as the design would spread them (``_Stratum.split``),
    scaled to the share: what raising the base rate (or budget) would draw.
    """
    above = stratum.edge >= edge
    population = stratum.population[above]
    weight = stratum.split[above]

    def planned(share: float) -> np.ndarray[Any, np.dtype[np.int64]]:
        scaled = weight / weight.sum() * share * population.sum()
        sizes: np.ndarray[Any, np.dtype[np.int64]] = np.minimum(
            np.ceil(scaled), population).astype(np.int64)
        return sizes

    def meets(share: float) -> bool:
        when = _when(_resized(stratum, above, planned(share)), edge, bar, allowances)
        return when.week is not None and when.week <= goal.weeks

    if not meets(1.0):
        return None
    low, high = 0.0, 1.0
    while high - low > 0.005:
        middle = (low + high) / 2
        low, high = (low, middle) if meets(middle) else (middle, high)
    labels, n_above = int(planned(high).sum()), int(population.sum())
    return Sizing(goal, edge, n_above, labels, labels / n_above)


def _edges(stratum: _Stratum) -> list[float]:
    """The stratum's band edges, high to low: the thresholds the planner weighs."""
    return sorted(set(stratum.edge.tolist()), reverse=True)


def _resized(stratum: _Stratum, above: np.ndarray[Any, np.dtype[np.bool_]],
               sample: np.ndarray[Any, np.dtype[np.int64]]) -> _Stratum:
    """The cells of ``stratum`` in ``above``, with ``sample`` as their sizes."""
    return _Stratum(stratum.edge[above], stratum.population[above], sample,
                    stratum.error[above], stratum.split[above])
