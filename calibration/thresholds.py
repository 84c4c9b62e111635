"""Point and certified confidence thresholds per stratum (STATS.md section 6).

The certified threshold is Learn-then-Test with fixed-sequence testing: the
candidate grid comes from the unlabelled confidences (grid values 0.005
apart, high to low); candidates with fewer than ``n_min`` labels above them
are skipped (a count, not an outcome, so validity holds); walking down, a
candidate is certified while the upper ``1 - delta`` bound on the error rate
above it is at most ``1 - target``; the walk stops at the first failure.

The point threshold is the lowest candidate whose weighted accuracy above it
reaches the target: an estimate with no guarantee, shown beside it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import duckdb
import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
from fieldtrust.calibration.arrays import FloatArray
from fieldtrust.calibration.design import (
    GRID,
    N_GRID,
    Blocks,
    Bound,
    Labels,
    error_bound,
    error_bounds,
    kept_counts,
    kept_labels,
)
from fieldtrust.calibration.population import load_strata
from fieldtrust.calibration.survey import labels_needed, labels_needed_at_rate
from fieldtrust.store.bar import Bar, resolve_bar
from fieldtrust.store.scope import Scope
from scipy.special import ndtri
from scipy.stats import binom

from fieldtrust.errors import InputError

#: How many of the best-ranked candidates get the exact label count.
_EXACT_CANDIDATES = 3


@dataclass(frozen=True)
class ThresholdPoint:
    """What holds above one candidate threshold."""

    threshold: float
    coverage: float  # share of the stratum's population at or above it
    n_population_above: int
    labels_above: int
    labels_used: int  # labels the bound used (after thinning to one inclusion probability)
    accuracy: float  # design-weighted (Hajek) accuracy of the labels above
    accuracy_low: float  # lower (1 - delta) bound, never above `accuracy`
    exact: bool  # the bound is plain Clopper-Pearson on the labels above


@dataclass(frozen=True)
class ThresholdResult:
    """Thresholds of one stratum for one target and confidence."""

    point: ThresholdPoint | None
    certified: ThresholdPoint | None
    first_failure: ThresholdPoint | None  # where the walk stopped (None: ran out or never started)
    tested: int
    labels_needed: int | None  # more labels above `labels_needed_threshold` that would certify it
    labels_needed_threshold: float | None


@dataclass(frozen=True)
class _Sums:
    """Per-grid-index sums above each index (suffix sums)."""

    population: npt.NDArray[np.int64]
    labels: npt.NDArray[np.int64]
    weight: FloatArray
    weight_correct: FloatArray


#: Chance the first candidate tested certifies, if errors occur at the prior rate.
START_POWER = 0.9


def walk_start(bar: Bar) -> int:
    """Labels the bound must use before a candidate is tested (STATS.md section 6, step 2).

    ``max(n_min, n)`` with ``n`` the fewest labels whose test certifies the
    bar's ``target`` with probability :data:`START_POWER` when errors occur at
    its ``prior_error``: the walk's one failure is not spent where a
    certificate is out of reach. Depends on settings only, never on a verdict,
    so the procedure stays valid (Learn-then-Test allows any such rule). A
    ``prior_error`` of 0 starts at ``n_min``.
    """
    if bar.prior_error <= 0:
        return bar.n_min
    return max(bar.n_min,
               _powered_count(bar.prior_error, 1.0 - bar.target, 1.0 - bar.confidence))


@functools.lru_cache(maxsize=64)
def _powered_count(prior_error: float, max_error: float, delta: float) -> int:
    if prior_error >= max_error:
        return MAX_START
    n = np.arange(1, MAX_START + 1)
    # Most errors that still certify at each n: P(Binomial(n, max_error) <= k) <= delta.
    k = binom.ppf(delta, n, max_error).astype(np.int64)
    k = np.where(binom.cdf(k, n, max_error) <= delta, k, k - 1)
    power = np.where(k >= 0, binom.cdf(k, n, prior_error), 0.0)
    hits = np.flatnonzero(power >= START_POWER)
    return int(n[hits[0]]) if hits.size else MAX_START


#: The largest walk start searched (labels).
MAX_START = 20_000


def candidate_grid(population_hist: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Grid indices holding at least one extraction, highest first (STATS.md 6, step 1)."""
    hist = np.asarray(population_hist)
    return np.flatnonzero(hist > 0)[::-1].astype(np.int64)


def _sums(design: Blocks, labels: Labels) -> _Sums:
    def suffix(values: npt.NDArray[np.float64] | npt.NDArray[np.int64]) -> FloatArray:
        return np.cumsum(values[::-1])[::-1].astype(float)

    return _Sums(
        population=suffix(design.population_hist).astype(np.int64),
        labels=suffix(np.bincount(labels.k, minlength=N_GRID)).astype(np.int64),
        weight=suffix(np.bincount(labels.k, weights=labels.weight, minlength=N_GRID)),
        weight_correct=suffix(
            np.bincount(labels.k, weights=labels.weight * labels.correct, minlength=N_GRID)
        ),
    )


def _accuracy(sums: _Sums, k: int) -> float:
    return float(sums.weight_correct[k] / sums.weight[k]) if sums.labels[k] else float("nan")


def _point(sums: _Sums, k: int, bound: Bound) -> ThresholdPoint:
    accuracy = _accuracy(sums, k)
    # Thinning can leave the kept labels with fewer errors than all of them;
    # a lower bound above the estimate would read as nonsense, and lowering
    # a lower bound keeps it valid.
    low = 1.0 - bound.value
    return ThresholdPoint(
        threshold=k / GRID,
        coverage=float(sums.population[k] / sums.population[0]) if sums.population[0] else 0.0,
        n_population_above=int(sums.population[k]),
        labels_above=int(sums.labels[k]),
        labels_used=bound.kept_labels,
        accuracy=accuracy,
        accuracy_low=float(min(low, accuracy)) if not np.isnan(accuracy) else float(low),
        exact=bound.exact,
    )


def select_thresholds(design: Blocks, labels: Labels, bar: Bar) -> ThresholdResult:
    """Point and certified thresholds of one stratum.

    Parameters
    ----------
    design, labels
        The stratum's population and labels (:mod:`fieldtrust.calibration.design`).
    bar
        ``target``: accuracy the extractions above the threshold must reach.
        ``confidence``: ``1 - delta``, the probability that a certified
        threshold truly reaches the target on average above it. ``n_min``:
        candidates with fewer labels above them are skipped, not tested.
        ``prior_error``: where the walk starts: candidates are skipped until
        the bound uses at least :func:`walk_start` labels, the count that
        certifies the target if errors occur at this assumed rate (at least
        ``n_min``). A rule on label counts only, so validity is kept
        (Learn-then-Test); it spends the walk's one failure where a
        certificate is possible. A ``prior_error`` of 0 starts at ``n_min``.

    References
    ----------
    Angelopoulos, Bates, Candes, Jordan & Lei, "Learn then Test" (2021,
    Annals of Applied Statistics 2025), fixed-sequence testing.
    """
    target, n_min = bar.target, bar.n_min
    delta = 1.0 - bar.confidence
    max_error = 1.0 - target
    sums = _sums(design, labels)
    grid = candidate_grid(design.population_hist)
    # Counts only: no later than a third of the labels the bound keeps at the
    # lowest candidate, so a small stratum is still tested, and never before n_min.
    kept_at_bottom = int(kept_counts(design, labels, grid[-1:])[0][0]) if grid.size else 0
    start = max(n_min, min(walk_start(bar), kept_at_bottom // 3))

    # Too few labels above a candidate to test it yet (a count, not an outcome):
    # skipped, not failed; the same counting the labels the bound can use.
    enough = grid[sums.labels[grid] >= start]
    bounds = error_bounds(design, labels, enough, delta=delta)
    walked = np.flatnonzero(bounds.kept_labels >= start)  # the fixed sequence, high to low
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = sums.weight_correct[enough[walked]] / sums.weight[enough[walked]]
    # Both must hold: the bound (the guarantee) and the estimate itself, so a
    # lucky thinning never certifies a stratum whose labels say otherwise.
    passes = (bounds.value[walked] <= max_error) & (accuracy >= target)
    stop = int(np.argmin(passes)) if not passes.all() else walked.size  # first failure
    tested = min(stop + 1, walked.size)
    certified = _point(sums, int(enough[walked[stop - 1]]), bounds.at(int(walked[stop - 1]))) \
        if stop > 0 else None
    failure = _point(sums, int(enough[walked[stop]]), bounds.at(int(walked[stop]))) \
        if stop < walked.size else None

    point_threshold = _point_threshold(design, labels, sums, grid, target, delta)
    needed, needed_at = (None, None)
    if certified is None:
        needed, needed_at = _labels_needed(
            design, labels, sums, grid, failure, target, delta, n_min
        )
    return ThresholdResult(
        point=point_threshold,
        certified=certified,
        first_failure=failure,
        tested=tested,
        labels_needed=needed,
        labels_needed_threshold=needed_at,
    )


def _point_threshold(
    design: Blocks,
    labels: Labels,
    sums: _Sums,
    grid: npt.NDArray[np.int64],
    target: float,
    delta: float,
) -> ThresholdPoint | None:
    """Lowest candidate whose weighted accuracy above it reaches the target."""
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = sums.weight_correct[grid] / sums.weight[grid]
    ok = grid[(sums.labels[grid] > 0) & (accuracy >= target)]
    if ok.size == 0:
        return None
    k = int(ok.min())
    return _point(sums, k, error_bound(design, labels, k, delta=delta))


def _labels_needed(
    design: Blocks,
    labels: Labels,
    sums: _Sums,
    grid: npt.NDArray[np.int64],
    failure: ThresholdPoint | None,
    target: float,
    delta: float,
    n_min: int,
) -> tuple[int | None, float | None]:
    """Fewest more labels above one candidate that would certify it at today's error rate.

    Only candidates at or above the one where the walk stopped can be reached
    by the walk, so only they are considered; ties go to the lower (wider)
    threshold. Candidates are ranked by a normal approximation and the best
    few settled exactly, at the error rate of the labels the bound uses,
    scaled up by the share of labels thinning keeps. A planning figure
    (STATS.md section 6, step 4).
    """
    reachable = grid if failure is None else grid[grid >= round(failure.threshold * GRID)]
    n = sums.labels[reachable].astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = 1.0 - sums.weight_correct[reachable] / sums.weight[reachable]
    max_error = 1.0 - target
    ok = (n > 0) & (rate < max_error)
    if not ok.any():
        return None, None
    z = float(ndtri(1.0 - delta))
    with np.errstate(divide="ignore", invalid="ignore"):
        approx = np.maximum(z**2 * rate * (1 - rate) / (max_error - rate) ** 2, 0.0)
    approx = np.maximum(np.nan_to_num(approx), labels_needed(0, target=target, delta=delta))
    more_approx = np.where(ok, np.maximum(approx, n_min) - n, np.inf)
    order = np.lexsort((reachable, more_approx))[:_EXACT_CANDIDATES]
    best: tuple[int, int] | None = None
    for i in order:
        if not ok[i]:
            continue
        k = int(reachable[i])
        keep = kept_labels(design, labels, k)
        used = int(keep.sum())
        used_rate = float(1.0 - labels.correct[keep].mean()) if used else float(rate[i])
        total = labels_needed_at_rate(used_rate, target=target, delta=delta)
        if total is None:
            continue
        scale = n[i] / used if used else 1.0
        # At least one more: a count that suffices yet did not certify (the
        # walk stopped above it) still needs fresh labels.
        more = max(int(np.ceil((max(total, n_min) - used) * scale)), 1)
        if best is None or (more, k) < best:
            best = (more, k)
    return (None, None) if best is None else (best[0], best[1] / GRID)


def threshold_table(design: Blocks, labels: Labels, bar: Bar) -> pa.Table:
    """Every candidate threshold with its coverage, accuracy and lower bound.

    One row per candidate (high to low): the fields of :class:`ThresholdPoint`
    (``accuracy_low`` is ``1 -`` the upper bound at ``1 - confidence``,
    computed even where the walk would skip or stop; ``accuracy`` is null
    without labels above), then ``tested`` (enough labels to be tested),
    ``certified`` (certified by the fixed-sequence walk), ``point`` (the point
    threshold). Data for the dashboard's threshold chart, at the same bar as
    the report's thresholds.
    """
    n_min = bar.n_min
    delta = 1.0 - bar.confidence
    sums = _sums(design, labels)
    grid = candidate_grid(design.population_hist)
    result = select_thresholds(design, labels, bar)
    bounds = error_bounds(design, labels, grid, delta=delta)
    rows = [_point(sums, k, bounds.at(i)) for i, k in enumerate(grid.tolist())]
    columns = [*ThresholdPoint.__dataclass_fields__]
    frame = pd.DataFrame([vars(row) for row in rows], columns=columns)
    certified_at = result.certified.threshold if result.certified else np.inf
    frame["tested"] = (frame["labels_above"] >= n_min) & (frame["labels_used"] >= n_min)
    frame["certified"] = frame["threshold"] >= certified_at
    frame["certified"] &= frame["tested"]
    point_at = result.point.threshold if result.point else np.nan
    frame["point"] = frame["threshold"] == point_at
    return pa.Table.from_pandas(frame, schema=_CURVE_SCHEMA, preserve_index=False)


#: Columns of :func:`threshold_table`: :class:`ThresholdPoint`, then the walk's marks.
_CURVE_SCHEMA = pa.schema(
    [("threshold", pa.float64()), ("coverage", pa.float64()),
     ("n_population_above", pa.int64()), ("labels_above", pa.int64()),
     ("labels_used", pa.int64()), ("accuracy", pa.float64()), ("accuracy_low", pa.float64()),
     ("exact", pa.bool_()), ("tested", pa.bool_()), ("certified", pa.bool_()),
     ("point", pa.bool_())]
)


def threshold_curve(
    con: duckdb.DuckDBPyConnection,
    doc_type: str,
    field: str,
    scope: Scope = Scope(),
    bar: Bar | None = None,
) -> pa.Table:
    """:func:`threshold_table` for one stratum of the store (the dashboard's threshold chart).

    Columns as :func:`threshold_table`; ``bar`` None is the store's policy
    (:func:`fieldtrust.store.bar.resolve_bar`). Raises ``InputError`` when
    the stratum has no extractions in ``scope``.
    """
    bar = resolve_bar(con) if bar is None else bar
    narrowed = Scope(
        weeks=scope.weeks,
        doc_types=(doc_type,),
        form_versions=scope.form_versions,
        fields=(field,),
    )
    strata = load_strata(con, narrowed)
    match = [s for s in strata if (s.doc_type, s.field) == (doc_type, field)]
    if not match:
        raise InputError(
            f"no extractions for doc_type {doc_type!r}, field {field!r} in the selected scope;"
            " check the names with `fieldtrust calibrate`"
        )
    stratum = match[0]
    return threshold_table(stratum.design, stratum.labels, bar)
