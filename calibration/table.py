"""The calibration table: per (doc_type, field), accuracy next to stated confidence.

Accuracy is the design-weighted (Hajek) ratio of the labels; its variance is
the Taylor-linearised stratified variance with the audit's cells (labels
grouped by week and inclusion probability), its interval Korn-Graubard.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from fieldtrust.calibration import survey
from fieldtrust.calibration.bins import reliability_bins
from fieldtrust.calibration.metrics import calibration_metrics
from fieldtrust.calibration.population import StratumData, load_strata
from fieldtrust.store.scope import Scope


@dataclass(frozen=True)
class WeightedAccuracy:
    """A design-weighted accuracy with its variance and interval."""

    accuracy: float
    variance: float
    low: float
    high: float
    n_labeled: int


@dataclass(frozen=True)
class StratumTable:
    """One row of the calibration table."""

    doc_type: str
    field: str
    n_population: int
    n_labeled: int
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    accuracy_variance: float
    mean_confidence: float  # over the whole population of the stratum
    ece: float
    ece_debiased: float
    brier: float


#: Column types of :func:`calibration_table` (kept when no stratum has extractions).
_TABLE_SCHEMA = pa.schema(
    [("doc_type", pa.string()), ("field", pa.string()), ("n_population", pa.int64()),
     ("n_labeled", pa.int64())]
    + [(name, pa.float64()) for name in list(StratumTable.__dataclass_fields__)[4:]]
)


def weighted_accuracy(
    correct: npt.ArrayLike,
    weight: npt.ArrayLike,
    cell: npt.ArrayLike,
    *,
    inclusion_prob: npt.ArrayLike | None = None,
    confidence: float = 0.95,
) -> WeightedAccuracy:
    """Hajek accuracy ``sum(w y) / sum(w)`` with its stratified linearised variance.

    Parameters
    ----------
    correct, weight
        Per label: 1/0 verdict and design weight (``1 / pi``).
    cell
        Per label: its sampling cell (any hashable codes); labels of one cell
        are a simple random sample of it.
    inclusion_prob
        Per label, for the finite-population correction ``1 - f_h`` (``f_h`` =
        the cell's inclusion probability); ``None`` uses ``1 / weight``.
    confidence
        Two-sided level of the Korn-Graubard interval.

    Notes
    -----
    With ``z_i = w_i (y_i - acc) / sum(w)``, the variance is
    ``sum_h (1 - f_h) n_h / (n_h - 1) sum_{i in h} (z_i - mean_h z)^2``;
    with equal weights inside cells it is STATS.md's
    ``sum_h W_h^2 (1 - f_h) acc_h (1 - acc_h) / (n_h - 1)``. Cells with one
    label get variance 1/4, cells whose labels agree the floor of
    :func:`fieldtrust.calibration.survey.zero_variance_floor`.

    References
    ----------
    Cochran (1977), Sampling Techniques, ch. 5 and 6.11; Sarndal, Swensson &
    Wretman (1992), Model Assisted Survey Sampling, 5.6. Korn & Graubard (1998).
    """
    y = np.asarray(correct, dtype=float)
    w = np.asarray(weight, dtype=float)
    if y.size == 0:
        return WeightedAccuracy(np.nan, np.nan, np.nan, np.nan, 0)
    pi = 1.0 / w if inclusion_prob is None else np.asarray(inclusion_prob, dtype=float)
    acc = survey.hajek(y, w)
    variance = survey.linearised_variance(y, w, cell, pi, confidence=confidence)
    low, high = survey.korn_graubard_interval(acc, variance, y.size, confidence=confidence)
    return WeightedAccuracy(acc, variance, float(low), float(high), int(y.size))


def label_cells(data: StratumData) -> npt.NDArray[np.int64]:
    """Variance cells of a stratum's labels: (week, inclusion probability); imports form one."""
    week = np.where(data.from_audit, data.week.astype(str), "imported")
    _, week_code = np.unique(week, return_inverse=True)
    _, pi_code = np.unique(data.inclusion_prob, return_inverse=True)
    return week_code.ravel() * (int(pi_code.max(initial=0)) + 1) + pi_code.ravel()


def stratum_table(
    data: StratumData, *, confidence: float = 0.95, n_bins: int = 10, strategy: str = "quantile"
) -> StratumTable:
    """The calibration-table row of one stratum."""
    accuracy = weighted_accuracy(
        data.correct, data.weight, label_cells(data),
        inclusion_prob=data.inclusion_prob, confidence=confidence,
    )
    if data.n_labeled:
        metrics = calibration_metrics(
            data.confidence, data.correct, weight=data.weight, n_bins=n_bins, strategy=strategy
        )
        ece, ece_debiased, brier = metrics.ece, metrics.ece_debiased, metrics.brier
    else:
        ece = ece_debiased = brier = np.nan
    return StratumTable(
        doc_type=data.doc_type,
        field=data.field,
        n_population=data.n_population,
        n_labeled=data.n_labeled,
        accuracy=accuracy.accuracy,
        accuracy_low=accuracy.low,
        accuracy_high=accuracy.high,
        accuracy_variance=accuracy.variance,
        mean_confidence=data.mean_confidence,
        ece=ece,
        ece_debiased=ece_debiased,
        brier=brier,
    )


def stratum_bins(
    data: StratumData,
    *,
    n_bins: int = 10,
    strategy: str = "quantile",
    interval: str = "wilson",
    confidence: float = 0.95,
) -> pa.Table:
    """Design-weighted reliability bins of one stratum's labels (as :func:`reliability_bins`)."""
    return reliability_bins(
        data.confidence, data.correct, weight=data.weight,
        n_bins=n_bins, strategy=strategy, interval=interval, level=confidence,
    )


def calibration_table(
    con: duckdb.DuckDBPyConnection,
    scope: Scope = Scope(),
    *,
    confidence: float = 0.95,
    n_bins: int = 10,
    strategy: str = "quantile",
) -> pa.Table:
    """The calibration table of every stratum with extractions in ``scope``.

    One row per (doc_type, field), columns as :class:`StratumTable` (null
    where a figure is undefined). To split by form version, pass a ``Scope``
    with ``form_versions``.
    """
    rows = [
        vars(stratum_table(s, confidence=confidence, n_bins=n_bins, strategy=strategy))
        for s in load_strata(con, scope)
    ]
    frame = pd.DataFrame(rows, columns=list(StratumTable.__dataclass_fields__))
    return pa.Table.from_pandas(frame, schema=_TABLE_SCHEMA, preserve_index=False)

