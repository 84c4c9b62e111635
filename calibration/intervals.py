"""Confidence intervals for a proportion, and the label counts they imply.

Every function here works on numpy arrays as well as on scalars (one call
bounds all bins or all thresholds of a stratum) and follows STATS.md section
3: Wilson or Jeffreys for a shown interval, never Wald; exact Clopper-Pearson
for the bounds a decision rests on; Korn-Graubard for design-weighted
proportions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from fieldtrust.calibration import survey
from fieldtrust.calibration.survey import check_fraction
from scipy.special import bdtr, betaincinv, ndtri

from fieldtrust.errors import InputError

ArrayLike = npt.ArrayLike
FloatArray = npt.NDArray[np.float64]

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
    z = ndtri(0.5 + 0.5 * survey.checked_confidence(confidence))
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
    alpha = 1.0 - survey.checked_confidence(confidence)
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
    # The one implementation (calibration.survey); the counts keep their shape here.
    low, high = survey.clopper_pearson(k, n, confidence=confidence)
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


def korn_graubard_interval(
    estimate: ArrayLike,
    variance: ArrayLike,
    labels: ArrayLike,
    *,
    confidence: float = 0.95,
) -> tuple[Any, Any]:
    """Approximate interval for a design-weighted proportion (Korn-Graubard).

    :func:`fieldtrust.calibration.survey.korn_graubard_interval`, the one
    implementation every report uses: Clopper-Pearson at
    ``n_eff = p(1 - p) / var(p)``, ``n_eff`` capped at the number of labels.

    References
    ----------
    Korn & Graubard (1998), Survey Methodology 24:193. STATS.md section 3.
    """
    return survey.korn_graubard_interval(estimate, variance, labels, confidence=confidence)


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
