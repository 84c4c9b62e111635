"""Reliability bins and calibration metrics against scikit-learn and hand computation."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.bins import reliability_bins
from fieldtrust.calibration.metrics import (
    brier_score,
    calibration_metrics,
    debiased_squared_calibration_error,
    expected_calibration_error,
)
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss

from fieldtrust.errors import InputError


def random_labels(seed: int, n: int = 500) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    c = rng.beta(5, 1.5, size=n)
    y = (rng.random(n) < c**1.5).astype(int)
    return c, y


@pytest.mark.parametrize("strategy", ["quantile", "uniform"])
@pytest.mark.parametrize("n_bins", [3, 10, 15])
@pytest.mark.parametrize("seed", range(4))
def test_unweighted_bins_equal_sklearn_calibration_curve(strategy, n_bins, seed) -> None:
    c, y = random_labels(seed)
    prob_true, prob_pred = calibration_curve(y, c, n_bins=n_bins, strategy=strategy)
    bins = reliability_bins(c, y, n_bins=n_bins, strategy=strategy).to_pandas()
    shown = bins[bins["n"] > 0]
    np.testing.assert_allclose(shown["accuracy"], prob_true, rtol=0, atol=1e-12)
    np.testing.assert_allclose(shown["mean_confidence"], prob_pred, rtol=0, atol=1e-12)
    assert bins["n"].sum() == c.size


def test_sklearn_docstring_example_of_stats_md() -> None:
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.65, 0.7, 0.8, 0.9, 1.0])
    bins = reliability_bins(p, y, n_bins=3, strategy="uniform").to_pandas()
    np.testing.assert_allclose(bins["accuracy"], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(bins["mean_confidence"], [0.2, 0.525, 0.85])
    assert bins["n"].tolist() == [3, 2, 4]


def test_bins_keep_empty_and_small_bins_and_flag_them() -> None:
    c = np.r_[np.full(40, 0.95), np.full(5, 0.15)]
    y = np.r_[np.ones(38), np.zeros(2), np.zeros(5)]
    bins = reliability_bins(c, y, n_bins=10, strategy="uniform").to_pandas()
    assert len(bins) == 10
    assert bins["n"].tolist() == [0, 5, 0, 0, 0, 0, 0, 0, 0, 40]
    assert bins["small"].tolist() == [True] * 9 + [False]
    assert np.isnan(bins.loc[0, "accuracy"])


def test_bin_interval_is_wilson_or_jeffreys_of_the_bin_counts() -> None:
    from fieldtrust.calibration.survey import jeffreys_interval, wilson_interval

    c, y = random_labels(7, n=300)
    for name, method in (("wilson", wilson_interval), ("jeffreys", jeffreys_interval)):
        bins = reliability_bins(c, y, n_bins=5, interval=name, level=0.9).to_pandas()
        ids = np.searchsorted(bins["upper"].to_numpy()[:-1], c)
        for b in range(5):
            k, n = int(y[ids == b].sum()), int((ids == b).sum())
            low, high = method(k, n, confidence=0.9)
            assert bins.loc[b, "accuracy_low"] == pytest.approx(low, abs=1e-12)
            assert bins.loc[b, "accuracy_high"] == pytest.approx(high, abs=1e-12)


def test_weighted_bins_use_weighted_means() -> None:
    c = np.array([0.91, 0.93, 0.92, 0.94])
    y = np.array([1, 0, 1, 1])
    w = np.array([1.0, 3.0, 1.0, 1.0])
    bins = reliability_bins(c, y, weight=w, n_bins=1).to_pandas()
    assert bins.loc[0, "accuracy"] == pytest.approx(3 / 6)
    assert bins.loc[0, "mean_confidence"] == pytest.approx((0.91 + 3 * 0.93 + 0.92 + 0.94) / 6)
    assert bins.loc[0, "weight"] == pytest.approx(6.0)


def test_ece_by_hand() -> None:
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.65, 0.7, 0.8, 0.9, 1.0])
    # Bins [0, 1/3]: acc 0 conf .2 (3); (1/3, 2/3]: .5 vs .525 (2); (2/3, 1]: 1 vs .85 (4).
    expected = (3 * 0.2 + 2 * 0.025 + 4 * 0.15) / 9
    assert expected_calibration_error(p, y, n_bins=3, strategy="uniform") == pytest.approx(expected)


def test_debiased_squared_error_by_hand() -> None:
    # Kumar et al.: sum_b (n_b / N) ((conf_b - acc_b)^2 - acc_b (1 - acc_b) / (n_b - 1)).
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.65, 0.7, 0.8, 0.9, 1.0])
    expected = (3 * (0.2**2 - 0) + 2 * (0.025**2 - 0.25 / 1) + 4 * (0.15**2 - 0)) / 9
    got = debiased_squared_calibration_error(p, y, n_bins=3, strategy="uniform")
    assert got == pytest.approx(expected)


def test_debiased_error_removes_the_plug_in_bias_on_calibrated_confidences() -> None:
    # Calibrated by construction: the squared error is 0. The plug-in estimate is
    # biased upwards by about sum_b acc_b (1 - acc_b) / N; the debiased one is not.
    plug_in, debiased = [], []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        c = rng.uniform(0.5, 1.0, 2000)
        y = (rng.random(c.size) < c).astype(int)
        bins = reliability_bins(c, y, n_bins=10).to_pandas()
        gap = (bins["mean_confidence"] - bins["accuracy"]) ** 2
        plug_in.append(float(np.sum(bins["n"] / c.size * gap)))
        debiased.append(debiased_squared_calibration_error(c, y, n_bins=10))
    spread = np.std(debiased) / np.sqrt(len(debiased))
    assert abs(np.mean(debiased)) < 3 * spread
    assert np.mean(plug_in) > np.mean(debiased) + 5 * spread


@pytest.mark.parametrize("weighted", [False, True])
def test_brier_equals_sklearn(weighted) -> None:
    c, y = random_labels(11)
    w = np.random.default_rng(1).uniform(1, 20, c.size) if weighted else None
    assert brier_score(c, y, weight=w) == pytest.approx(brier_score_loss(y, c, sample_weight=w))


def test_metrics_bundle_agrees_with_single_functions() -> None:
    c, y = random_labels(5)
    m = calibration_metrics(c, y, n_bins=8)
    assert m.ece == expected_calibration_error(c, y, n_bins=8)
    assert m.ece_debiased == debiased_squared_calibration_error(c, y, n_bins=8)
    assert m.brier == brier_score(c, y)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"confidence": [0.5, 1.2], "correct": [1, 0]}, r"row 1, confidence: 1\.2 is outside"),
        ({"confidence": [0.5, 0.6], "correct": [1, 2]}, r"row 1, correct: 2\.0 is not 0 or 1"),
        ({"confidence": [0.5], "correct": [1, 0]}, "confidence has 1 values but correct has 2"),
        ({"confidence": [0.5], "correct": [1], "weight": [0.0]}, r"row 0, weight: 0\.0"),
        ({"confidence": [0.5], "correct": [1], "strategy": "kmeans"}, "strategy 'kmeans'"),
        ({"confidence": [0.5], "correct": [1], "interval": "wald"}, "interval 'wald'"),
    ],
)
def test_bad_inputs_name_the_row_and_value(kwargs, message) -> None:
    with pytest.raises(InputError, match=message):
        reliability_bins(**kwargs)
