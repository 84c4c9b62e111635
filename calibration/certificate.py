"""The anytime-valid certificate of a stratum: allowances, the threshold walk, labels needed.

What a certificate promises (docs/statistics.md, "Certificates that last"):
with probability at least ``1 - delta``, at no look during the horizon is a
threshold certified while the error rate of the horizon's closed weeks above
it (unreadable sources counted as errors) exceeds ``1 - target - Delta``,
whatever the looks and whatever rule reviewers or managers use to stop.
``Delta`` is the between-week allowance, so that a coming block of weeks is
covered too (:mod:`fieldtrust.calibration.weekly`); reviewer misses are
allowed for by testing the observed errors against a lower rate
(:mod:`fieldtrust.calibration.seeds`).

The walk over thresholds is fixed-sequence testing (Learn-then-Test), each
step's test the stratified evidence of :mod:`fieldtrust.calibration.betting`:
from a start chosen from design counts only, high to low on the grid, a
threshold is certified while its evidence reaches ``1 / delta``; the walk
stops at the first failure. A failure is not spent: the evidence keeps
growing with labels, and a later look may walk further.

References
----------
Angelopoulos, Bates, Candes, Jordan & Lei (2021), "Learn then Test",
Annals of Applied Statistics (2025). Zecchin, Park & Simeone (2024),
"Adaptive learn-then-test", arXiv 2409.15844 (the walk with e-processes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray, IntArray
from fieldtrust.calibration.bets import kelly_bet
from fieldtrust.calibration.betting import (
    MAX_BET,
    BatchEvidence,
    CellLabels,
    LabelStack,
    StratifiedEvalue,
    least_evidence,
    stratified_evalue,
)
from fieldtrust.calibration.seeds import MissAllowance
from fieldtrust.calibration.survey import check_fraction
from scipy.special import ndtri

from fieldtrust.errors import InputError


@dataclass(frozen=True)
class ThresholdCells:
    """The closed weeks' cells above one candidate threshold.

    ``unaccounted`` counts items above the threshold that no cell accounts
    for (uncovered closed weeks, rows that arrived after their week's draw):
    they count as errors.
    """

    threshold: float
    cells: tuple[CellLabels, ...]
    unaccounted: float = 0.0

    @property
    def n_population(self) -> float:
        return float(sum(c.n_population for c in self.cells)) + self.unaccounted

    @property
    def n_labels(self) -> int:
        return sum(c.n_labels for c in self.cells)

    @property
    def n_unlabelled(self) -> int:
        return sum(c.n_population - c.n_labels for c in self.cells)

    def evidence(self, max_error: float, warm: StratifiedEvalue | None = None) -> StratifiedEvalue:
        return stratified_evalue(self.cells, max_error=max_error, unaccounted=self.unaccounted,
                                 warm=warm)


@dataclass(frozen=True)
class Allowances:
    """What the error allowance ``1 - target`` gives up before the labels are tested.

    ``max_error = (1 - target - between_week) * (1 - miss_upper)``: the
    observed error rate above the threshold must stay below it, tested at
    ``delta_labels`` (``delta`` less what the miss-rate bound spends).
    """

    target: float
    delta: float
    between_week: float = 0.0
    miss: MissAllowance | None = None

    def __post_init__(self) -> None:
        check_fraction("target", self.target)
        check_fraction("delta", self.delta)
        if self.between_week < 0:
            raise InputError(f"between_week must be >= 0, got {self.between_week!r}")

    @property
    def max_error(self) -> float:
        upper = self.miss.miss_upper if self.miss is not None else 0.0
        return max(0.0, 1.0 - self.target - self.between_week) * (1.0 - upper)

    @property
    def delta_labels(self) -> float:
        return self.miss.delta_labels if self.miss is not None else self.delta

    @property
    def log_threshold(self) -> float:
        """Certify when the log evidence reaches this: ``log(1 / delta_labels)``."""
        return math.log(1.0 / self.delta_labels)

    @property
    def refused(self) -> str | None:
        """Why no certificate may be issued whatever the labels say, if so."""
        if self.miss is not None and self.miss.refused:
            return self.miss.reason
        if self.max_error <= 0:
            return "the allowances for reviewer misses and weekly variation use up the target"
        return None


@dataclass(frozen=True)
class WalkStep:
    """One tested threshold of the walk."""

    threshold: float
    log_evalue: float
    certified: bool


@dataclass(frozen=True)
class WalkResult:
    """Where the walk got: the lowest certified threshold and every step tested."""

    certified: float | None
    first_failure: float | None
    steps: tuple[WalkStep, ...]


def threshold_walk(
    candidates: Sequence[ThresholdCells],
    *,
    allowances: Allowances,
    start: int = 0,
) -> WalkResult:
    """Fixed-sequence testing down the candidates from ``start``, each by its evidence.

    ``candidates`` run from high to low thresholds (the 0.005 grid);
    ``start`` is the index of the first one tested, chosen from design
    counts only (:func:`walk_start`). A threshold is certified while its
    evidence reaches ``1 / delta_labels``; the walk stops at the first
    failure.

    References
    ----------
    Angelopoulos et al. (2021), Learn then Test, fixed-sequence testing;
    Zecchin, Park & Simeone (2024), arXiv 2409.15844.
    """
    if not 0 <= start <= len(candidates):
        raise InputError(f"start {start} is outside the {len(candidates)} candidates")
    if allowances.refused is not None:
        return WalkResult(None, None, ())
    steps: list[WalkStep] = []
    certified = None
    for candidate in candidates[start:]:
        log_e = candidate.evidence(allowances.max_error).log_evalue
        passed = log_e >= allowances.log_threshold
        steps.append(WalkStep(candidate.threshold, log_e, passed))
        if not passed:
            return WalkResult(certified, candidate.threshold, tuple(steps))
        certified = candidate.threshold
    return WalkResult(certified, None, tuple(steps))


def evidence_growth(max_error: float, prior_error: float) -> float:
    """Expected log evidence per label at Kelly's bet if errors occur at ``prior_error``.

    ``KL(p || a)`` for Bernoulli rates: the growth rate of the sequential
    probability ratio test (Wald 1947).
    """
    p, a = prior_error, max_error
    if not 0 <= p < a < 1:
        return 0.0
    first = p * math.log(p / a) if p > 0 else 0.0
    return first + (1 - p) * math.log((1 - p) / (1 - a))


def walk_start(
    planned_labels: npt.ArrayLike,
    *,
    prior_error: float,
    target: float = 0.95,
    delta: float = 0.05,
    population: npt.ArrayLike | None = None,
    power: float = 0.5,
) -> int:
    """Index of the first candidate (high to low) worth testing, from planned label counts.

    The first candidate whose planned labels above it (the design's sample
    sizes, never the verdicts or how far reviewers went) reach the labels
    the evidence needs on average if errors occur at ``prior_error``:
    ``n0 = log(1/delta) / KL(prior || 1 - target)`` (at ``power`` above
    0.5, the ``n0`` whose log evidence clears ``log(1/delta)`` by ``z_power``
    of its standard deviations, the normal approximation to the sum of
    per-label log likelihood ratios; Wald 1947). Given the
    ``population`` above each candidate, the count is corrected for
    sampling without replacement as a sample size is,
    ``n0 / (1 + n0 / N(t))`` (labelling a large share of a small stratum
    gathers evidence faster than draws with replacement). With no such
    candidate, the lowest is tested; given ``population``, the one whose
    planned labels come closest to its need (the highest ratio). A count of
    the design, so the walk stays valid; held for the horizon it keeps the
    walk's first tested threshold fixed.
    """
    planned = np.asarray(planned_labels, dtype=float).reshape(-1)
    if planned.size == 0:
        return 0
    needed: float | FloatArray = _labels_for_power(1.0 - target, prior_error, delta, power)
    if population is not None and math.isfinite(float(needed)):
        size = np.asarray(population, dtype=float).reshape(-1)
        needed = needed / (1.0 + needed / np.maximum(size, 1.0))
    hits = np.flatnonzero(planned >= needed)
    if hits.size:
        return int(hits[0])
    if population is not None and np.all(np.isfinite(needed)):
        return int(np.argmax(planned / np.broadcast_to(needed, planned.shape)))
    return planned.size - 1


def _labels_for_power(max_error: float, prior_error: float, delta: float, power: float) -> float:
    """Labels whose log likelihood ratio reaches ``log(1/delta)`` with probability ``power``.

    ``n KL - z sqrt(n V) = log(1/delta)`` solved for ``n``, with ``KL`` and
    ``V`` the mean and variance of one label's log likelihood ratio at
    ``prior_error`` against ``max_error`` (``z = 0`` at power 0.5).
    """
    check_fraction("power", power)
    growth = evidence_growth(max_error, prior_error)
    if growth <= 0:
        return math.inf
    level = math.log(1.0 / delta)
    z = max(float(ndtri(power)), 0.0)
    p, a = prior_error, max_error
    step = math.log(p * (1 - a) / (a * (1 - p))) if p > 0 else 0.0
    sd = math.sqrt(p * (1 - p)) * abs(step)
    root = (z * sd + math.sqrt((z * sd) ** 2 + 4 * growth * level)) / (2 * growth)
    return root**2


@dataclass(frozen=True)
class LabelsNeeded:
    """More labels above a candidate that would certify it if errors kept their rate.

    ``per_cell[h]`` labels are the next items of cell ``h`` in PRN order;
    ``total`` is ``None`` with a ``reason`` when labelling every item above
    the candidate would not certify it.
    """

    total: int | None
    per_cell: tuple[int, ...]
    reason: str | None = None


#: Relative precision of "labels needed" (about one label in a thousand).
_LABELS_TOLERANCE = 1e-3

#: Labels of prior weight when the expected error rate of a cell is estimated.
PRIOR_WEIGHT = 20.0


def _planned_stack(cells: Sequence[CellLabels], extra: IntArray, rates: FloatArray,
                   future_bets: FloatArray) -> LabelStack:
    """The cells with ``extra`` future labels each, errors at their expected ``rates``.

    A future label of cell ``h`` bets ``future_bets[h]``; its verdict enters
    as the expected error ``rate`` (the null counts move by it) and its log
    factor as the expected ``rate * log(1 - c)``.
    """
    n = np.array([c.n_labels + int(k) for c, k in zip(cells, extra, strict=True)], dtype=np.int64)
    width = int(n.max()) if n.size else 0
    errors = np.zeros((len(cells), width))
    bets = np.zeros((len(cells), width))
    for i, (c, k) in enumerate(zip(cells, extra, strict=True)):
        errors[i, : c.n_labels] = c.errors
        errors[i, c.n_labels : c.n_labels + k] = rates[i]
        bets[i, : c.n_labels] = c.bets
        bets[i, c.n_labels : c.n_labels + k] = future_bets[i]
    size = np.array([c.n_population for c in cells], dtype=float)
    stack = LabelStack.from_padded(size, errors, n, bets, np.zeros(len(cells), dtype=np.int64),
                                   n_groups=1)
    valid = np.arange(width)[None, :] < n[:, None]
    expected = np.where(valid, errors * np.log1p(-bets), 0.0).sum(axis=1)
    return LabelStack(stack.cell, stack.a, stack.s_prev, stack.group, expected,
                      stack.low, stack.high, 1)


def planned_evidence(
    cells: Sequence[CellLabels],
    extra: npt.ArrayLike,
    *,
    rates: npt.ArrayLike,
    future_bets: npt.ArrayLike,
    budget: float,
    power: float = 0.5,
) -> float:
    """The log evidence expected once cell ``h`` has ``extra[h]`` more labels at ``rates[h]``.

    The least over the null's boundary (``budget`` errors in all: ``max_error``
    times the items, less those no cell accounts for), less ``z_power``
    standard deviations of the future labels' contribution (``power`` 0.5:
    the expected value itself). Certification is planned where it reaches
    ``log(1 / delta)``; :func:`labels_needed` searches the labels for it, a
    planner asks it of a design's coming weeks.
    """
    return _planned_solve(cells, extra, rates=rates, future_bets=future_bets, budget=budget,
                          power=power)[0]


def _planned_solve(
    cells: Sequence[CellLabels], extra: npt.ArrayLike, *, rates: npt.ArrayLike,
    future_bets: npt.ArrayLike, budget: float, power: float,
    warm: BatchEvidence | None = None,
) -> tuple[float, BatchEvidence]:
    """:func:`planned_evidence`, and the solve's state: a search's next solve starts from it."""
    more = np.asarray(extra, dtype=np.int64).reshape(-1)
    p = np.broadcast_to(np.asarray(rates, dtype=float), more.shape)
    c = np.broadcast_to(np.asarray(future_bets, dtype=float), more.shape)
    spread = p * (1 - p) * np.log1p(-np.minimum(c, MAX_BET)) ** 2
    margin = float(ndtri(power)) * math.sqrt(float(np.sum(more * spread)))
    solved = least_evidence(_planned_stack(cells, more, p, c), [budget], warm=warm)
    return float(solved.log_evalue[0]) - margin, solved


def labels_needed(
    candidate: ThresholdCells,
    *,
    allowances: Allowances,
    prior_error: float,
    planned: npt.ArrayLike | None = None,
    future_bets: npt.ArrayLike | None = None,
    power: float = 0.5,
) -> LabelsNeeded:
    """Fewest more labels, spread over the cells' next PRN items, expected to certify.

    Each cell's error rate is estimated as ``(S + w p0) / (n + w)`` (prior
    rate ``p0``, weight :data:`PRIOR_WEIGHT` labels); extra labels follow
    ``planned`` (each cell's planned labels, the design's sample sizes; by
    default its size): every cell is raised to ``s * planned_h`` (cells
    behind their plan first), never past its items above the candidate, and
    the smallest ``s`` whose expected evidence reaches ``1 / delta_labels``
    is found by bisection. A
    planning figure: it assumes the rates stay what they are. When even every
    item labelled would not do, ``total`` is ``None`` and ``reason`` says why:
    the error rate itself, the unaccounted items, or the allowances.
    ``future_bets`` (per cell, or one for all) is what the next labels will
    bet, fixed now, before their verdicts; by default each cell's last bet,
    and Kelly's bet at the prior for a cell without labels.
    ``power`` 0.5 asks for the expected evidence to reach the bar (about
    half the time it will); a planner asks more (0.8: the expected log
    evidence must clear the bar by 0.84 standard deviations of the future
    labels' contribution, ``sum_h k_h p_h (1 - p_h) log(1 - c_h)^2``).

    References
    ----------
    STATS.md section 17; Wald (1947) for expected evidence per label.
    """
    cells = list(candidate.cells)
    size = np.array([c.n_population for c in cells], dtype=float)
    n = np.array([c.n_labels for c in cells], dtype=float)
    s = np.array([c.n_errors for c in cells], dtype=float)
    level = allowances.max_error
    if allowances.refused is not None:
        return LabelsNeeded(None, tuple(0 for _ in cells), allowances.refused)
    rates = (s + PRIOR_WEIGHT * prior_error) / (n + PRIOR_WEIGHT)
    total = candidate.n_population
    expected_rate = (float(np.sum(size * rates)) + candidate.unaccounted) / total if total else 1.0
    if candidate.unaccounted >= level * total:
        return LabelsNeeded(None, tuple(0 for _ in cells),
                            "items no audit accounts for already exceed the error allowance")
    if expected_rate >= level:
        return LabelsNeeded(None, tuple(0 for _ in cells), _rate_reason(allowances))
    default = kelly_bet(1.0 - allowances.target, prior_error)
    future = np.array([c.bets[-1] if c.n_labels else default for c in cells], dtype=float)
    if future_bets is not None:
        future = np.broadcast_to(np.asarray(future_bets, dtype=float), future.shape).copy()
    budget = level * total - candidate.unaccounted

    plan = size.copy() if planned is None else np.asarray(planned, dtype=float).reshape(-1)
    if plan.shape != size.shape or np.any(plan < 0):
        raise InputError("planned must give one non-negative label count per cell")
    plan = np.where(plan > 0, plan, 0.0)

    check_fraction("power", power)

    last: BatchEvidence | None = None  # the previous solve: the next one starts near it

    def evidence(scale: float) -> tuple[float, IntArray]:
        nonlocal last
        goal = np.minimum(np.ceil(scale * plan), size)
        extra = np.clip(goal - n, 0, size - n).astype(np.int64)
        value, last = _planned_solve(cells, extra, rates=rates, future_bets=future,
                                     budget=budget, power=power, warm=last)
        return value, extra

    now, _ = evidence(0.0)
    if now >= allowances.log_threshold:
        return LabelsNeeded(0, tuple(0 for _ in cells))
    with np.errstate(divide="ignore", invalid="ignore"):
        census = float(np.max(np.where(plan > 0, size / plan, 0.0))) if cells else 0.0
    lo, hi = 0.0, census
    full, extra = evidence(hi)
    if full < allowances.log_threshold:
        return LabelsNeeded(None, tuple(0 for _ in cells), _rate_reason(allowances))
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        value, trial_extra = evidence(mid)
        if value >= allowances.log_threshold:
            hi, extra = mid, trial_extra
        else:
            lo = mid
        # A planning figure: a thousandth of the labels is as close as it needs to be.
        if hi - lo < _LABELS_TOLERANCE * hi:
            break
    return LabelsNeeded(int(extra.sum()), tuple(int(k) for k in extra))


def _rate_reason(allowances: Allowances) -> str:
    parts = []
    if allowances.miss is not None and allowances.miss.miss_upper > 0:
        parts.append(f"the allowance for reviewer misses (up to {allowances.miss.miss_upper:.0%})")
    if allowances.between_week > 0:
        parts.append(f"the allowance for week-to-week variation ({allowances.between_week:.1%})")
    verb = " are" if len(parts) > 1 else " is"
    tail = " once " + " and ".join(parts) + verb + " taken off" if parts else ""
    return ("cannot certify at this volume: the error rate above the threshold is not below"
            f" the allowance{tail}, even with every item labelled")


def familywise_delta(delta: float, n_strata: int) -> float:
    """The per-stratum ``delta`` that bounds the chance of any wrong certificate by ``delta``.

    Bonferroni over the strata shown: e-values need no independence, and
    the bound holds at every look. Without it, the expected number of wrong
    certificates among ``K`` strata is at most ``K * delta``.
    """
    check_fraction("delta", delta)
    if n_strata < 1:
        raise InputError(f"n_strata must be at least 1, got {n_strata}")
    return delta / n_strata


def expected_wrong(deltas: npt.ArrayLike) -> float:
    """Upper bound on the expected number of wrong certificates among those shown: ``sum delta``."""
    return float(np.sum(np.asarray(deltas, dtype=float)))
