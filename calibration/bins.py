"""Reliability bins: stated confidence against observed accuracy (STATS.md section 4).

Unweighted bins are exactly scikit-learn's ``calibration_curve`` (same edges,
same bin assignment); weighted bins apply design weights to every mean. Bin
edges never depend on the weights: equal-mass bins hold equal numbers of
labels, which keeps each bin's interval about equally wide.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from fieldtrust.calibration.arrays import FloatArray
from fieldtrust.calibration.survey import jeffreys_interval, wilson_interval

from fieldtrust.errors import InputError

STRATEGIES = ("quantile", "uniform")
INTERVALS = ("wilson", "jeffreys")
#: Bins with fewer labels than this are flagged ``small`` (shown greyed, never hidden).
SMALL_BIN = 30


@dataclass(frozen=True)
class BinStats:
    """Per-bin sums of one binning; the arrays all have length ``n_bins``."""

    edges: FloatArray
    count: npt.NDArray[np.int64]
    weight: FloatArray
    weight_sq: FloatArray
    confidence: FloatArray
    accuracy: FloatArray

    @property
    def effective_count(self) -> FloatArray:
        """Kish's effective sample size per bin (equals ``count`` for equal weights)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.weight_sq > 0, self.weight**2 / self.weight_sq, 0.0)


def check_inputs(
    confidence: npt.ArrayLike, correct: npt.ArrayLike, weight: npt.ArrayLike | None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Validated float arrays ``(confidence, correct, weight)``; weight defaults to ones."""
    c = np.asarray(confidence, dtype=float).ravel()
    y = np.asarray(correct, dtype=float).ravel()
    if c.shape != y.shape:
        raise InputError(
            f"confidence has {c.size} values but correct has {y.size}; pass one of each per label"
        )
    bad = np.flatnonzero(~((c >= 0) & (c <= 1)))
    if bad.size:
        raise InputError(
            f"row {bad[0]}, confidence: {float(c[bad[0]])!r} is outside [0, 1]"
        )
    bad = np.flatnonzero((y != 0) & (y != 1))
    if bad.size:
        raise InputError(f"row {bad[0]}, correct: {float(y[bad[0]])!r} is not 0 or 1")
    if weight is None:
        w = np.ones_like(c)
    else:
        w = np.asarray(weight, dtype=float).ravel()
        if w.shape != c.shape:
            raise InputError(
                f"weight has {w.size} values but confidence has {c.size}"
            )
        bad = np.flatnonzero(~(np.isfinite(w) & (w > 0)))
        if bad.size:
            raise InputError(
                f"row {bad[0]}, weight: {float(w[bad[0]])!r} is not a positive number"
                " (a weight is 1 / inclusion probability)"
            )
    return c, y, w


def bin_edges(confidence: FloatArray, *, n_bins: int, strategy: str) -> FloatArray:
    """Edges as scikit-learn's ``calibration_curve`` draws them."""
    if strategy not in STRATEGIES:
        raise InputError(
            f"strategy {strategy!r} is not one of {', '.join(STRATEGIES)}"
        )
    if n_bins < 1:
        raise InputError(f"n_bins must be at least 1, got {n_bins}")
    if strategy == "uniform":
        return np.linspace(0.0, 1.0, n_bins + 1)
    if confidence.size == 0:
        return np.linspace(0.0, 1.0, n_bins + 1)
    return np.asarray(np.percentile(confidence, np.linspace(0, 1, n_bins + 1) * 100), dtype=float)


def bin_stats(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
) -> BinStats:
    """Weighted sums per bin; the shared core of bins and calibration errors."""
    c, y, w = check_inputs(confidence, correct, weight)
    edges = bin_edges(c, n_bins=n_bins, strategy=strategy)
    # searchsorted on the inner edges, side "left": scikit-learn's assignment.
    ids = np.searchsorted(edges[1:-1], c)
    count = np.bincount(ids, minlength=n_bins).astype(np.int64)
    total_w = np.bincount(ids, weights=w, minlength=n_bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_c = np.bincount(ids, weights=w * c, minlength=n_bins) / total_w
        mean_y = np.bincount(ids, weights=w * y, minlength=n_bins) / total_w
    return BinStats(
        edges=edges,
        count=count,
        weight=total_w,
        weight_sq=np.bincount(ids, weights=w * w, minlength=n_bins).astype(float),
        confidence=np.where(count > 0, mean_c, np.nan),
        accuracy=np.where(count > 0, mean_y, np.nan),
    )


def reliability_bins(
    confidence: npt.ArrayLike,
    correct: npt.ArrayLike,
    *,
    weight: npt.ArrayLike | None = None,
    n_bins: int = 10,
    strategy: str = "quantile",
    interval: str = "wilson",
    level: float = 0.95,
) -> pa.Table:
    """Reliability table: per bin, labels, mean stated confidence, accuracy, interval.

    Parameters
    ----------
    confidence
        Stated confidence of each labelled extraction, in [0, 1].
    correct
        1 if the label says the extraction was right, else 0.
    weight
        Design weight of each label (``1 / inclusion probability``); ``None``
        weighs labels equally.
    n_bins
        Number of bins.
    strategy
        ``"quantile"`` (equal numbers of labels per bin, the default) or
        ``"uniform"`` (equal widths on [0, 1]).
    interval
        ``"wilson"`` or ``"jeffreys"``. With unequal weights the interval is
        taken at Kish's effective size ``(sum w)^2 / sum w^2``: approximate.
    level
        Two-sided confidence level of the interval.

    Returns
    -------
    pyarrow.Table
        One row per bin, empty bins included (``n = 0``, null means): ``bin``,
        ``lower``, ``upper`` (edges; a label equal to an inner edge falls in the
        lower bin), ``n``, ``weight``, ``mean_confidence``, ``accuracy``,
        ``accuracy_low``, ``accuracy_high``, ``small`` (fewer than 30 labels).
        Without weights, ``accuracy`` and ``mean_confidence`` of the non-empty
        bins equal ``sklearn.calibration.calibration_curve``.

    References
    ----------
    Niculescu-Mizil & Caruana (2005), ICML, section 4. Brown, Cai & DasGupta
    (2001) for the intervals. Kish (1965), Survey Sampling, section 8.2.
    """
    if interval not in INTERVALS:
        raise InputError(
            f"interval {interval!r} is not one of {', '.join(INTERVALS)}"
        )
    stats = bin_stats(confidence, correct, weight=weight, n_bins=n_bins, strategy=strategy)
    n_eff = stats.effective_count
    method = wilson_interval if interval == "wilson" else jeffreys_interval
    with np.errstate(invalid="ignore"):
        successes = np.clip(np.nan_to_num(stats.accuracy) * n_eff, 0.0, n_eff)
    low, high = method(successes, n_eff, confidence=level)
    frame = pd.DataFrame(
        {
            "bin": np.arange(n_bins),
            "lower": stats.edges[:-1],
            "upper": stats.edges[1:],
            "n": stats.count,
            "weight": stats.weight,
            "mean_confidence": stats.confidence,
            "accuracy": stats.accuracy,
            "accuracy_low": low,
            "accuracy_high": high,
            "small": stats.count < SMALL_BIN,
        }
    )
    return pa.Table.from_pandas(frame, preserve_index=False)
