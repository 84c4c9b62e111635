"""The anytime-valid certificate of one stratum, from its closed weeks in the store.

What ``certificate = "anytime"`` certifies with (docs/statistics.md,
"Certificates that last"). Per grid threshold ``t`` (0.005 apart, high to
low) the closed weeks' cells above ``t`` (:mod:`fieldtrust.calibration.closed`:
``N_h(t)`` at drawing, the labelled prefix in PRN order, "unclear" an error,
unaccounted mass an error) are tested by the stratified betting evidence of
:mod:`fieldtrust.calibration.betting`, walking down by fixed-sequence testing
(as :func:`fieldtrust.calibration.certificate.threshold_walk` does, with the
allowances of each threshold and a few thresholds to a solve) from a start
fixed by the design's planned label counts. The error allowance ``1 - target`` is
first lowered by the between-week allowance of the closed weeks' rates above
``t`` (the coming ``stability_weeks`` weeks are covered too) and, when the
policy seeds samples (``seed_rate > 0``), by the reviewers' miss-rate bound.
Evidence is cumulative over the horizon's closed weeks, never a window that
slides: a week once closed stays in the evidence for the horizon.

Stability is tested on evidence blocks (:func:`fieldtrust.calibration.weekly.
evidence_blocks`): blocks covering ``stability_weeks`` closed weeks, never
fewer because the store is young, none significantly below the target.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.betting import stratified_log_evalues
from fieldtrust.calibration.certificate import (
    Allowances,
    LabelsNeeded,
    ThresholdCells,
    WalkStep,
    labels_needed,
    walk_start,
)
from fieldtrust.calibration.closed import ClosedCells
from fieldtrust.calibration.seeds import SeedJudgements, miss_allowance
from fieldtrust.calibration.stability import WeekCheck
from fieldtrust.calibration.thresholds import ThresholdPoint, ThresholdResult, candidate_grid
from fieldtrust.calibration.weekly import (
    BetweenWeek,
    below_target_evidence,
    between_week_allowance,
    enough_evidence,
    evidence_blocks,
    week_rate,
)
from fieldtrust.store.bar import Bar

#: How the anytime certificate is made, as the evidence names it.
METHOD = ("anytime-valid: stratified betting e-processes over the closed weeks' cells,"
          " fixed-sequence walk on a 0.005 grid (STATS.md sections 12, 16 and 17)")

#: Thresholds the walk tests in one solve. A walk takes about a dozen steps; one solve of
#: several thresholds costs about what one does (small arrays: numpy's call overhead
#: dominates), and a step past the first failure only costs time, never validity.
_WALK_BATCH = 6

#: What the evidence says when the policy seeds no sample.
NO_SEEDS = "reviewer misses not allowed for: no seeds"

#: Chance the first threshold tested certifies at the prior error rate: the walk's
#: one failure is not spent where evidence is likely short (design counts only).
START_POWER = 0.9

_FEW_WEEKS = ("fewer than two closed weeks hold labels above the threshold: a coming week"
              " cannot be bounded yet")


@dataclass(frozen=True)
class CellLabelsNeeded:
    """More labels from one cell: its next items above the threshold in PRN order."""

    week: str
    cell: str
    labels: int


@dataclass(frozen=True)
class AnytimeResult:
    """The anytime certificate of one stratum, and what stands behind it."""

    thresholds: ThresholdResult
    delta: float
    closed: ClosedCells
    steps: tuple[WalkStep, ...]
    between_week: BetweenWeek | None  # at the certified threshold (else where the walk stopped)
    block_weeks: int
    misses: str
    labels_needed_cells: tuple[CellLabelsNeeded, ...] = ()
    labels_needed_reason: str | None = None
    weeks_checked: tuple[WeekCheck, ...] = ()
    enough_evidence: bool = False

    @property
    def unstable(self) -> bool:
        return any(w.below_target for w in self.weeks_checked)

    def evidence(self) -> dict[str, Any]:
        """The JSON-ready keys the anytime certificate adds to a stratum's evidence."""
        between = self.between_week
        allowance = between.allowance if between is not None else None
        finite = allowance is not None and math.isfinite(allowance)
        last = self.steps[-1] if self.steps else None
        return {
            "certificate": "anytime",
            "delta": self.delta,
            "closed_weeks": list(self.closed.weeks),
            "open_weeks": list(self.closed.open_weeks),
            "open_weeks_text": open_text(self.closed.open_weeks),
            "unaudited_closed_weeks": list(self.closed.unaudited_weeks),
            "cells_left_out": list(self.closed.dropped),
            "unclear_labels": self.closed.n_unclear,
            "unclear_counted_as": "error",
            "log_evalue": last.log_evalue if last is not None else None,
            "log_evalue_needed": math.log(1.0 / self.delta),
            "between_week_allowance": allowance if finite else None,
            "between_week_block_weeks": self.block_weeks,
            "between_week_text": between_text(between, self.block_weeks),
            "reviewer_misses": self.misses,
            "labels_needed_cells": [vars(c) for c in self.labels_needed_cells],
            "labels_needed_reason": self.labels_needed_reason,
        }


def open_text(weeks: tuple[str, ...]) -> str:
    """``2026-W49 open: not audited, not covered by any approval`` (empty when none)."""
    if not weeks:
        return ""
    return (f"{', '.join(weeks)} open: not audited, not covered by any approval;"
            " audited when its sample is drawn")


def between_text(between: BetweenWeek | None, block_weeks: int) -> str:
    """The between-week allowance in words, with the coming block it covers."""
    if between is None or not math.isfinite(between.allowance):
        return _FEW_WEEKS
    return (f"accuracy lowered by {between.allowance:.1%} so the coming {block_weeks} weeks are"
            f" covered too (week-to-week variation over {between.weeks} closed weeks)")


def _allowances(closed: ClosedCells, candidate: ThresholdCells, bar: Bar, delta: float,
                seeds: SeedJudgements | None) -> tuple[Allowances, BetweenWeek, str]:
    """The allowances at one candidate: week-to-week variation, then reviewer misses."""
    rates = [week_rate(w.cells) for w in closed.week_evidence(candidate)]
    between = between_week_allowance(rates, block_weeks=bar.stability_weeks)
    allowance = between.allowance if math.isfinite(between.allowance) else 1.0
    if bar.seed_rate <= 0:
        return Allowances(bar.target, delta, allowance), between, NO_SEEDS
    judged = seeds if seeds is not None else SeedJudgements(0, 0)
    miss = miss_allowance(max(0.0, 1.0 - bar.target - allowance), seeds=judged.judged,
                          misses=judged.missed, delta=delta)
    text = (f"reviewer misses allowed for: at most {miss.miss_upper:.1%} missed"
            f" ({judged.missed} of {judged.judged} seeds)")
    return Allowances(bar.target, delta, allowance, miss), between, text


def _accuracy(candidate: ThresholdCells) -> float:
    """Stratified accuracy of the labelled cells above (Cochran), NaN without labels."""
    return 1.0 - week_rate(candidate.cells).estimate


def _accuracy_low(candidate: ThresholdCells, delta: float) -> float:
    """``1 -`` the smallest error rate whose null the evidence rejects at ``delta``."""
    needed = math.log(1.0 / delta)
    lo, hi = 0.0, 1.0
    if candidate.evidence(1.0 - 1e-9).log_evalue < needed:
        return 0.0
    last = None  # each solve starts from the one before: the same cells, a nearby level
    for _ in range(20):  # to 1e-6: the bound is shown to a tenth of a point
        mid = 0.5 * (lo + hi)
        last = candidate.evidence(mid, warm=last)
        if last.log_evalue >= needed:
            hi = mid
        else:
            lo = mid
    return 1.0 - hi


def _point(candidate: ThresholdCells, above: int, total: int, delta: float,
           *, bound: bool) -> ThresholdPoint:
    accuracy = _accuracy(candidate)
    low = _accuracy_low(candidate, delta) if bound else float("nan")
    return ThresholdPoint(
        threshold=candidate.threshold,
        coverage=above / total if total else 0.0,
        n_population_above=above,
        labels_above=candidate.n_labels,
        labels_used=candidate.n_labels,
        accuracy=accuracy,
        accuracy_low=min(low, accuracy) if bound and not math.isnan(accuracy) else low,
        exact=False,
    )


def _stability(closed: ClosedCells, candidate: ThresholdCells, bar: Bar,
               delta: float) -> tuple[tuple[WeekCheck, ...], bool]:
    """Evidence blocks above the certified threshold, each tested against the target."""
    blocks = evidence_blocks(closed.week_evidence(candidate), min_week_labels=bar.min_week_labels,
                             stability_weeks=bar.stability_weeks)
    checks = []
    for block in blocks:
        below = block.complete and below_target_evidence(block, target=bar.target).certifies(delta)
        checks.append(WeekCheck(
            week=", ".join(sorted(block.weeks)),
            labels_above=block.n_labels,
            accuracy=1.0 - week_rate(block.cells).estimate,
            error_lower_bound=float("nan"),
            below_target=bool(below),
            enough_evidence=block.complete,
        ))
    enough = enough_evidence(blocks, stability_weeks=bar.stability_weeks)
    if not enough and all(c.enough_evidence for c in checks):
        covered = sum(len(b.weeks) for b in blocks)
        checks.append(WeekCheck(week=f"{bar.stability_weeks - covered} more closed week(s)",
                                labels_above=0, accuracy=float("nan"),
                                error_lower_bound=float("nan"), below_target=False,
                                enough_evidence=False))
    return tuple(checks), enough


def anytime_certificate(
    closed: ClosedCells,
    bar: Bar,
    *,
    delta: float,
    seeds: SeedJudgements | None = None,
) -> AnytimeResult:
    """Certify one stratum on its closed weeks at ``delta`` (the bar's, or a familywise share).

    A pure function of its arguments, so a result is kept by their content
    (:func:`_content_key`) and given again for the same content: after a
    label, a report recomputes the stratum it changed, not every stratum.

    Parameters
    ----------
    closed
        The stratum's closed weeks (:func:`fieldtrust.calibration.closed.closed_cells`).
    bar
        ``target``, ``prior_error`` (the walk's start and the bets, fixed from
        the design), ``stability_weeks`` (the coming block the between-week
        allowance covers, and the closed weeks stability needs),
        ``min_week_labels`` (evidence blocks), ``seed_rate`` (0: misses are
        not allowed for, and the evidence says so).
    delta
        The chance of a wrong certificate at any look over the horizon.
    seeds
        The stratum's judged and missed seeds; used when ``seed_rate > 0``
        (none then refuses a certificate until enough seeds are judged).

    References
    ----------
    STATS.md sections 12-17; Waudby-Smith & Ramdas (2020); Spertus & Stark
    (2022); Angelopoulos et al. (2021), Learn then Test.
    """
    key = _content_key(closed, bar, delta, seeds)
    while True:
        with _KEPT_LOCK:
            kept = _KEPT.get(key)
            if kept is not None:
                _KEPT.move_to_end(key)
                return kept
            underway = _UNDERWAY.get(key)
            if underway is None:
                underway = _UNDERWAY[key] = threading.Event()
                break
        # Another thread is computing this very certificate (the server's first report,
        # a second page): wait for its result rather than compute it twice side by side.
        # If that thread failed, nothing was kept, and the loop computes it here.
        underway.wait()
    try:
        result = _certify(closed, bar, delta=delta, seeds=seeds)
        with _KEPT_LOCK:
            _KEPT[key] = result
            while len(_KEPT) > _KEPT_SIZE:
                _KEPT.popitem(last=False)
    finally:
        with _KEPT_LOCK:
            del _UNDERWAY[key]
        underway.set()
    return result


#: Results of :func:`anytime_certificate` by the content of their arguments, newest
#: last: a store's strata at a few bars. A result holds its stratum's label arrays
#: (under a megabyte at ten million extractions), so the memory stays bounded.
_KEPT: OrderedDict[bytes, AnytimeResult] = OrderedDict()
_KEPT_SIZE = 64
_KEPT_LOCK = threading.Lock()
#: Certificates being computed now, by the same key: set once the result is kept (or not).
_UNDERWAY: dict[bytes, threading.Event] = {}


def _content_key(closed: ClosedCells, bar: Bar, delta: float,
                 seeds: SeedJudgements | None) -> bytes:
    """A digest of everything a certificate is computed from: equal only for equal inputs."""
    digest = hashlib.sha256(repr((bar, delta, seeds)).encode())
    for field in dataclasses.fields(closed):
        value = getattr(closed, field.name)
        digest.update(field.name.encode())
        if isinstance(value, np.ndarray):
            digest.update(f"{value.dtype}{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.digest()


def _certify(
    closed: ClosedCells,
    bar: Bar,
    *,
    delta: float,
    seeds: SeedJudgements | None,
) -> AnytimeResult:
    """:func:`anytime_certificate`, computed."""
    population = closed.week_hist.sum(axis=0) if closed.weeks else np.zeros(1, dtype=np.int64)
    grid = candidate_grid(population) if closed.weeks else np.zeros(0, dtype=np.int64)
    above = closed.population_above() if closed.weeks else np.zeros(1, dtype=np.int64)
    total = int(above[0])
    candidates = _Candidates(closed, grid, bar)
    start = walk_start(closed.planned_above()[grid], prior_error=bar.prior_error,
                       target=bar.target, delta=delta, population=above[grid],
                       power=START_POWER) \
        if grid.size else 0
    steps: list[WalkStep] = []
    certified = failure = None
    between: BetweenWeek | None = None
    misses = NO_SEEDS
    refused: str | None = None
    for first in range(start, len(candidates), _WALK_BATCH):
        batch = range(first, min(first + _WALK_BATCH, len(candidates)))
        candidates.build(batch)
        tested = [(i, *_allowances(closed, candidates[i], bar, delta, seeds)) for i in batch]
        evidence = stratified_log_evalues([
            (candidates[i].cells, allowances.max_error, candidates[i].unaccounted)
            for i, allowances, _, _ in tested])
        for (i, allowances, at_i, misses_at_i), log_e in zip(tested, evidence, strict=True):
            between, misses = at_i, misses_at_i  # the last threshold tested names them
            # As threshold_walk tests one candidate: nothing when the allowances refuse.
            if allowances.refused is not None:
                failure, refused = i, allowances.refused
                break
            passed = bool(log_e >= allowances.log_threshold)
            steps.append(WalkStep(candidates[i].threshold, float(log_e), passed))
            if not passed:
                failure = i
                break
            certified = i
        if failure is not None:
            break
    accuracy = closed.accuracy_above()[grid] if grid.size else np.zeros(0)
    point_i = np.flatnonzero(accuracy >= bar.target)  # NaN (no labels) never reaches it
    point = _point(candidates[int(point_i[-1])], int(above[grid[point_i[-1]]]), total, delta,
                   bound=False) if point_i.size else None

    if certified is not None:
        best = candidates[certified]
        checks, enough = _stability(closed, best, bar, delta)
        result = ThresholdResult(
            point=point, certified=_point(best, int(above[grid[certified]]), total, delta,
                                          bound=True),
            first_failure=None if failure is None else _point(
                candidates[failure], int(above[grid[failure]]), total, delta, bound=False),
            tested=len(steps), labels_needed=None, labels_needed_threshold=None)
        return AnytimeResult(result, delta, closed, tuple(steps), between, bar.stability_weeks,
                             misses, weeks_checked=checks, enough_evidence=enough)

    needed, names, reason = _labels_needed(closed, candidates, failure, bar, delta, seeds,
                                           refused)
    stopped = None if failure is None else _point(candidates[failure], int(above[grid[failure]]),
                                                  total, delta, bound=False)
    result = ThresholdResult(
        point=point, certified=None, first_failure=stopped, tested=len(steps),
        labels_needed=needed.total if needed is not None else None,
        labels_needed_threshold=candidates[failure].threshold
        if failure is not None and needed is not None and needed.total else None)
    return AnytimeResult(result, delta, closed, tuple(steps), between, bar.stability_weeks,
                         misses, labels_needed_cells=names, labels_needed_reason=reason)


class _Candidates:
    """The cells above each grid threshold, built when the walk reaches it (bets cost time)."""

    def __init__(self, closed: ClosedCells, grid: npt.NDArray[np.int64], bar: Bar) -> None:
        self._closed, self._grid, self._bar = closed, grid, bar
        self._built: dict[int, ThresholdCells] = {}

    def __len__(self) -> int:
        return int(self._grid.size)

    def __getitem__(self, i: int) -> ThresholdCells:
        self.build([i])
        return self._built[i]

    def build(self, indices: range | list[int]) -> None:
        """Build the candidates at ``indices`` not built yet, in one pass over the cells."""
        missing = [i for i in indices if i not in self._built]
        if missing:
            built = self._closed.threshold_cells([int(self._grid[i]) for i in missing],
                                                 prior_error=self._bar.prior_error,
                                                 target=self._bar.target)
            self._built.update(zip(missing, built, strict=True))


def _labels_needed(
    closed: ClosedCells, candidates: _Candidates, failure: int | None, bar: Bar,
    delta: float, seeds: SeedJudgements | None, refused: str | None,
) -> tuple[LabelsNeeded | None, tuple[CellLabelsNeeded, ...], str | None]:
    """Labels that would certify where the walk stopped, named by week and cell."""
    if failure is None:
        return None, (), "no closed week holds extractions to certify" if not len(
            candidates) else None
    candidate = candidates[failure]
    allowances, between, _ = _allowances(closed, candidate, bar, delta, seeds)
    if not math.isfinite(between.allowance) and between.weeks < 2:
        return None, (), "cannot certify yet: " + _FEW_WEEKS
    if refused is not None and allowances.refused is not None:
        return None, (), f"cannot certify: {refused}"
    k = round(candidate.threshold * 200)
    planned = closed.planned_prob * closed.cell_above(k)
    needed = labels_needed(candidate, allowances=allowances, prior_error=bar.prior_error,
                           planned=planned)
    names = tuple(CellLabelsNeeded(c.week, c.cell, int(n))
                  for c, n in zip(closed.cells, needed.per_cell, strict=True) if n > 0)
    return needed, names, needed.reason
