"""Interval and bound arithmetic in one place: exact bounds, Wilson and Jeffreys intervals,
Korn-Graubard, label counts, Hajek and stratified estimates.

Every interval and bound fieldtrust shows or decides on (the calibration
table and bins, the certified thresholds, the weekly audit estimates, the
alerts, the revocation check, the per-form-version evidence) is computed
here, so one stratum gets one interval whichever report shows it (STATS.md
sections 2, 3 and 6). The confidence level is always the keyword
``confidence`` (``delta`` for the one-sided error bounds). Every function
works on numpy arrays as well as on scalars (one call bounds all bins or all
thresholds of a stratum).

* :func:`clopper_pearson`: exact binomial bounds, also for fractional counts
  (Korn-Graubard evaluates it at an effective size);
  :func:`clopper_pearson_interval` the same as a two-sided interval of counts.
* :func:`wilson_interval` / :func:`jeffreys_interval`: the intervals shown
  for a plain proportion (a reliability bin), never Wald.
* :func:`error_upper_bound` / :func:`error_lower_bound`: one-sided exact
  bounds on an error rate, what a certificate or a stability test rests on;
  :func:`labels_needed` / :func:`labels_needed_at_rate`: the label counts
  they imply (STATS.md section 6).
* :func:`korn_graubard_interval` / :func:`korn_graubard_bound`: Clopper-Pearson
  at ``n_eff = p (1 - p) / var(p)`` with R survey's degrees-of-freedom factor,
  ``n_eff`` capped at the number of labels (a design is never credited with
  more information than a simple random sample of its labels).
* :func:`domain_estimates` / :func:`stratified_proportion`: the Hajek ratio and
  its linearised stratified variance from per-cell counts (Cochran 5.2, 6.11).
* :func:`linearised_variance`: the same variance from label-level arrays.

A cell whose labels all agree (all right or all wrong) has a sample variance
of zero; left so, one clean cell can collapse a domain's interval
(per-form-version intervals covered 83% without a floor). Such a cell gets
the variance its own Clopper-Pearson interval implies instead:
``m ((U - L) / (2 z))^2`` per label (:func:`zero_variance_floor`). A cell with a
single label gets the largest variance a 0/1 value can have, 1/4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration.arrays import FloatArray
from scipy import stats
from scipy.special import bdtr, betaincinv, ndtri

from fieldtrust.errors import InputError

ArrayLike = npt.ArrayLike

#: Variance of a 0/1 value at its largest: a cell with one label (its own
#: variance cannot be estimated) is given this, never zero.
LONELY_VARIANCE = 0.25


def check_fraction(name: str, value: float, hint: str = "") -> float:
    """``value`` as a float, or an :class:`InputError` naming it outside (0, 1)."""
    if not 0.0 < value < 1.0:
        raise InputError(
            f"{name} {value!r} is not strictly between 0 and 1" + (f"; {hint}" if hint else "")
        )
    return float(value)


def checked_confidence(confidence: float) -> float:
    """``confidence`` as a float, or a :class:`InputError` outside (0, 1)."""
    return check_fraction("confidence", confidence, "use e.g. 0.95")


def clopper_pearson(
    successes: npt.ArrayLike, n: npt.ArrayLike, *, confidence: float = 0.95, sided: str = "two"
) -> tuple[FloatArray, FloatArray]:
    """Clopper-Pearson (exact binomial) bounds, also for fractional counts.

    ``sided="two"`` gives the two-sided ``confidence`` interval; ``"upper"`` /
    ``"lower"`` a one-sided bound at ``confidence`` (the other end is 0 or 1).
    Lower end ``Beta(x, n - x + 1)``, upper ``Beta(x + 1, n - x)`` quantiles;
    ``n = 0`` gives NaN. Equals ``scipy.stats.binomtest(k, n).proportion_ci``
    (method "exact") for whole counts.

    References
    ----------
    Clopper & Pearson (1934), Biometrika 26:404; STATS.md section 3.
    """
    if sided not in ("two", "upper", "lower"):
        raise InputError(f"sided must be 'two', 'upper' or 'lower', got {sided!r}")
    alpha = 1 - checked_confidence(confidence)
    x = np.atleast_1d(np.asarray(successes, dtype=np.float64))
    size = np.atleast_1d(np.asarray(n, dtype=np.float64))
    x, size = np.broadcast_arrays(x, size)
    tail = alpha / 2 if sided == "two" else alpha
    valid = size > 0
    x = np.clip(x, 0, np.where(valid, size, 0))
    with np.errstate(invalid="ignore"):
        lower = np.where(x > 0, betaincinv(np.maximum(x, 1e-300), size - x + 1, tail), 0.0)
        upper = np.where(x < size, betaincinv(x + 1, np.maximum(size - x, 1e-300), 1 - tail), 1.0)
    if sided == "upper":
        lower = np.zeros_like(lower)
    elif sided == "lower":
        upper = np.ones_like(upper)
    return np.where(valid, lower, np.nan), np.where(valid, upper, np.nan)


def zero_variance_floor(n: npt.ArrayLike, *, confidence: float = 0.95) -> FloatArray:
    """Per-label variance a cell of ``n`` labels that all agree is given.

    ``n ((U - L) / (2 z))^2`` with ``[L, U]`` the two-sided Clopper-Pearson
    interval of ``0`` (equally ``n``) successes in ``n``: the variance of a
    mean whose interval is as wide as the cell's exact one, per label.
    """
    size = np.asarray(n, dtype=np.float64)
    z = float(ndtri(0.5 + 0.5 * checked_confidence(confidence)))
    low, high = clopper_pearson(np.zeros_like(size), size, confidence=confidence)
    with np.errstate(invalid="ignore"):
        out = size * ((high - low) / (2 * z)) ** 2
    return np.where(size > 0, out, 0.0).reshape(size.shape)


def effective_size(
    estimate: npt.ArrayLike,
    variance: npt.ArrayLike,
    n: npt.ArrayLike,
    df: npt.ArrayLike | None = None,
    *,
    confidence: float = 0.95,
) -> FloatArray:
    """Korn-Graubard effective sample size, capped at the label count ``n``.

    ``n_eff = p (1 - p) / var`` (``n`` when the variance is 0), times
    ``(t_{n-1} / t_df)^2`` for the design's degrees of freedom ``df`` (labels
    minus cells; R survey ``svyciprop(method = "beta")``), then at most ``n``.
    """
    p = np.asarray(estimate, dtype=np.float64)
    v = np.asarray(variance, dtype=np.float64)
    count = np.asarray(n, dtype=np.float64)
    p, v, count = np.broadcast_arrays(p, v, count)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where((v > 0) & (p * (1 - p) > 0), p * (1 - p) / v, count)
    raw = np.where(np.isfinite(raw), raw, count)
    factor = np.ones_like(raw)
    if df is not None:
        freedom = np.broadcast_to(np.asarray(df, dtype=np.float64), raw.shape)
        usable = (count > 1) & (freedom >= 1)
        level = 1 - (1 - checked_confidence(confidence)) / 2
        factor[usable] = (
            stats.t.ppf(level, count[usable] - 1) / stats.t.ppf(level, freedom[usable])
        ) ** 2
    return np.asarray(np.minimum(raw * factor, count), dtype=np.float64)


def korn_graubard_interval(
    estimate: npt.ArrayLike,
    variance: npt.ArrayLike,
    n: npt.ArrayLike,
    df: npt.ArrayLike | None = None,
    *,
    confidence: float = 0.95,
) -> tuple[Any, Any]:
    """Two-sided Korn-Graubard interval: Clopper-Pearson at the effective size.

    Approximate (the design variance is itself estimated); equal weights give
    exactly the Clopper-Pearson interval of the counts. Scalars in, floats out.

    References
    ----------
    Korn & Graubard (1998), Survey Methodology 24:193; Lumley, R package
    survey, ``svyciprop(method = "beta")``; STATS.md section 3.
    """
    p = np.asarray(estimate, dtype=np.float64)
    n_eff = effective_size(p, variance, n, df, confidence=confidence)
    low, high = clopper_pearson(np.clip(p * n_eff, 0, n_eff), n_eff, confidence=confidence)
    if np.ndim(estimate) == 0 and np.ndim(variance) == 0 and np.ndim(n) == 0:
        return float(low[0]), float(high[0])
    return low.reshape(n_eff.shape), high.reshape(n_eff.shape)


def korn_graubard_bound(
    estimate: npt.ArrayLike,
    variance: npt.ArrayLike,
    n: npt.ArrayLike,
    *,
    confidence: float = 0.95,
    side: str = "upper",
) -> FloatArray:
    """One-sided Korn-Graubard bound on a proportion (``side`` "upper" or "lower").

    1 (upper) or 0 (lower) where there are no labels: no evidence.
    """
    p = np.asarray(estimate, dtype=np.float64)
    count = np.asarray(n, dtype=np.float64)
    n_eff = effective_size(p, variance, count, confidence=confidence)
    with np.errstate(invalid="ignore"):
        x = np.clip(np.nan_to_num(p) * n_eff, 0, n_eff)
    low, high = clopper_pearson(x, n_eff, confidence=confidence,
                                sided="upper" if side == "upper" else "lower")
    out = high if side == "upper" else low
    empty = ~(count > 0) | ~np.isfinite(p)
    return np.where(empty.ravel(), 1.0 if side == "upper" else 0.0, out).reshape(n_eff.shape)


# --- Intervals people read, exact one-sided error bounds, and the label counts they imply


#: Largest label count :func:`labels_needed_at_rate` searches before giving up.
MAX_LABELS_SEARCHED = 10_000_000


def _delta(delta: float) -> float:
    """``delta`` as a float, checked to lie in (0, 1)."""
    return check_fraction("delta", delta, "use e.g. 0.05 (95% confidence)")


def _counts(successes: ArrayLike, trials: ArrayLike) -> tuple[FloatArray, FloatArray]:
    k = np.asarray(successes, dtype=float)
    n = np.asarray(trials, dtype=float)
    if np.any(n < 0) or np.any(k < 0) or np.any(k > n):
        raise InputError(
            "counts must satisfy 0 <= successes <= trials; got"
            f" successes={np.asarray(successes).tolist()!r}, trials={np.asarray(trials).tolist()!r}"
        )
    return np.broadcast_arrays(k, n)  # type: ignore[return-value]


def _out(value: FloatArray) -> Any:
    """A float for scalar input, the array otherwise."""
    return float(value) if np.ndim(value) == 0 else value


def _two_sided(low: FloatArray, high: FloatArray, n: FloatArray) -> tuple[Any, Any]:
    """An interval's ends as returned: NaN where there are no trials."""
    return _out(np.where(n == 0, np.nan, low)), _out(np.where(n == 0, np.nan, high))


def wilson_interval(
    successes: ArrayLike, trials: ArrayLike, *, confidence: float = 0.95
) -> tuple[Any, Any]:
    """Two-sided Wilson score interval for a binomial proportion.

    Equals ``scipy.stats.binomtest(k, n).proportion_ci(confidence, "wilson")``,
    including its convention of a lower end of exactly 0 when ``k = 0`` and an
    upper end of exactly 1 when ``k = n``. Zero trials give ``(nan, nan)``.

    References
    ----------
    Wilson (1927), JASA 22:209. Newcombe (1998), Statistics in Medicine
    17:857, method 3. Brown, Cai & DasGupta (2001), Statistical Science 16:101.
    """
    k, n = _counts(successes, trials)
    z = ndtri(0.5 + 0.5 * checked_confidence(confidence))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = k / n
        denom = 2 * (n + z**2)
        center = (2 * n * p + z**2) / denom
        half = z / denom * np.sqrt(4 * n * p * (1 - p) + z**2)
        low = np.where(k == 0, 0.0, center - half)
        high = np.where(k == n, 1.0, center + half)
    return _two_sided(low, high, n)


def jeffreys_interval(
    successes: ArrayLike, trials: ArrayLike, *, confidence: float = 0.95
) -> tuple[Any, Any]:
    """Two-sided Jeffreys interval: quantiles of ``Beta(k + 1/2, n - k + 1/2)``.

    With the usual end corrections (lower end 0 at ``k = 0``, upper end 1 at
    ``k = n``). Zero trials give ``(nan, nan)``.

    References
    ----------
    Brown, Cai & DasGupta (2001), Statistical Science 16:101, section 4.1.2.
    """
    k, n = _counts(successes, trials)
    alpha = 1.0 - checked_confidence(confidence)
    with np.errstate(invalid="ignore"):
        low = np.where(k == 0, 0.0, betaincinv(k + 0.5, n - k + 0.5, alpha / 2))
        high = np.where(k == n, 1.0, betaincinv(k + 0.5, n - k + 0.5, 1 - alpha / 2))
    return _two_sided(low, high, n)


def clopper_pearson_interval(
    successes: ArrayLike, trials: ArrayLike, *, confidence: float = 0.95
) -> tuple[Any, Any]:
    """Two-sided exact (Clopper-Pearson) interval from beta quantiles.

    Equals ``scipy.stats.binomtest(k, n).proportion_ci(confidence, "exact")``.
    Non-integer counts are accepted (Korn-Graubard uses an effective size).
    Zero trials give ``(nan, nan)``.

    References
    ----------
    Clopper & Pearson (1934), Biometrika 26:404.
    """
    k, n = _counts(successes, trials)
    # The one implementation (clopper_pearson above); the counts keep their shape here.
    low, high = clopper_pearson(k, n, confidence=confidence)
    return _out(low.reshape(k.shape)), _out(high.reshape(k.shape))


def error_upper_bound(errors: ArrayLike, trials: ArrayLike, *, delta: float = 0.05) -> Any:
    """One-sided exact upper ``1 - delta`` bound on an error rate.

    ``beta.ppf(1 - delta, k + 1, n - k)`` for ``k < n`` errors in ``n``; 1 when
    ``k = n`` (including ``n = 0``: no labels, no evidence).

    References
    ----------
    Clopper & Pearson (1934); STATS.md section 3.
    """
    k, n = _counts(errors, trials)
    level = _delta(delta)
    with np.errstate(invalid="ignore"):
        bound = np.where(k >= n, 1.0, betaincinv(k + 1, np.maximum(n - k, 1e-300), 1 - level))
    return _out(np.asarray(bound, dtype=float))


def error_lower_bound(errors: ArrayLike, trials: ArrayLike, *, delta: float = 0.05) -> Any:
    """One-sided exact lower ``1 - delta`` bound on an error rate (0 when ``k = 0``).

    ``beta.ppf(delta, k, n - k + 1)``: an error rate is significantly above
    ``e`` at level ``delta`` exactly when this bound exceeds ``e``.

    References
    ----------
    Clopper & Pearson (1934).
    """
    k, n = _counts(errors, trials)
    level = _delta(delta)
    with np.errstate(invalid="ignore"):
        bound = np.where(k <= 0, 0.0, betaincinv(np.maximum(k, 1e-300), n - k + 1, level))
    return _out(np.asarray(bound, dtype=float))


def _certifies(errors: ArrayLike, trials: ArrayLike, max_error: float, delta: float) -> Any:
    """``error_upper_bound(k, n) <= max_error``, as ``P(Binomial(n, max_error) <= k) <= delta``.

    The same event (the beta-binomial identity), without a root search:
    cheap enough to scan thousands of label counts.
    """
    return bdtr(errors, trials, max_error) <= delta


def _check_target(target: float) -> float:
    """``1 - target``, the error rate a target allows (the target checked to lie in (0, 1))."""
    return 1.0 - check_fraction("target", target)


def labels_needed(errors: int, *, target: float = 0.95, delta: float = 0.05) -> int:
    """Fewest labels with ``errors`` errors among them that certify ``target``.

    The smallest ``n`` with ``error_upper_bound(errors, n, delta) <= 1 - target``.
    At ``target = delta = 0.95 / 0.05``: 0 errors -> 59, 1 -> 93, 2 -> 124,
    3 -> 153, 4 -> 181, 5 -> 208 (STATS.md section 6; AICPA attribute
    sampling tables give the same figures).

    References
    ----------
    Clopper & Pearson (1934); AICPA Audit Guide, Audit Sampling (2019), table A-1.
    """
    if errors < 0:
        raise InputError(f"errors must be >= 0, got {errors}")
    max_error = _check_target(target)
    level = _delta(delta)
    # With k fixed the bound falls as n grows: double, then bisect.
    low, high = errors + 1, errors + 2
    while not _certifies(errors, high, max_error, level):
        low, high = high, high * 2
    while low < high:
        mid = (low + high) // 2
        if _certifies(errors, mid, max_error, level):
            high = mid
        else:
            low = mid + 1
    return int(low)


def labels_needed_at_rate(
    error_rate: float, *, target: float = 0.95, delta: float = 0.05
) -> int | None:
    """Fewest labels that certify ``target`` if errors keep occurring at ``error_rate``.

    The smallest ``n`` whose exact bound with ``round(error_rate * n)`` errors
    is at most ``1 - target``; ``None`` when the rate is at or above
    ``1 - target`` (no number of labels can certify it) or when more than
    :data:`MAX_LABELS_SEARCHED` would be needed. A planning figure: it assumes
    the rate stays what it is now.

    References
    ----------
    STATS.md section 6, step 4.
    """
    max_error = _check_target(target)
    _delta(delta)
    if not 0.0 <= error_rate <= 1.0 or error_rate >= max_error:
        return None
    if error_rate == 0.0:
        return labels_needed(0, target=target, delta=delta)

    # Label counts n with round(p n) = k errors form a run ending at last(k);
    # inside a run the bound falls with n, so the run certifies from
    # labels_needed(k) on if that is inside it. Later runs end ever further
    # past labels_needed(k) (slope 1/p > 1/(1 - target)): bisect on k for the
    # first run that certifies; it holds the smallest n.
    def last(k: int) -> int:
        return int(np.ceil((k + 0.5) / error_rate)) - 1

    def fits(k: int) -> bool:
        return labels_needed(k, target=target, delta=delta) <= last(k)

    high = 1
    while not fits(high):
        high *= 2
        if last(high) > 2 * MAX_LABELS_SEARCHED:
            return None
    low = -1 if high == 1 else high // 2
    while high - low > 1:
        mid = (low + high) // 2
        if mid >= 0 and fits(mid):
            high = mid
        else:
            low = mid
    first = 1 if high == 0 else int(np.ceil((high - 0.5) / error_rate))
    n_needed = max(first, labels_needed(high, target=target, delta=delta))
    return n_needed if n_needed <= MAX_LABELS_SEARCHED else None


def hajek(correct: npt.ArrayLike, weight: npt.ArrayLike) -> float:
    """Hajek ratio ``sum(w y) / sum(w)``; NaN without labels (STATS.md section 2)."""
    y = np.asarray(correct, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    return float(np.sum(w * y) / np.sum(w)) if y.size and np.sum(w) > 0 else float("nan")


def linearised_variance(
    correct: npt.ArrayLike,
    weight: npt.ArrayLike,
    cell: npt.ArrayLike,
    inclusion_prob: npt.ArrayLike,
    *,
    confidence: float = 0.95,
) -> float:
    """Design variance of the Hajek accuracy of labels drawn by stratified simple random sampling.

    With ``z_i = w_i (y_i - acc) / sum(w)``: ``sum_h (1 - f_h) n_h / (n_h - 1)
    sum_{i in h} (z_i - mean_h z)^2``; with equal weights in a cell this is
    STATS.md's ``sum_h W_h^2 (1 - f_h) p_h (1 - p_h) / (n_h - 1)``. Cells whose
    labels agree get :func:`zero_variance_floor`, single-label cells 1/4.

    References
    ----------
    Cochran (1977), Sampling Techniques, ch. 5 and 6.11; Sarndal, Swensson &
    Wretman (1992), 5.6.
    """
    y = np.asarray(correct, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    if y.size == 0:
        return float("nan")
    pi = np.asarray(inclusion_prob, dtype=np.float64)
    total = w.sum()
    acc = float(np.sum(w * y) / total)
    _, codes = np.unique(np.asarray(cell), return_inverse=True)
    codes = codes.ravel()
    n_h = np.bincount(codes).astype(float)
    z = w * (y - acc) / total
    mean_h = np.bincount(codes, weights=z) / n_h
    ss_h = np.bincount(codes, weights=(z - mean_h[codes]) ** 2)
    f_h = np.minimum(np.bincount(codes, weights=pi) / n_h, 1.0)
    w_h = np.bincount(codes, weights=w) / n_h
    k_h = np.bincount(codes, weights=y)
    agree = (k_h == 0) | (k_h == n_h)
    # A cell's share of the total weight, per label, squared: the scale of its z values.
    scale = (w_h / total) ** 2
    floor = scale * (n_h - 1) * zero_variance_floor(n_h, confidence=confidence)
    ss_h = np.where(agree & (n_h > 1), np.maximum(ss_h, floor), ss_h)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_cell = np.where(n_h > 1, (1 - f_h) * n_h / (n_h - 1) * ss_h,
                            (1 - f_h) * scale * LONELY_VARIANCE)
    return float(per_cell.sum())


@dataclass(frozen=True)
class ProportionEstimate:
    """A design-weighted accuracy with its uncertainty.

    ``n`` labels used; ``n_eff`` the Korn-Graubard effective size behind the
    interval; ``population`` the extractions the estimate speaks for;
    ``strata`` the cells holding at least one of the labels.
    """

    estimate: float
    variance: float
    lower: float
    upper: float
    n: int
    n_eff: float
    population: float
    strata: int

    @property
    def std_error(self) -> float:
        """Square root of the variance."""
        return float(np.sqrt(self.variance))


def domain_estimates(
    group: npt.ArrayLike,
    n_population: npt.ArrayLike,
    n_labelled: npt.ArrayLike,
    n_domain: npt.ArrayLike,
    n_correct: npt.ArrayLike,
    *,
    n_groups: int | None = None,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Hajek estimates for many domains at once, from one row per (cell, domain).

    Parameters
    ----------
    group
        Domain index (0 .. n_groups - 1) of each row.
    n_population
        ``N_h`` of the row's cell.
    n_labelled
        ``m_h``: the cell's design-based labels (its labelled PRN prefix), any domain.
    n_domain
        ``m_hd``: those of them in this domain.
    n_correct
        ``k_hd``: those of them labelled correct.
    n_groups
        Number of domains (default ``max(group) + 1``).
    confidence
        Two-sided level of the interval.

    Returns
    -------
    dict
        Arrays of length ``n_groups``: estimate, variance, lower, upper, n,
        n_eff, population, strata.

    References
    ----------
    Cochran (1977), Sampling Techniques, 3rd ed., 5.2 and 6.11; Korn &
    Graubard (1998), Survey Methodology 24:193.
    """
    g = np.asarray(group, dtype=np.int64)
    big_n = np.asarray(n_population, dtype=np.float64)
    m = np.asarray(n_labelled, dtype=np.float64)
    m_d = np.asarray(n_domain, dtype=np.float64)
    k = np.asarray(n_correct, dtype=np.float64)
    size = int(g.max()) + 1 if n_groups is None and g.size else int(n_groups or 0)
    weight = np.divide(big_n, m, out=np.zeros_like(big_n), where=m > 0)
    population = np.bincount(g, weight * m_d, minlength=size)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.bincount(g, weight * k, minlength=size) / population
    r = ratio[g]
    # Linearised values z_i = y_i - R for domain items, 0 elsewhere: per cell
    # their sum and sum of squares follow from the counts.
    z_sum = k - r * m_d
    z_squares = k * (1 - r) ** 2 + (m_d - k) * r**2
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = (z_squares - z_sum**2 / m) / (m - 1)
    agree = (m_d > 0) & ((k == 0) | (k == m_d))
    floor = np.divide(m_d, m, out=np.zeros_like(m), where=m > 0) * zero_variance_floor(
        m_d, confidence=confidence)
    s2 = np.where(agree & (m > 1), np.maximum(np.nan_to_num(s2), floor), s2)
    s2 = np.where(m > 1, s2, np.where(m_d > 0, LONELY_VARIANCE, 0.0))
    fpc = np.clip(1 - np.divide(m, big_n, out=np.ones_like(m), where=big_n > 0), 0.0, 1.0)
    term = np.divide(big_n**2 * fpc * np.maximum(s2, 0.0), m, out=np.zeros_like(big_n),
                     where=m > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.bincount(g, np.nan_to_num(term), minlength=size) / population**2
    n = np.bincount(g, m_d, minlength=size)
    strata = np.bincount(g, (m_d > 0).astype(np.float64), minlength=size)
    n_eff = effective_size(ratio, variance, n, n - strata, confidence=confidence)
    lower, upper = clopper_pearson(np.nan_to_num(ratio) * n_eff, n_eff, confidence=confidence)
    nan = ~(n > 0)
    return {
        "estimate": ratio,
        "variance": variance,
        "lower": np.where(nan, np.nan, lower),
        "upper": np.where(nan, np.nan, upper),
        "n": n.astype(np.int64),
        "n_eff": n_eff,
        "population": population,
        "strata": strata.astype(np.int64),
    }


def stratified_proportion(
    n_population: npt.ArrayLike,
    n_labelled: npt.ArrayLike,
    n_correct: npt.ArrayLike,
    *,
    n_domain: npt.ArrayLike | None = None,
    confidence: float = 0.95,
) -> ProportionEstimate:
    """One domain's estimate from per-cell arrays (see :func:`domain_estimates`).

    ``n_domain`` defaults to ``n_labelled``: the domain is every cell whole,
    the stratified estimator of STATS.md section 2.
    """
    m = np.asarray(n_labelled, dtype=np.float64)
    m_d = m if n_domain is None else np.asarray(n_domain, dtype=np.float64)
    result = domain_estimates(
        np.zeros(m.shape, dtype=np.int64), n_population, m, m_d, n_correct,
        n_groups=1, confidence=confidence,
    )
    return ProportionEstimate(**{name: values[0].item() for name, values in result.items()})
