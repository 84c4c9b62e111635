"""Anytime-valid evidence that a stratified population's error rate is below a level.

The population above a threshold is split into *cells* (an audited week's
sampling cell: week x band x form-version status), each of known size
``N_h`` and with its labels in permanent-random-number order: the labelled
prefix of a uniformly random ordering, i.e. draws without replacement.

Within a cell, for a hypothesised number ``M`` of errors among its ``N``
items, the betting factor of label ``i`` (``X_i = 1`` for an error) is

    (1 - c_i X_i) / (1 - c_i m_i(M)),    m_i(M) = (M - S_{i-1}) / (N - i + 1),

``m_i`` the share of errors left among the unlabelled items if the cell held
``M`` errors, ``c_i`` in ``[0, 1)`` a bet fixed before label ``i`` is seen
(never a function of ``M``). For binary labels this is the betting
martingale of Waudby-Smith & Ramdas (2020, without replacement) with bet
``c_i / (1 - c_i m_i)`` on ``m_i - X_i``; its logarithm ``l_h(M)`` is convex
and non-decreasing in ``M``. If the cell truly holds ``M' >= M`` errors the
product is a test supermartingale in the labels, whatever the order in which
cells are labelled and whenever anyone looks.

The stratified null "the error rate above the threshold is at least ``a``"
is ``sum_h M_h + R >= a N``, with ``R`` the extractions no cell accounts for
(counted as errors). Its evidence is the least product over that null,
``min sum_h l_h(M_h)`` subject to ``sum_h M_h = a N - R`` and
``S_h <= M_h <= N_h - (n_h - S_h)`` (the labels seen bound each cell's
count): a convex, separable problem with one linear constraint, solved
exactly by water-filling on its Lagrange multiplier. For the true cell
counts the product is a test supermartingale over the whole label stream,
so by Ville's inequality the chance that the minimum ever reaches
``1/delta`` while the null holds is at most ``delta`` (Spertus & Stark 2022,
intersection tests over strata; Ville 1939).

References
----------
Waudby-Smith & Ramdas (2020), "Confidence sequences for sampling without
replacement", NeurIPS 33. Waudby-Smith & Ramdas (2024), "Estimating means of
bounded random variables by betting", JRSS-B 86:1. Spertus & Stark (2022),
"Sweeter than SUITE: supermartingale stratified union-intersection tests of
elections", E-Vote-ID (arXiv 2207.03379). Ville (1939), Etude critique de la
notion de collectif.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray, IntArray

from fieldtrust.errors import InputError

#: Largest bet a label may carry: a bet of 1 would lose everything on one error.
MAX_BET = 0.99


@dataclass(frozen=True)
class CellLabels:
    """One cell above a threshold: its size and its labels in PRN order.

    Attributes
    ----------
    n_population
        ``N_h``: the cell's items above the threshold (at the time of drawing).
    errors
        One entry per labelled item, in the order of the cell's permanent
        random numbers (its labelled prefix above the threshold): 1 for a
        wrong value or an unreadable source, 0 for a correct one.
    bets
        ``c_i`` per label in ``[0, MAX_BET]``, each fixed before its label was
        seen (:mod:`fieldtrust.calibration.bets`); a scalar is used for every label.
    """

    n_population: int
    errors: FloatArray
    bets: FloatArray

    def __init__(self, n_population: int, errors: npt.ArrayLike,
                 bets: npt.ArrayLike | float) -> None:
        x = np.asarray(errors, dtype=float).reshape(-1)
        c = np.broadcast_to(np.asarray(bets, dtype=float), x.shape).copy()
        if n_population < x.size:
            raise InputError(
                f"a cell of {n_population} items cannot hold {x.size} labels;"
                " pass the cell's size above the threshold as n_population")
        if np.any((x != 0) & (x != 1)):
            raise InputError("errors must be 0 (correct) or 1 (wrong or unclear) per label")
        if np.any(~(c >= 0)) or np.any(c > MAX_BET):
            bad = c[~((c >= 0) & (c <= MAX_BET))][:3]
            raise InputError(f"bets must lie in [0, {MAX_BET}], got {bad}")
        object.__setattr__(self, "n_population", int(n_population))
        object.__setattr__(self, "errors", x)
        object.__setattr__(self, "bets", c)

    @classmethod
    def checked_already(cls, n_population: int, errors: FloatArray, bets: float) -> CellLabels:
        """A cell whose parts were checked where they were made (0/1 verdicts from the store,
        a bet from :mod:`fieldtrust.calibration.bets`): the walk builds thousands."""
        cell = object.__new__(cls)
        object.__setattr__(cell, "n_population", int(n_population))
        object.__setattr__(cell, "errors", errors)
        object.__setattr__(cell, "bets", np.full(errors.shape, bets))
        return cell

    @property
    def n_labels(self) -> int:
        return int(self.errors.size)

    @property
    def n_errors(self) -> int:
        return int(self.errors.sum())


@dataclass(frozen=True)
class StratifiedEvalue:
    """The least evidence over the null boundary, and where it sits.

    ``log_evalue`` is a lower bound on ``min sum_h l_h(M_h)`` within
    ``1e-9`` (the dual value at the multiplier found): ``+inf`` when the
    labels already rule the null out (too few items can still be wrong),
    ``-inf`` when the errors seen plus the unaccounted mass already reach
    it. ``null_errors`` holds the least favourable error count per cell.
    """

    log_evalue: float
    null_errors: FloatArray
    multiplier: float

    def certifies(self, delta: float) -> bool:
        """Whether the evidence reaches ``1/delta`` (Ville's inequality)."""
        return self.log_evalue >= math.log(1.0 / delta)


@dataclass(frozen=True)
class LabelStack:
    """Many groups of cells in flat arrays, for one vectorised solve.

    A *group* is one stratum above one threshold (in the simulations, one
    run x threshold); each of its cells holds labels in PRN order. Built by
    :meth:`from_cells` or, from padded arrays, :meth:`from_padded`.
    """

    cell: IntArray  # per label: its cell
    a: FloatArray  # per label: c_i / (N - i + 1)
    s_prev: FloatArray  # per label: errors before it in its cell
    group: IntArray  # per cell: its group
    base: FloatArray  # per cell: sum_i log(1 - c_i X_i)
    low: FloatArray  # per cell: errors seen, S_h
    high: FloatArray  # per cell: N_h - (n_h - S_h)
    n_groups: int

    @property
    def n_cells(self) -> int:
        return int(self.group.size)

    @classmethod
    def from_cells(cls, cells: Sequence[CellLabels],
                   groups: npt.ArrayLike | None = None) -> LabelStack:
        """One group (or the groups given per cell) of :class:`CellLabels`."""
        group = np.zeros(len(cells), dtype=np.int64) if groups is None else np.asarray(
            groups, dtype=np.int64)
        sizes = np.array([c.n_labels for c in cells], dtype=np.int64)
        width = int(sizes.max()) if cells else 0
        errors = np.zeros((len(cells), width))
        bets = np.zeros((len(cells), width))
        for i, c in enumerate(cells):
            errors[i, : c.n_labels] = c.errors
            bets[i, : c.n_labels] = c.bets
        n_pop = np.array([c.n_population for c in cells], dtype=float)
        return cls.from_padded(n_pop, errors, sizes, bets, group,
                               n_groups=int(group.max()) + 1 if group.size else 1)

    @classmethod
    def from_padded(cls, n_population: npt.ArrayLike, errors: npt.ArrayLike,
                    n_labels: npt.ArrayLike, bets: npt.ArrayLike, group: npt.ArrayLike,
                    *, n_groups: int) -> LabelStack:
        """Cells as padded arrays: ``errors`` ``(C, L)`` in PRN order, ``n_labels`` ``(C,)``.

        ``bets`` is ``(C,)`` (one per cell) or ``(C, L)`` (per label).
        """
        size = np.asarray(n_population, dtype=float).reshape(-1)
        x = np.asarray(errors, dtype=float).reshape(size.size, -1)
        n = np.asarray(n_labels, dtype=np.int64).reshape(-1)
        width = x.shape[1]
        if np.any(n > size) or np.any(n > width) or np.any(n < 0):
            raise InputError("every cell needs 0 <= n_labels <= n_population (and the padding)")
        valid = np.arange(width)[None, :] < n[:, None]
        c = np.broadcast_to(np.asarray(bets, dtype=float).reshape(size.size, -1), x.shape)
        x = np.where(valid, x, 0.0)
        s_prev = np.cumsum(x, axis=1) - x
        a = c / np.maximum(size[:, None] - np.arange(width)[None, :], 1.0)
        errors_seen = x.sum(axis=1)
        return cls(
            cell=np.nonzero(valid)[0].astype(np.int64),
            a=a[valid],
            s_prev=s_prev[valid],
            group=np.asarray(group, dtype=np.int64).reshape(-1),
            base=np.sum(np.where(valid, np.log1p(-c * x), 0.0), axis=1),
            low=errors_seen,
            high=size - (n - errors_seen),
            n_groups=n_groups,
        )

    @classmethod
    def concat(cls, stacks: Sequence[LabelStack]) -> LabelStack:
        """The cells of several stacks of the same groups, in order (e.g. one stack per week)."""
        offsets = np.cumsum([0] + [s.n_cells for s in stacks[:-1]])
        return cls(
            cell=np.concatenate([s.cell + o for s, o in zip(stacks, offsets, strict=True)]),
            a=np.concatenate([s.a for s in stacks]),
            s_prev=np.concatenate([s.s_prev for s in stacks]),
            group=np.concatenate([s.group for s in stacks]),
            base=np.concatenate([s.base for s in stacks]),
            low=np.concatenate([s.low for s in stacks]),
            high=np.concatenate([s.high for s in stacks]),
            n_groups=max(s.n_groups for s in stacks),
        )

    def subset(self, groups: npt.NDArray[np.bool_]) -> tuple[LabelStack, IntArray]:
        """The stack of the groups marked, renumbered, and the cells it keeps."""
        keep_cell = groups[self.group]
        cells = np.flatnonzero(keep_cell)
        new_index = np.full(self.n_cells, -1, dtype=np.int64)
        new_index[cells] = np.arange(cells.size)
        new_group = np.full(self.n_groups, -1, dtype=np.int64)
        new_group[groups] = np.arange(int(groups.sum()))
        keep_label = keep_cell[self.cell]
        return LabelStack(
            cell=new_index[self.cell[keep_label]], a=self.a[keep_label],
            s_prev=self.s_prev[keep_label], group=new_group[self.group[cells]],
            base=self.base[cells], low=self.low[cells], high=self.high[cells],
            n_groups=int(groups.sum())), cells

    def per_cell(self, values: FloatArray) -> FloatArray:
        """Sum of a per-label array over each cell's labels."""
        return np.bincount(self.cell, weights=values, minlength=self.n_cells).astype(
            np.float64, copy=False)

    def per_group(self, values: FloatArray) -> FloatArray:
        """Sum of a per-cell array over each group's cells."""
        return np.bincount(self.group, weights=values, minlength=self.n_groups).astype(
            np.float64, copy=False)

    def per_group_min(self, values: FloatArray) -> FloatArray:
        out = np.full(self.n_groups, np.inf)
        np.minimum.at(out, self.group, values)
        return out

    def per_group_max(self, values: FloatArray) -> FloatArray:
        out = np.full(self.n_groups, -np.inf)
        np.maximum.at(out, self.group, values)
        return out

    def _inverse_gap(self, mass: FloatArray) -> FloatArray:
        """``1 / (1 - a_i (M_h - S_{i-1}))`` for every label at the cells' masses."""
        return np.asarray(1.0 / (1.0 - self.a * (mass[self.cell] - self.s_prev)),
                          dtype=np.float64)

    def slope(self, mass: FloatArray) -> FloatArray:
        """``l_h'(M_h)`` per cell."""
        return self.per_cell(self.a * self._inverse_gap(mass))

    def slope_and_curvature(self, mass: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``l_h'(M_h)`` and ``l_h''(M_h)`` per cell, in one pass."""
        term = self.a * self._inverse_gap(mass)
        return self.per_cell(term), self.per_cell(term * term)

    def value(self, mass: FloatArray) -> FloatArray:
        """``l_h(M_h)`` per cell."""
        return self.base + self.per_cell(np.log(self._inverse_gap(mass)))


def _newton_masses(stack: LabelStack, target: FloatArray,
                   mass: FloatArray) -> tuple[FloatArray, FloatArray]:
    """One Newton step of every cell's mass towards ``l_h'(M) = target``, clipped to its bounds.

    ``l_h'`` is convex and increasing, so from any point one step lands at or
    right of the root and the steps then fall monotonically onto it. Returns
    the new masses and ``1 / l_h''`` where a cell is strictly inside its
    bounds (0 elsewhere): how fast its mass moves with the multiplier.
    """
    slope, curv = stack.slope_and_curvature(mass)
    with np.errstate(divide="ignore", invalid="ignore"):
        step = np.where(curv > 0, (slope - target) / curv, 0.0)
    # A cell without bets costs nothing: it takes all the errors it may hold.
    new = np.where(curv > 0, np.clip(mass - step, stack.low, stack.high), stack.high)
    inside = (new > stack.low) & (new < stack.high) & (curv > 0)
    speed = np.where(inside, 1.0 / np.where(curv > 0, curv, 1.0), 0.0)
    return np.asarray(new, dtype=np.float64), np.asarray(speed, dtype=np.float64)


def _dual_bounds(stack: LabelStack, nu: FloatArray, mass: FloatArray,
                 budget: FloatArray) -> FloatArray:
    """Weak-duality lower bounds on each group's minimum at multipliers ``nu``.

    ``nu B + sum_h min_M (l_h(M) - nu M)``, each inner minimum bounded below
    by the tangent at ``mass`` (convexity), so every value is a lower bound
    on its group's constrained minimum whatever the accuracy of ``mass``.
    """
    target = nu[stack.group]
    phi = stack.value(mass) - target * mass
    grad = stack.slope(mass) - target
    inner = phi + np.minimum(grad * (stack.low - mass), grad * (stack.high - mass))
    return np.asarray(nu * budget + stack.per_group(inner), dtype=np.float64)


@dataclass(frozen=True)
class BatchEvidence:
    """:func:`least_evidence` per group: log evidence, multiplier, and each cell's null count.

    ``multiplier`` and ``null_errors`` warm-start the next look's solve.
    """

    log_evalue: FloatArray
    multiplier: FloatArray
    null_errors: FloatArray


def least_evidence(
    stack: LabelStack,
    budget: npt.ArrayLike,
    *,
    warm: BatchEvidence | None = None,
    iterations: int = 100,
) -> BatchEvidence:
    """``min sum_h l_h(M_h)`` over ``sum_h M_h = budget`` within each cell's bounds, per group.

    The water-filling solution: every cell strictly inside its bounds has the
    same slope ``l_h'(M_h) = nu``, its group's multiplier. ``nu`` is found by
    safeguarded Newton steps on ``log nu`` (the group's mass is continuous and
    non-decreasing in ``nu``; its derivative is ``sum_h 1 / l_h''``) inside a
    bisection bracket. The value returned is the dual bound at the ``nu``
    found: a lower bound on the minimum, equal to it at convergence.
    ``warm`` (an earlier solve of the same cells, possibly with fewer labels
    in some) starts the search near the answer.
    """
    need = np.asarray(budget, dtype=float).reshape(-1)
    low_total, high_total = stack.per_group(stack.low), stack.per_group(stack.high)
    betting = stack.per_cell(stack.a) > 0  # cells whose labels carry a bet
    lo = stack.per_group_min(np.where(betting, stack.slope(stack.low), np.inf))
    hi = stack.per_group_max(np.where(betting, stack.slope(stack.high), -np.inf))
    lo, hi = np.where(np.isfinite(lo), lo, 1.0), np.where(np.isfinite(hi), hi, 1.0)
    log_lo, log_hi = np.log(np.maximum(lo, 1e-300)) - 1e-9, np.log(np.maximum(hi, 1e-300)) + 1e-9
    if warm is not None and warm.multiplier.size == need.size:
        log_nu = np.clip(np.log(np.where(np.isfinite(warm.multiplier) & (warm.multiplier > 0),
                                         warm.multiplier, np.exp(0.5 * (log_lo + log_hi)))),
                         log_lo, log_hi)
        mass = warm.null_errors if warm.null_errors.size == stack.n_cells else stack.high.copy()
    else:
        log_nu = 0.5 * (log_lo + log_hi)
        mass = stack.high.copy()
    open_ = (need > low_total) & (need < high_total)
    # Newton on each group's log multiplier inside a bisection bracket, the
    # cells' masses following by Newton steps (one pass over the labels each).
    # After a step a cell's mass is at or above its root, so a group short of
    # its budget is short for sure (raise the bracket's floor); only a group
    # whose masses have settled may lower the ceiling.
    for _ in range(iterations):
        target = np.exp(log_nu)[stack.group]
        previous = mass
        mass, speed = _newton_masses(stack, target, mass)
        moved = stack.per_group_max(np.abs(mass - previous) / np.maximum(1.0, stack.high))
        gap = need - stack.per_group(mass)
        rate = stack.per_group(speed) * np.exp(log_nu)  # d mass / d log nu
        # The dual value lost by stopping here is about gap^2 / (2 d mass / d nu).
        with np.errstate(divide="ignore", invalid="ignore"):
            loss = np.where(rate > 0, 0.5 * gap**2 * np.exp(log_nu) / rate, np.abs(gap))
        still = moved > 1e-4
        settled = ~open_ | ((loss < 1e-6) & ~still)
        if np.all(settled):
            break
        if settled.mean() > 0.8 and stack.n_groups > 8:
            # Most groups are done: finish the rest on their own labels only.
            rest = ~settled
            sub, cells = stack.subset(rest)
            inner = least_evidence(sub, need[rest], warm=BatchEvidence(
                np.zeros(int(rest.sum())), np.exp(log_nu[rest]), mass[cells]),
                iterations=iterations)
            mass = mass.copy()
            mass[cells] = inner.null_errors
            log_nu = log_nu.copy()
            log_nu[rest] = np.log(inner.multiplier)
            break
        log_lo = np.where(gap > 0, log_nu, log_lo)
        log_hi = np.where((gap < 0) & ~still, log_nu, log_hi)
        with np.errstate(divide="ignore", invalid="ignore"):
            newton = log_nu + gap / rate
        # A Newton step landing at the bracket's edge would crawl along a kink
        # (a cell reaching its bound): bisect instead.
        margin = 0.05 * (log_hi - log_lo)
        inside = np.isfinite(newton) & (newton > log_lo + margin) & (newton < log_hi - margin)
        step = np.where(inside, newton, 0.5 * (log_lo + log_hi))
        # While the masses still move, keep the multiplier (they catch up first).
        log_nu = np.where(settled | (still & (gap <= 0)), log_nu, step)
    for _ in range(3):  # settle the masses at the final multiplier: a tight dual bound
        mass, _ = _newton_masses(stack, np.exp(log_nu)[stack.group], mass)
    nu = np.exp(log_nu)
    value = _dual_bounds(stack, nu, mass, need)
    value = np.where(need >= high_total, np.inf, np.where(need <= low_total, -np.inf, value))
    return BatchEvidence(value, nu, mass)


def stratified_evalue(
    cells: Sequence[CellLabels],
    *,
    max_error: float,
    unaccounted: float = 0.0,
    warm: StratifiedEvalue | None = None,
) -> StratifiedEvalue:
    """Evidence that the error rate of the cells' population is below ``max_error``.

    The population is every item of ``cells`` plus ``unaccounted`` items no
    cell accounts for (uncovered weeks, rows that arrived after the draw,
    cells without labels), which count as errors. The null "error rate at
    least ``max_error``" is rejected, anytime-valid at level ``delta``, when
    ``log_evalue >= log(1 / delta)``.

    Parameters
    ----------
    cells
        The cells above the threshold (:class:`CellLabels`); cells without
        labels may be passed (their items can all be wrong).
    max_error
        The error rate the population must stay below (``1 - target``, or
        less once reviewer misses and week-to-week variation are allowed for).
    unaccounted
        Items of the population outside every cell, counted as errors.
    warm
        The evidence of the same cells at another ``max_error``: the solve starts
        near it (a search over ``max_error`` makes many such calls).

    References
    ----------
    Waudby-Smith & Ramdas (2020), NeurIPS 33 (betting without replacement);
    Spertus & Stark (2022), arXiv 2207.03379 (stratified intersection tests).
    """
    budget = _null_budget(cells, max_error, unaccounted)
    if budget is None:
        return StratifiedEvalue(-math.inf, np.zeros(len(cells)), 0.0)
    start = None if warm is None else BatchEvidence(
        np.array([warm.log_evalue]), np.array([warm.multiplier]), warm.null_errors)
    result = least_evidence(LabelStack.from_cells(cells), [budget], warm=start)
    return StratifiedEvalue(float(result.log_evalue[0]), result.null_errors,
                            float(result.multiplier[0]))


def _null_budget(cells: Sequence[CellLabels], max_error: float,
                 unaccounted: float) -> float | None:
    """Errors the cells may hold on the null's boundary (``max_error`` of the whole
    population, less the unaccounted items, errors all), or None for an empty population."""
    if not 0.0 <= max_error <= 1.0:
        raise InputError(f"max_error {max_error!r} is outside [0, 1]")
    if unaccounted < 0:
        raise InputError(f"unaccounted must be >= 0 items, got {unaccounted!r}")
    total = float(sum(c.n_population for c in cells)) + unaccounted
    if total <= 0 or not cells:
        return None
    return max_error * total - unaccounted


def stratified_log_evalues(
    groups: Sequence[tuple[Sequence[CellLabels], float, float]],
) -> FloatArray:
    """:func:`stratified_evalue`'s ``log_evalue`` for each ``(cells, max_error, unaccounted)``.

    One vectorised solve for all the groups (the thresholds a walk tests next,
    say): the same values as one call each, to the solver's tolerance, at
    about the cost of one call.
    """
    out = np.full(len(groups), -math.inf)
    solved: list[int] = []
    cells: list[CellLabels] = []
    members: list[int] = []
    budgets: list[float] = []
    for i, (group_cells, max_error, unaccounted) in enumerate(groups):
        budget = _null_budget(group_cells, max_error, unaccounted)
        if budget is None:
            continue
        members.extend([len(solved)] * len(group_cells))
        solved.append(i)
        cells.extend(group_cells)
        budgets.append(budget)
    if solved:
        result = least_evidence(LabelStack.from_cells(cells, members), budgets)
        out[solved] = result.log_evalue
    return out


def cell_log_evalue(cell: CellLabels, null_errors: float) -> float:
    """Evidence against "the cell holds at least ``null_errors`` errors": ``l_h(max(M, S_h))``.

    ``+inf`` when more errors than the unlabelled items can hold are asked for.
    """
    stack = LabelStack.from_cells([cell])
    if null_errors > stack.high[0] + 1e-9:
        return math.inf
    mass = np.array([max(float(null_errors), float(stack.low[0]))])
    return float(stack.value(mass)[0])
