"""The certification bound never contradicts the labels it thins away."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.design import (
    N_GRID,
    Blocks,
    Labels,
    error_bound,
    weighted_error_upper_bound,
)
from scipy.stats import beta


def _labels(correct: np.ndarray, weight: np.ndarray, cell: np.ndarray, u: np.ndarray) -> Labels:
    k = np.full(correct.size, 190, dtype=np.int64)  # every label at confidence 0.95
    return Labels(k=k, correct=correct.astype(float), weight=weight, cell=cell, u=u)


def test_equal_weights_give_clopper_pearson() -> None:
    correct = np.array([1] * 97 + [0] * 3)
    labels = _labels(correct, np.full(100, 7.0), np.zeros(100, dtype=np.int64), np.full(100, 0.5))
    bound = weighted_error_upper_bound(labels, np.ones(100, dtype=bool), delta=0.05)
    assert bound == pytest.approx(beta.ppf(0.95, 3 + 1, 100 - 3), abs=1e-12)


def test_a_lucky_thinning_cannot_certify_what_all_labels_refute() -> None:
    # Cell 0: 100 labels, all correct, inclusion 0.01. Cell 1: 100 labels with 40
    # errors, inclusion 1.0. Thinning keeps every cell-0 label and, by these
    # permanent numbers, only the correct cell-1 labels: 0 errors kept.
    hist = np.zeros((1, N_GRID), dtype=np.int64)
    hist[0, 190] = 10_000 + 100
    design = Blocks(
        block_hist=hist,
        cell_block=np.zeros(2, dtype=np.int64),
        cell_pi=np.array([0.01, 1.0]),
        cell_cap=np.array([10_000.0, 100.0]),
    )
    correct = np.array([1] * 100 + [0] * 40 + [1] * 60)
    cell = np.array([0] * 100 + [1] * 100)
    u = np.array([0.5] * 100 + [0.9] * 40 + [0.001] * 60)
    weight = np.array([100.0] * 100 + [1.0] * 100)
    labels = _labels(correct, weight, cell, u)

    bound = error_bound(design, labels, 190, delta=0.05)

    assert bound.kept_errors == 0
    assert bound.value >= weighted_error_upper_bound(labels, cell >= 0, delta=0.05)
    assert bound.kept_labels == 160
    assert bound.value > beta.ppf(0.95, 1, 160)  # what 0 errors in 160 kept labels allow
