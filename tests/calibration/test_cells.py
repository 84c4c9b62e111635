"""Today's Blocks and Labels turned into the certificate's cells."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.bets import growth_bets
from fieldtrust.calibration.cells import threshold_cells
from fieldtrust.calibration.design import N_GRID, Blocks, Labels

from fieldtrust.errors import InputError


def _two_cells() -> tuple[Blocks, Labels, np.ndarray, np.ndarray]:
    # One week, one band (one block) split into two status cells; 30 late rows in the block.
    cell_hist = np.zeros((2, N_GRID), dtype=np.int64)
    cell_hist[0, 180], cell_hist[0, 195] = 600, 400
    cell_hist[1, 190] = 200
    block = cell_hist.sum(axis=0, keepdims=True)
    block[0, 199] += 30
    design = Blocks(block, np.array([0, 0]), np.array([0.05, 0.25]), np.array([1000.0, 200.0]))
    k = np.array([195, 180, 195, 190, 190, 180])
    correct = np.array([1.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    cell = np.array([0, 0, 0, 1, 1, -1])  # the last label is not usable for the bound
    labels = Labels(k, correct, np.ones(6), cell, np.zeros(6))
    rank = np.array([3, 1, 2, 0, 1, 0])
    return design, labels, cell_hist, rank


def test_cells_above_a_threshold_keep_prn_order_exact_sizes_and_the_rest() -> None:
    design, labels, cell_hist, rank = _two_cells()
    (at_190,) = threshold_cells(design, labels, [190], cell_hist=cell_hist, prn_rank=rank,
                                planned_pi=np.array([0.05, 0.25]), cell_week=np.array([0, 0]),
                                prior_error=0.03, target=0.95)
    first, second = at_190.cells
    assert first.n_population == 400 and second.n_population == 200
    np.testing.assert_array_equal(first.errors, [1.0, 0.0])  # ranks 2 then 3, above 0.95
    np.testing.assert_array_equal(second.errors, [0.0, 1.0])
    assert at_190.unaccounted == 30  # the late rows above 0.95
    expected = growth_bets([400, 200], [0.05, 0.25], 0.03, max_error=0.05)
    np.testing.assert_allclose([first.bets[0], second.bets[0]], expected)
    (at_180,) = threshold_cells(design, labels, [180], cell_hist=cell_hist, prn_rank=rank,
                                planned_pi=np.array([0.05, 0.25]), cell_week=np.array([0, 0]),
                                prior_error=0.03, target=0.95)
    np.testing.assert_array_equal(at_180.cells[0].errors, [0.0, 1.0, 0.0])  # ranks 1, 2, 3


def test_inconsistent_counts_are_refused() -> None:
    design, labels, cell_hist, rank = _two_cells()
    with pytest.raises(InputError, match="add up to its size"):
        threshold_cells(design, labels, [190], cell_hist=cell_hist * 2, prn_rank=rank,
                        planned_pi=np.array([0.05, 0.25]), cell_week=np.array([0, 0]),
                        prior_error=0.03, target=0.95)
