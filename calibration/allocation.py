"""How a week's label budget is split over its sampling cells (STATS.md section 8).

``proportional``: ``n_h ~ N_h``. ``neyman``: ``n_h ~ N_h sqrt(p_h (1 - p_h))``
with ``p_h`` each cell's expected error rate (its confidence band's, from
earlier weeks or the stated confidence), which minimises the variance of the
stratified error rate for a given budget. Both keep a floor per cell (every
band is audited, the items the machine is sure of included) and never ask
more of a cell than it holds. Pure functions of counts and priors: the
draw (``fieldtrust.sampling``) applies them.

References
----------
Neyman (1934), JRSS 97:558. Cochran (1977), Sampling Techniques, 3rd ed.,
section 5.5.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray, IntArray

from fieldtrust.errors import InputError

ALLOCATIONS = ("proportional", "neyman")


def _round_to_budget(share: FloatArray, budget: int, cap: IntArray, floor: IntArray) -> IntArray:
    """Integer sizes within ``[floor, cap]`` summing to ``budget``: largest remainders."""
    base = np.clip(np.floor(share), floor, cap).astype(np.int64)
    remainder = share - np.floor(share)
    left = budget - int(base.sum())
    for i in np.argsort(-remainder, kind="stable"):
        if left <= 0:
            break
        if base[i] < cap[i]:
            base[i] += 1
            left -= 1
    return base


def allocate(
    n_population: npt.ArrayLike,
    budget: int,
    *,
    allocation: str = "proportional",
    expected_error: npt.ArrayLike | None = None,
    floor: int = 0,
) -> IntArray:
    """Sample sizes per cell for a week's ``budget`` of labels.

    Parameters
    ----------
    n_population
        Items per cell this week.
    budget
        Labels to spend this week (at most the week's items).
    allocation
        ``"proportional"`` or ``"neyman"``.
    expected_error
        Per cell, the error rate expected (Neyman only); a rate of 0 is
        raised to 0.5% so a clean band is still sampled beyond its floor.
    floor
        Least labels per cell (all its items if it holds fewer).

    References
    ----------
    Neyman (1934); Cochran (1977), section 5.5 (allocation with bounds).
    """
    size = np.asarray(n_population, dtype=np.int64).reshape(-1)
    if allocation not in ALLOCATIONS:
        raise InputError(f"allocation {allocation!r} is not one of {', '.join(ALLOCATIONS)}")
    if budget < 0 or floor < 0:
        raise InputError("budget and floor must be >= 0")
    if allocation == "neyman":
        if expected_error is None:
            raise InputError("neyman allocation needs expected_error per cell")
        p = np.clip(np.asarray(expected_error, dtype=float).reshape(-1), 0.005, 0.5)
        weight = size * np.sqrt(p * (1 - p))
    else:
        weight = size.astype(float)
    low = np.minimum(size, floor)
    budget = min(int(budget), int(size.sum()))
    if budget <= int(low.sum()):
        return _round_to_budget(low.astype(float) * budget / max(int(low.sum()), 1), budget,
                                low, np.zeros_like(low))
    fixed = np.zeros(size.size, dtype=bool)
    sizes = low.astype(float)
    for _ in range(size.size + 1):
        free = ~fixed
        room = budget - sizes[fixed].sum()
        total_weight = weight[free].sum()
        share = np.where(free, room * weight / total_weight if total_weight > 0 else 0.0, sizes)
        below = free & (share < low)
        above = free & (share > size)
        if not below.any() and not above.any():
            sizes = share
            break
        sizes = np.where(below, low, np.where(above, size, sizes))
        fixed |= below | above
    return _round_to_budget(sizes, budget, size, low)
