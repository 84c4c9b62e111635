"""Bootstrap intervals of ECE and the Brier score (calibration.metrics.metric_intervals)."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.metrics import brier_score, expected_calibration_error, metric_intervals
from scipy import stats


def labels(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    confidence = rng.beta(6, 1.5, n)
    correct = (rng.random(n) < confidence - 0.08).astype(float)  # overconfident by 8 points
    return confidence, correct


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_brier_interval_agrees_with_scipys_percentile_bootstrap(seed: int) -> None:
    c, y = labels(600, seed)
    ours = metric_intervals(c, y, n_resamples=2000, seed=seed)
    theirs = stats.bootstrap(
        (c, y), lambda a, b: np.mean((a - b) ** 2), paired=True, vectorized=False,
        n_resamples=2000, method="percentile", random_state=seed,
    ).confidence_interval
    # Two independent Monte Carlo runs of the same bootstrap: ends agree to a few
    # per cent of the interval's width.
    width = theirs.high - theirs.low
    assert ours.brier_low == pytest.approx(theirs.low, abs=0.08 * width)
    assert ours.brier_high == pytest.approx(theirs.high, abs=0.08 * width)
    assert ours.n_labels == 600


def test_the_intervals_hold_the_estimates_and_narrow_with_more_labels() -> None:
    small = labels(200, 5)
    large = labels(5000, 5)
    few, many = metric_intervals(*small, seed=1), metric_intervals(*large, seed=1)
    for (c, y), band in ((small, few), (large, many)):
        assert band.ece_low <= expected_calibration_error(c, y) <= band.ece_high
        assert band.brier_low <= brier_score(c, y) <= band.brier_high
    assert many.ece_high - many.ece_low < (few.ece_high - few.ece_low) / 2
    assert many.ece_low > 0.04  # 8 points of overconfidence is seen, not an artefact


def test_design_weights_move_the_interval_and_the_seed_fixes_it() -> None:
    c, y = labels(800, 7)
    weight = np.where(c > 0.9, 10.0, 1.0)  # high confidence drawn at a tenth of the rate
    plain, weighted = metric_intervals(c, y, seed=3), metric_intervals(c, y, weight=weight, seed=3)
    assert weighted != plain
    assert metric_intervals(c, y, weight=weight, seed=3) == weighted
    assert weighted.brier_low <= brier_score(c, y, weight=weight) <= weighted.brier_high


def test_no_labels_give_no_interval() -> None:
    empty = metric_intervals([], [])
    assert empty.n_labels == 0 and np.isnan(empty.ece_low) and np.isnan(empty.brier_high)
