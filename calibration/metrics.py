"""Calibration error and Brier score, design-weighted when weights are given."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray
from fieldtrust.calibration.bins import BinStats, bin_stats, check_inputs


@dataclass(frozen=True)
class CalibrationMetrics:
    """Summary of how stated confidence matches accuracy on one set of labels."""

    ece: float
    ece_debiased: float
    brier: float


def ece_from_bins(stats: BinStats) -> float:
    """``sum_b (n_b / N) |acc_b - conf_b|`` with weighted counts (STATS.md section 4)."""
    total = stats.weight.sum()
    if total <= 0:
        return float("nan")
    used = stats.count > 0
    gaps = np.abs(stats.accuracy[used] - stats.confidence[used])
    return float(np.sum(stats.weight[used] / total * gaps))


def debiased_squared_ce_from_bins(stats: BinStats) -> float:
    """Kumar et al.'s debiased estimate of the squared calibration error.

    ``sum_b (n_b / N) ((conf_b - acc_b)^2 - acc_b (1 - acc_b) / (n_b - 1))``.
    Bins with fewer than two labels contribute nothing (as the reference
    package does); with weights ``n_b`` in the variance term is Kish's
    effective size. The estimate can fall slightly below zero when the
    confidences are close to calibrated.
    """
    total = stats.weight.sum()
    if total <= 0:
        return float("nan")
    n_eff = stats.effective_count
    used = (stats.count >= 2) & (n_eff > 1)
    acc = stats.accuracy[used]
    term = (stats.confidence[used] - acc) ** 2 - acc * (1 - acc) / (n_eff[used] - 1)
    return float(np.sum(stats.weight[used] / total * term))


def expected_calibration_error(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
) -> float:
    """Expected calibration error over reliability bins, in [0, 1].

    Parameters
    ----------
    confidence, correct, weight, n_bins, strategy
        As in :func:`fieldtrust.calibration.bins.reliability_bins`.

    References
    ----------
    Naeini, Cooper & Hauskrecht (2015), AAAI; Guo et al. (2017), ICML,
    section 2. STATS.md section 4.
    """
    stats = bin_stats(confidence, correct, weight=weight, n_bins=n_bins, strategy=strategy)
    return ece_from_bins(stats)


def debiased_squared_calibration_error(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
) -> float:
    """Debiased squared calibration error (plug-in l2 error minus its bias).

    References
    ----------
    Kumar, Liang & Ma (2019), "Verified Uncertainty Calibration", NeurIPS,
    section 5; package ``uncertainty-calibration``, ``unbiased_square_ce``.
    """
    stats = bin_stats(confidence, correct, weight=weight, n_bins=n_bins, strategy=strategy)
    return debiased_squared_ce_from_bins(stats)


def brier_score(
    confidence: npt.ArrayLike, correct: npt.ArrayLike, *, weight: npt.ArrayLike | None = None
) -> float:
    """Weighted mean of ``(confidence - correct)^2``; NaN without labels.

    Equals ``sklearn.metrics.brier_score_loss(correct, confidence,
    sample_weight=weight)``.

    References
    ----------
    Brier (1950), Monthly Weather Review 78:1.
    """
    c, y, w = check_inputs(confidence, correct, weight)
    if c.size == 0:
        return float("nan")
    return _brier(c, y, w)


def _brier(c: FloatArray, y: FloatArray, w: FloatArray) -> float:
    """The Brier score of checked, non-empty arrays (the bootstrap skips checking each resample)."""
    return float(np.sum(w * (c - y) ** 2) / np.sum(w))


def calibration_metrics(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
) -> CalibrationMetrics:
    """ECE, debiased squared ECE and Brier score from one binning."""
    stats = bin_stats(confidence, correct, weight=weight, n_bins=n_bins, strategy=strategy)
    return CalibrationMetrics(
        ece=ece_from_bins(stats),
        ece_debiased=debiased_squared_ce_from_bins(stats),
        brier=brier_score(confidence, correct, weight=weight),
    )


@dataclass(frozen=True)
class MetricIntervals:
    """Bootstrap intervals of the calibration metrics of one set of labels."""

    n_labels: int
    ece_low: float
    ece_high: float
    brier_low: float
    brier_high: float


def metric_intervals(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
    level: float = 0.95,
    n_resamples: int = 400,
    seed: int = 0,
) -> MetricIntervals:
    """Percentile bootstrap intervals for ECE and the Brier score.

    Labels are resampled with replacement, keeping their design weights, and
    the bins are made again in each resample (their edges are estimated
    too). ECE is biased upwards on few labels: its percentile range covered
    the true ECE in 0 of 200 simulated runs, so it is a spread of the
    plug-in estimate only and is never shown as an interval for the true
    calibration error (STATS.md section 11; the dashboard shows the Brier
    range and no ECE range). NaNs without labels.

    References
    ----------
    Efron & Tibshirani (1993), An Introduction to the Bootstrap, ch. 13;
    Kumar, Liang & Ma (2019), NeurIPS, on the bias of plug-in ECE.
    """
    c, y, w = check_inputs(confidence, correct, weight)
    if c.size == 0:
        return MetricIntervals(0, *([float("nan")] * 4))
    rng = np.random.default_rng(seed)
    ece = np.empty(n_resamples)
    brier = np.empty(n_resamples)
    for r in range(n_resamples):
        pick = rng.integers(0, c.size, c.size)
        stats = bin_stats(c[pick], y[pick], weight=w[pick], n_bins=n_bins, strategy=strategy)
        ece[r] = ece_from_bins(stats)
        brier[r] = _brier(c[pick], y[pick], w[pick])
    tail = 100 * (1 - level) / 2
    ece_low, ece_high = np.nanpercentile(ece, [tail, 100 - tail])
    brier_low, brier_high = np.percentile(brier, [tail, 100 - tail])
    return MetricIntervals(int(c.size), float(ece_low), float(ece_high), float(brier_low),
                           float(brier_high))
