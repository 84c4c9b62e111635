"""How many items each cell gets: the rate rule and Neyman allocation (STATS.md section 8).

Pure functions on per-cell arrays; :mod:`fieldtrust.sampling.cells` feeds them counts
from the store, and :func:`cell_sizes` applies a design's ``allocation``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray, IntArray
from fieldtrust.sampling.design import Design

from fieldtrust.errors import InputError

#: Pseudo-labels of the prior error rate mixed into a band's past error rate
#: before it sets a Neyman weight: a band with 3 labels, all correct, should not
#: get a weight of zero.
PRIOR_STRENGTH = 20.0


def rate_allocation(
    n_population: IntArray, new_version: npt.NDArray[np.bool_], design: Design
) -> IntArray:
    """``n_h = min(N_h, cap, max(minimum, ceil(rate_h * N_h)))``, rate boosted for new versions.

    Parameters
    ----------
    n_population
        Items per cell, ``N_h``.
    new_version
        Whether each cell holds a new form version (rate ``base_rate * boost``).
    design
        The design giving the rates, minimum and cap.
    """
    population = np.asarray(n_population, dtype=np.int64)
    rate = np.where(new_version, design.rate(new_version=True), design.rate(new_version=False))
    # Round first: 0.01 * 300 is 3.0000000000000004 in floating point, not 4 items.
    by_rate = np.ceil(np.round(rate * population, 9)).astype(np.int64)
    size = np.maximum(by_rate, design.minimum)
    if design.cap is not None:
        size = np.minimum(size, design.cap)
    return np.minimum(size, population)


def cell_sizes(
    n_population: IntArray,
    new_version: npt.NDArray[np.bool_],
    design: Design,
    error_rate: FloatArray | None = None,
) -> IntArray:
    """``n_h`` of every cell: the design's budget (or the rate rule's total), by its allocation.

    Proportional without a budget is the rate rule itself. Otherwise the
    labels to spend are the budget, or without one what the rate rule would
    take (so ``allocation = "neyman"`` moves labels between cells and never
    adds any), spread by :func:`neyman_allocation` over weights ``N_h``
    (proportional) or ``N_h sqrt(p_h (1 - p_h))`` (Neyman, ``error_rate`` per
    cell), boosted for new versions, keeping each cell's minimum and cap.
    """
    rule = design.allocation_rule
    if rule == "proportional" and design.budget is None:
        return rate_allocation(n_population, new_version, design)
    population = np.asarray(n_population, dtype=np.int64)
    if design.budget is not None:
        budget = design.budget
    else:
        budget = int(rate_allocation(population, new_version, design).sum())
    if rule == "neyman":
        if error_rate is None:
            raise InputError("Neyman allocation needs each cell's expected error rate")
        weights = neyman_weights(population, error_rate, new_version, design.boost)
    else:
        weights = np.where(new_version, population * design.boost, population).astype(np.float64)
    return neyman_allocation(
        population, weights, budget=budget, minimum=design.minimum, cap=design.cap
    )


def neyman_weights(
    n_population: IntArray, error_rate: FloatArray, new_version: npt.NDArray[np.bool_], boost: float
) -> FloatArray:
    """Neyman weights ``N_h * sqrt(p_h (1 - p_h))``, times ``boost`` for new versions.

    Neyman (1934): for a fixed total, ``n_h`` proportional to ``N_h S_h``
    minimises the variance of the stratified mean; for a proportion
    ``S_h = sqrt(p_h (1 - p_h))`` (Cochran, Sampling Techniques, 5.5). The boost
    deliberately departs from the optimum to measure new form versions better.
    """
    p = np.asarray(error_rate, dtype=np.float64)
    weights = np.asarray(n_population, dtype=np.float64) * np.sqrt(p * (1.0 - p))
    return np.where(new_version, weights * boost, weights)


def smoothed_error_rate(errors: FloatArray, labels: FloatArray, prior: float) -> FloatArray:
    """A band's past error rate, shrunk towards ``prior`` by :data:`PRIOR_STRENGTH` labels."""
    return (np.asarray(errors) + PRIOR_STRENGTH * prior) / (np.asarray(labels) + PRIOR_STRENGTH)


def neyman_allocation(
    n_population: IntArray,
    weights: FloatArray,
    *,
    budget: int,
    minimum: int,
    cap: int | None = None,
) -> IntArray:
    """Spread ``budget`` labels over cells in proportion to ``weights``, keeping the minimums.

    Each cell gets ``clip(lambda * w_h, lo_h, hi_h)`` with ``lo_h = min(N_h, minimum)``,
    ``hi_h = min(N_h, cap)`` and ``lambda`` chosen so the sizes add up to the
    budget (water-filling); sizes are rounded down and the labels left over go
    to the largest fractional parts, so the total is exactly the budget. When
    the minimums alone exceed the budget every cell gets its minimum (the
    caller reports the overrun); when even the upper limits fall short of it,
    every cell gets its upper limit.
    """
    population = np.asarray(n_population, dtype=np.int64)
    w = np.asarray(weights, dtype=np.float64)
    if not (w > 0).any():  # nothing to go by: allocate in proportion to size
        w = population.astype(np.float64)
    lo = np.minimum(population, minimum)
    hi = population if cap is None else np.minimum(population, cap)
    if lo.sum() >= budget:
        return lo
    if hi.sum() <= budget:
        return hi
    continuous = _water_fill(w, lo.astype(np.float64), hi.astype(np.float64), float(budget))
    size = np.clip(np.floor(continuous + 1e-9).astype(np.int64), lo, hi)
    left = budget - int(size.sum())
    if left > 0:
        room = size < hi
        fraction = np.where(room, continuous - size, -np.inf)
        # A stable sort: equal fractions go to the earlier cell, so the result is reproducible.
        order = np.argsort(-fraction, kind="stable")[:left]
        size[order] += 1
    return size


def _water_fill(weights: FloatArray, lo: FloatArray, hi: FloatArray, budget: float) -> FloatArray:
    """``clip(lambda * w, lo, hi)`` with ``lambda`` found by bisection so the sum is ``budget``."""
    positive = weights > 0
    top = float(np.max(hi[positive] / weights[positive])) if positive.any() else 1.0
    low, high = 0.0, top
    for _ in range(200):  # halves the bracket each time: far below a label after 200 steps
        middle = (low + high) / 2
        if np.clip(middle * weights, lo, hi).sum() < budget:
            low = middle
        else:
            high = middle
    return np.asarray(np.clip(high * weights, lo, hi), dtype=np.float64)
