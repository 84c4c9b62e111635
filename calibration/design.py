"""Upper bounds on a stratum's error rate above a threshold, valid under the audit design.

Pure numpy: the store-facing code (:mod:`fieldtrust.calibration.population`) and the
simulations in the tests build the same two objects (:class:`Blocks` and
:class:`Labels`) and call the same function.

The population of a stratum is split into *blocks* whose size above any
threshold is known from the store (one audited week's confidence band, or
all unaudited weeks together). Inside a block, the audit design's *cells*
(form-version status x band, merged when they share an inclusion
probability) each hold a simple random sample of labels; a cell's size
above a threshold is known only up to its total (``cap``).

The bound at threshold ``t`` (STATS.md section 6, "combine per cell"):

1. Thin to one inclusion probability: ``pi_min`` is the lowest inclusion
   probability among the cells with population above ``t``; a label of a
   cell with probability ``pi`` is kept when its permanent random number is
   below ``pi_min / pi`` (never by its verdict). Every extraction above ``t``
   then had the same chance ``pi_min`` to be a kept label: the situation in
   which the exact Clopper-Pearson bound on the kept labels applies
   (Hoeffding 1956 makes it conservative for draws stratified by cell).
2. Extractions above ``t`` that no cell accounts for (rows that arrived after
   their week's sample was drawn, confidences outside every band) count as
   errors: with their worst-case share ``W_rest(t)`` the bound is
   ``W_rest(t) * 1 + (1 - W_rest(t)) * UCB(kept labels)``.

This is STATS.md's ``sum_h W_h(t) UCB_h`` with the cells pooled after
thinning instead of bounded one by one at ``delta / H``: with H around 40
week x band x status cells and a few dozen labels each, the per-cell
Bonferroni bound would certify nothing the audit budget can reach. When
every cell above ``t`` shares one inclusion probability and the population
is fully covered, nothing is thinned and the bound is exactly
Clopper-Pearson on the labels above ``t``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration import survey
from fieldtrust.calibration.arrays import FloatArray, IntArray

from fieldtrust.errors import InputError

#: Candidate thresholds live on this grid: ``t = k / GRID`` (STATS.md section 6, step 1).
GRID = 200
N_GRID = GRID + 1


def grid_index(confidence: npt.ArrayLike) -> IntArray:
    """Index ``k`` of the grid value at or below each confidence (``floor(c * 200)``).

    The tiny offset keeps values such as 0.285 (stored as 0.28499999...) on
    their own grid point; the store's SQL uses the same expression.
    """
    c = np.asarray(confidence, dtype=float)
    return np.minimum(np.floor(c * GRID + 1e-9), GRID).astype(np.int64)


@dataclass(frozen=True)
class Blocks:
    """The population of one stratum in blocks, and the audit cells inside them, as drawn.

    What every bound of this module is computed over (with the
    :class:`Labels`): not a sampling design to draw with, which is
    :class:`fieldtrust.sampling.design.Design`.

    Attributes
    ----------
    block_hist
        ``(B, 201)`` population counts per block and grid index.
    cell_block, cell_pi, cell_cap
        Per cell: its block, inclusion probability and population size at the
        time of drawing (``inf`` when unknown).
    """

    block_hist: IntArray
    cell_block: IntArray
    cell_pi: FloatArray
    cell_cap: FloatArray
    suffix: IntArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.block_hist.ndim != 2 or self.block_hist.shape[1] != N_GRID:
            raise InputError(
                f"block_hist must have shape (blocks, {N_GRID}), got {self.block_hist.shape}"
            )
        if np.any(self.cell_pi <= 0) or np.any(self.cell_pi > 1):
            raise InputError("every cell's inclusion probability must be in (0, 1]")
        # suffix[b, k] = population of block b with grid index >= k.
        suffix = np.zeros((self.block_hist.shape[0], N_GRID + 1), dtype=np.int64)
        suffix[:, :N_GRID] = np.cumsum(self.block_hist[:, ::-1], axis=1)[:, ::-1]
        object.__setattr__(self, "suffix", suffix)

    @property
    def population_hist(self) -> IntArray:
        """Population counts per grid index over all blocks."""
        return self.block_hist.sum(axis=0)  # type: ignore[no-any-return]

    @classmethod
    def simple_random_sample(cls, population_hist: npt.ArrayLike, n_labels: int) -> Blocks:
        """One block, one cell: labels drawn as a simple random sample of the stratum."""
        hist = np.asarray(population_hist, dtype=np.int64).reshape(1, N_GRID)
        total = int(hist.sum())
        pi = n_labels / total if total and n_labels else 1.0
        return cls(
            block_hist=hist,
            cell_block=np.zeros(1, dtype=np.int64),
            cell_pi=np.array([min(pi, 1.0)]),
            cell_cap=np.array([float(total)]),
        )


@dataclass(frozen=True)
class Labels:
    """The labels of one stratum as arrays, one entry per labelled extraction.

    ``cell`` is the design cell of each label (-1: not usable for the bound,
    e.g. an imported label in an audited week); ``u`` a permanent uniform
    number per label used for thinning; ``weight`` the design weight used by
    point estimates.
    """

    k: IntArray
    correct: FloatArray
    weight: FloatArray
    cell: IntArray
    u: FloatArray


@dataclass(frozen=True)
class Bound:
    """A one-sided bound on the error rate above one threshold, and how it was made."""

    value: float
    kept_labels: int  # labels the bound used after thinning
    kept_errors: int
    exact: bool  # Clopper-Pearson on every usable label above t, no thinning, no remainder


def kept_labels(design: Blocks, labels: Labels, k: int) -> npt.NDArray[np.bool_]:
    """Which labels the bound at grid index ``k`` uses: thinning to the lowest probability.

    Depends on the design, the label counts and each label's permanent
    random number only, never on a verdict, so a rule that skips candidates
    with too few kept labels keeps the procedure valid.
    """
    above_block = design.suffix[:, k]
    active = (above_block[design.cell_block] > 0) & (design.cell_cap > 0)
    usable = (labels.k >= k) & (labels.cell >= 0)
    if not active.any() or not usable.any():
        return np.zeros(labels.k.size, dtype=bool)
    usable &= active[np.maximum(labels.cell, 0)]
    pi_min = design.cell_pi[active].min()
    # u < pi_min / pi, multiplied out (the form kept_counts searches on).
    kept: npt.NDArray[np.bool_] = usable & (
        labels.u * design.cell_pi[np.maximum(labels.cell, 0)] < pi_min
    )
    return kept


def unlabelled_mass(design: Blocks, k: int) -> float:
    """Extractions above ``k`` that no design cell accounts for, at worst.

    A block's population beyond its cells' recorded sizes (rows that arrived
    after the sample was drawn, confidences no band covers) could sit
    anywhere in the block; at worst all of it is above ``k``.
    """
    caps = np.bincount(
        design.cell_block, weights=design.cell_cap, minlength=design.block_hist.shape[0]
    )
    rest = np.maximum(design.suffix[:, 0] - caps, 0.0)
    return float(np.minimum(rest, design.suffix[:, k]).sum())


@dataclass(frozen=True)
class Bounds:
    """:class:`Bound` at several grid indices, as arrays aligned with ``ks``."""

    ks: IntArray
    value: FloatArray
    kept_labels: IntArray
    kept_errors: IntArray
    exact: npt.NDArray[np.bool_]

    def at(self, i: int) -> Bound:
        """The bound at ``ks[i]``."""
        return Bound(float(self.value[i]), int(self.kept_labels[i]), int(self.kept_errors[i]),
                     bool(self.exact[i]))


def kept_counts(
    design: Blocks, labels: Labels, ks: npt.ArrayLike
) -> tuple[IntArray, IntArray]:
    """Labels and errors among them that :func:`kept_labels` keeps, at every index in ``ks``.

    The same rule as :func:`kept_labels`, for all indices at once in
    O(labels + grid): a label is kept over one run of indices. A cell is
    active up to the highest index its block's population reaches, so the
    lowest active probability ``pi_min`` only grows with the index; a label
    of probability ``pi`` is kept from the first index where
    ``u * pi < pi_min`` up to the lower of its own index and its cell's last
    active one. The threshold scan bounds up to 201 indices per stratum.
    """
    ks = np.asarray(ks, dtype=np.int64)
    grid = np.arange(N_GRID)
    reaches = design.suffix[:, :N_GRID] > 0  # (blocks, grid): population at or above k
    last_in_block = np.where(reaches.any(axis=1), N_GRID - 1 - np.argmax(reaches[:, ::-1], axis=1),
                             -1)
    last_active = np.where(design.cell_cap > 0, last_in_block[design.cell_block], -1)
    active = grid[None, :] <= last_active[:, None]  # (cells, grid)
    pi_min = np.where(active, design.cell_pi[:, None], np.inf).min(axis=0, initial=np.inf)

    usable = np.flatnonzero(labels.cell >= 0)
    cell = labels.cell[usable]
    # First index where u * pi < pi_min: pi_min never decreases along the grid.
    first = np.searchsorted(pi_min, labels.u[usable] * design.cell_pi[cell], side="right")
    last = np.minimum(labels.k[usable], last_active[cell])
    runs = first <= last
    start, stop = first[runs], last[runs] + 1

    def over_runs(weights: FloatArray) -> FloatArray:
        change = np.bincount(start, weights, minlength=N_GRID + 1)
        change -= np.bincount(stop, weights, minlength=N_GRID + 1)
        return np.asarray(np.cumsum(change)[:N_GRID], dtype=np.float64)

    n_kept = np.rint(over_runs(np.ones(start.size))).astype(np.int64)
    errors = np.rint(over_runs(1.0 - labels.correct[usable][runs])).astype(np.int64)
    return n_kept[ks], errors[ks]


@dataclass(frozen=True)
class _AboveSums:
    """Sums over the usable labels (``cell >= 0``) at or above each index in ``ks``."""

    weight: FloatArray
    weight_squared: FloatArray
    weighted_errors: FloatArray
    count: IntArray


def _above_sums(labels: Labels, ks: IntArray) -> _AboveSums:
    usable = labels.cell >= 0
    k = labels.k[usable]
    w = labels.weight[usable]

    def above(values: npt.ArrayLike | None) -> FloatArray:
        per_index = np.bincount(k, weights=values, minlength=N_GRID)
        suffix: FloatArray = np.cumsum(per_index[::-1])[::-1].astype(float)
        return suffix[ks]

    return _AboveSums(above(w), above(w * w), above(w * (1.0 - labels.correct[usable])),
                      above(None).astype(np.int64))


def _korn_graubard_upper(
    weight: npt.ArrayLike, weight_squared: npt.ArrayLike, weighted_errors: npt.ArrayLike,
    delta: float,
) -> FloatArray:
    """Korn-Graubard upper bound from a label set's weight sums; 1 where it holds no weight.

    The variance is Kish's, ``p (1 - p) / n_kish`` with ``n_kish = (sum w)^2 /
    sum w^2``, so the effective size is Kish's (never above the label count).
    """
    sw, sw2, swe = (np.asarray(x, dtype=float) for x in (weight, weight_squared, weighted_errors))
    with np.errstate(invalid="ignore", divide="ignore"):
        p_err = np.minimum(swe / sw, 1.0)
        n_kish = sw**2 / sw2
        variance = p_err * (1.0 - p_err) / n_kish
    bound = survey.korn_graubard_bound(
        np.nan_to_num(p_err), np.nan_to_num(variance), np.nan_to_num(n_kish),
        confidence=1.0 - delta, side="upper",
    )
    out: FloatArray = np.where((sw <= 0) | ~(p_err < 1.0), 1.0, bound)
    return out


def error_bounds(
    design: Blocks,
    labels: Labels,
    ks: npt.ArrayLike,
    *,
    delta: float,
    side: str = "upper",
) -> Bounds:
    """:func:`error_bound` at every grid index in ``ks``, in one vectorised pass."""
    if side not in ("upper", "lower"):
        raise InputError(f"side {side!r} is not 'upper' or 'lower'")
    ks = np.asarray(ks, dtype=np.int64).reshape(-1)
    above_block = design.suffix[:, ks]
    total = above_block.sum(axis=0).astype(float)
    n_kept, errors = kept_counts(design, labels, ks)
    sums = _above_sums(labels, ks)
    if side == "upper":
        covered = np.asarray(survey.error_upper_bound(errors, n_kept, delta=delta), dtype=float)
        # Thinning is valid over the draw, but one thinning of one sample can
        # keep a lucky subset (1 error in 108 kept labels while the 325 labels
        # above t held 46). So the bound is also never below the Korn-Graubard
        # bound on all labels above t: the larger of two valid upper bounds is
        # still valid, and it cannot contradict the weighted estimate.
        covered = np.maximum(covered, _korn_graubard_upper(
            sums.weight, sums.weight_squared, sums.weighted_errors, delta))
        rest_value = 1.0
    else:
        covered = np.asarray(survey.error_lower_bound(errors, n_kept, delta=delta), dtype=float)
        rest_value = 0.0
    caps = np.bincount(
        design.cell_block, weights=design.cell_cap, minlength=design.block_hist.shape[0]
    )
    rest_block = np.maximum(design.suffix[:, 0] - caps, 0.0)
    rest = np.minimum(rest_block[:, None], above_block).sum(axis=0)  # as unlabelled_mass
    with np.errstate(invalid="ignore", divide="ignore"):
        value = (rest * rest_value + (total - rest) * covered) / total
    empty = total <= 0
    return Bounds(
        ks=ks,
        value=np.where(empty, np.nan, value),
        kept_labels=np.where(empty, 0, n_kept),
        kept_errors=np.where(empty, 0, errors),
        exact=~empty & (rest == 0) & (n_kept == sums.count),
    )


def error_bound(
    design: Blocks,
    labels: Labels,
    k: int,
    *,
    delta: float,
    side: str = "upper",
) -> Bound:
    """A ``1 - delta`` bound on the population error rate among extractions at grid index >= ``k``.

    ``side="upper"`` bounds it from above (certification); ``"lower"`` from
    below (a week significantly below target). NaN when no extraction is
    above ``k``. Extractions no cell accounts for count as errors (upper) or
    as correct (lower); labels are thinned as :func:`kept_labels`, and an
    upper bound is never below the Korn-Graubard bound on every usable label
    above ``k`` (:func:`weighted_error_upper_bound`).

    References
    ----------
    Clopper & Pearson (1934); Hoeffding (1956), Ann. Math. Statist. 27:713;
    STATS.md section 6.
    """
    return error_bounds(design, labels, [k], delta=delta, side=side).at(0)


def weighted_error_upper_bound(
    labels: Labels, mask: npt.NDArray[np.bool_], *, delta: float
) -> float:
    """Korn-Graubard upper bound on the weighted error rate of the labels in ``mask``.

    Clopper-Pearson at Kish's effective size ``n_eff = (sum w)^2 / sum w^2``
    with ``n_eff * p_err`` errors (STATS.md section 3; approximate, as R's
    ``svyciprop(method = "beta")``). 1 when no label is in ``mask``.

    References
    ----------
    Korn & Graubard (1998), Survey Methodology 24:193; Kish (1965).
    """
    weight = labels.weight[mask]
    wrong = 1.0 - labels.correct[mask]
    return float(_korn_graubard_upper(weight.sum(), np.sum(weight**2), np.sum(weight * wrong),
                                      delta))
