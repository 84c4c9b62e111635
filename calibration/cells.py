"""Today's design arrays as the cells of the anytime-valid certificate.

:class:`~fieldtrust.calibration.design.Blocks` and
:class:`~fieldtrust.calibration.design.Labels` (what
:mod:`fieldtrust.calibration.population` builds from the store) plus three
things the store knows and the thinning bound did not need:

* ``cell_hist``: each cell's population per grid index at drawing time (the
  design only knew each block's), so ``N_h(t)`` is exact;
* ``prn_rank``: each label's position in its cell's sample (the draw's
  permanent random number order), so a cell's labels above ``t`` are its
  prefix in that order;
* ``planned_pi`` and ``cell_week``: the planned inclusion probability (sample
  size over cell size at drawing, not the labelled prefix) and the week of
  each cell, which fix the bets when the week closes.

The labels must count an "unclear" verdict as an error (``correct = 0``):
for automation an unreadable source is not a pass (STATS.md section 14).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray, IntArray
from fieldtrust.calibration.bets import DEFAULT_MAX_BET, growth_bets
from fieldtrust.calibration.betting import CellLabels
from fieldtrust.calibration.certificate import ThresholdCells
from fieldtrust.calibration.design import GRID, N_GRID, Blocks, Labels

from fieldtrust.errors import InputError


def _check(design: Blocks, labels: Labels, cell_hist: IntArray, prn_rank: IntArray,
           planned_pi: FloatArray, cell_week: IntArray) -> None:
    n_cells = design.cell_pi.size
    if cell_hist.shape != (n_cells, N_GRID):
        raise InputError(f"cell_hist must have shape ({n_cells}, {N_GRID}), got {cell_hist.shape}")
    if prn_rank.shape != labels.k.shape:
        raise InputError("prn_rank needs one entry per label")
    if planned_pi.shape != (n_cells,) or cell_week.shape != (n_cells,):
        raise InputError("planned_pi and cell_week need one entry per design cell")
    caps = design.cell_cap
    known = np.isfinite(caps)
    if np.any(cell_hist.sum(axis=1)[known] != caps[known]):
        raise InputError("each cell's histogram must add up to its size at drawing (cell_cap)")


def threshold_cells(
    design: Blocks,
    labels: Labels,
    ks: Sequence[int],
    *,
    cell_hist: npt.ArrayLike,
    prn_rank: npt.ArrayLike,
    planned_pi: npt.ArrayLike,
    cell_week: npt.ArrayLike,
    prior_error: float | npt.ArrayLike,
    target: float,
    max_bet: float = DEFAULT_MAX_BET,
) -> list[ThresholdCells]:
    """The cells above each grid index in ``ks`` (high to low), ready for the walk.

    For each threshold ``t = k / 200``: each design cell's items above ``t``
    (``N_h(t)`` from ``cell_hist``) and its usable labels above ``t`` in PRN
    order (``labels.cell >= 0``, sorted by ``prn_rank``); bets by
    :func:`~fieldtrust.calibration.bets.growth_bets` per week, at the
    policy's ``1 - target``; and ``unaccounted`` the block population above
    ``t`` that no cell accounts for (uncovered weeks, rows that arrived after
    the draw, confidences no band covers), counted as errors.

    ``prior_error`` is one rate, or one per cell (a band's rate from earlier weeks).
    """
    hist = np.asarray(cell_hist, dtype=np.int64)
    rank = np.asarray(prn_rank, dtype=np.int64)
    pi = np.asarray(planned_pi, dtype=float)
    week = np.asarray(cell_week, dtype=np.int64)
    _check(design, labels, hist, rank, pi, week)
    n_cells = pi.size
    prior = np.broadcast_to(np.asarray(prior_error, dtype=float), (n_cells,))
    suffix = np.cumsum(hist[:, ::-1], axis=1)[:, ::-1]
    # The usable labels sorted by cell, then PRN: cell h's are one slice of them.
    order = np.lexsort((rank, labels.cell))
    order = order[labels.cell[order] >= 0]
    label_k, label_error = labels.k[order], 1.0 - labels.correct[order]
    bounds = np.searchsorted(labels.cell[order], np.arange(n_cells + 1))
    weekly = _WeekGrid(week)
    out = []
    for k in ks:
        if not 0 <= k < N_GRID:
            raise InputError(f"grid index {k} is outside 0..{N_GRID - 1}")
        n_above = suffix[:, k]
        # Each week's cells share one growth-optimal solve; every week is a row of one call.
        bets = weekly.cells(growth_bets(
            weekly.rows(n_above), weekly.rows(pi), weekly.rows(prior), max_error=1.0 - target,
            max_bet=max_bet)) if n_cells else np.zeros(0)
        above = label_k >= k
        cells = tuple(
            CellLabels.checked_already(int(n_above[c]), label_error[lo:hi][above[lo:hi]],
                                       float(bets[c]))
            for c, (lo, hi) in enumerate(itertools.pairwise(bounds)))
        per_block = np.bincount(design.cell_block, weights=n_above,
                                minlength=design.block_hist.shape[0])
        unaccounted = float(np.maximum(design.suffix[:, k] - per_block, 0).sum())
        out.append(ThresholdCells(k / GRID, cells, unaccounted))
    return out


class _WeekGrid:
    """Cells laid out one week per row (padded with empty cells), and back."""

    def __init__(self, week: IntArray) -> None:
        _, self._row = np.unique(week, return_inverse=True)
        self._shape = (int(self._row.max()) + 1 if week.size else 0,
                       int(np.bincount(self._row).max()) if week.size else 0)
        # A cell's place in its week's row: how many cells of the week come before it.
        order = np.argsort(self._row, kind="stable")
        starts = np.searchsorted(self._row[order], self._row[order])
        self._col = np.empty(week.size, dtype=np.int64)
        self._col[order] = np.arange(week.size) - starts

    def rows(self, values: FloatArray | IntArray) -> FloatArray:
        """Per-cell ``values`` as a (weeks, cells) matrix; padding is 0 (an empty cell)."""
        grid = np.zeros(self._shape)
        grid[self._row, self._col] = values
        return grid

    def cells(self, grid: FloatArray) -> FloatArray:
        """The per-cell values of a (weeks, cells) matrix."""
        return np.asarray(grid[self._row, self._col], dtype=np.float64)
