"""Design-based estimates of accuracy from a stratified sample (STATS.md sections 2 and 3).

Pure functions on per-stratum counts, so a simulation can run thousands of
replications at array speed and the store-facing code
(:mod:`fieldtrust.sampling.estimates`) only has to count.

Within stratum ``h`` (an audit cell of one week) the ``m_h`` labelled items are
treated as a simple random sample of its ``N_h`` items, weight ``N_h / m_h``.
With every drawn item labelled this is the design weight ``1 / pi_h``; while a
cell is half labelled it is the usual within-cell non-response adjustment
(reviewers working in PRN order keep the labelled part a random subsample).

A *domain* (a (doc_type, field), a form version, everything) takes, in each
stratum, the ``m_hd`` labelled items that belong to it, ``k_hd`` of them correct.
The estimate is the Hajek ratio ``sum_h N_h/m_h k_hd / sum_h N_h/m_h m_hd``;
its variance is the linearised (Taylor) variance of a ratio under stratified
simple random sampling with the finite-population correction (Cochran,
Sampling Techniques, 3rd ed., 5.2 and 6.11; Sarndal, Swensson & Wretman,
Model Assisted Survey Sampling, 10.3). When the domain is a union of whole
strata it reduces exactly to the stratified formula of STATS.md section 2:
``sum_h W_h^2 (1 - f_h) p_h (1 - p_h) / (m_h - 1)``.

Intervals are Korn-Graubard (1998): Clopper-Pearson at the effective sample
size ``n_eff = p (1 - p) / var``, with the degrees-of-freedom factor of R's
``survey::svyciprop(method = "beta")``; when the estimate is 0 or 1 (variance
0) ``n_eff`` is the number of labels, so a perfect record still gets an exact
binomial interval. ``n_eff`` is not truncated at the number of labels (in
our simulations that over-covered, 97-98% for a nominal 95%), but at twice
what a simple random sample of the domain's labels would give (``2 n / (1 -
n / N)``): cells whose labels are all right add no variance, and without a
cap a domain made mostly of them gets a zero-width interval. The interval is
approximate; it is never Wald,
which fails near 0 and 1 (Brown, Cai & DasGupta 2001).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from fieldtrust.sampling.errors import SamplingError
from scipy import stats

FloatArray = npt.NDArray[np.float64]

#: Variance of a 0/1 value at its largest, used for a stratum with a single
#: label (its own variance cannot be estimated): conservative, never zero.
_LONELY_VARIANCE = 0.25


@dataclass(frozen=True)
class ProportionEstimate:
    """A design-weighted accuracy with its uncertainty.

    Attributes
    ----------
    estimate
        Weighted share correct (NaN without labels).
    variance
        Design-based variance of ``estimate``.
    lower, upper
        Korn-Graubard interval at the requested confidence.
    n
        Labels used.
    n_eff
        Effective sample size behind the interval (Korn-Graubard).
    population
        Estimated number of extractions the estimate speaks for.
    strata
        Strata (week x cell) holding at least one of the labels.
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


#: Largest precision gain over simple random sampling an interval may claim.
MAX_DESIGN_GAIN = 2.0

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
    """Estimates for many domains at once, from one row per (stratum, domain).

    Parameters
    ----------
    group
        Domain index (0 .. n_groups - 1) of each row.
    n_population
        ``N_h`` of the row's stratum.
    n_labelled
        ``m_h``: labelled items in the stratum, in any domain.
    n_domain
        ``m_hd``: labelled items of the stratum in this domain.
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
    Cochran, W. G. (1977). Sampling Techniques, 3rd ed., sections 5.2, 6.11.
    Korn, E. L. & Graubard, B. I. (1998). Confidence intervals for proportions
    with small expected number of positive counts estimated from survey data.
    Survey Methodology 24, 193-201.
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
    # Linearised values z_i = y_i - R for domain items, 0 elsewhere: per stratum
    # their sum and sum of squares follow from the counts.
    z_sum = k - r * m_d
    z_squares = k * (1 - r) ** 2 + (m_d - k) * r**2
    with np.errstate(invalid="ignore", divide="ignore"):
        s2 = (z_squares - z_sum**2 / m) / (m - 1)
    s2 = np.where(m > 1, s2, np.where(m_d > 0, _LONELY_VARIANCE, 0.0))
    fpc = np.clip(1 - m / big_n, 0.0, 1.0)
    term = np.divide(big_n**2 * fpc * np.maximum(s2, 0.0), m, out=np.zeros_like(big_n), where=m > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        variance = np.bincount(g, np.nan_to_num(term), minlength=size) / population**2
    n = np.bincount(g, m_d, minlength=size)
    strata = np.bincount(g, (m_d > 0).astype(np.float64), minlength=size)
    n_eff = effective_size(ratio, variance, n, n - strata, confidence=confidence)
    # Cells whose labels are all right (or all wrong) add no variance, so a
    # domain made mostly of them gets an absurd n_eff and a zero-width
    # interval ([99.6%, 99.6%] from 60 labels). Cap n_eff at a design effect
    # of 1/2 against a simple random sample of the same labels (with the
    # finite-population correction): stratification does gain precision, but
    # a larger gain here is the artefact, not the design.
    with np.errstate(invalid="ignore", divide="ignore"):
        srs_limit = MAX_DESIGN_GAIN * n / np.clip(1 - n / population, 1e-9, 1.0)
    n_eff = np.where(np.isfinite(srs_limit), np.minimum(n_eff, srs_limit), n_eff)
    lower, upper = clopper_pearson(ratio * n_eff, n_eff, confidence=confidence)
    return {
        "estimate": ratio,
        "variance": variance,
        "lower": lower,
        "upper": upper,
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
    """One domain's estimate from per-stratum arrays (see :func:`domain_estimates`).

    ``n_domain`` defaults to ``n_labelled``: the domain is every stratum whole,
    the stratified estimator of STATS.md section 2.
    """
    m = np.asarray(n_labelled, dtype=np.float64)
    m_d = m if n_domain is None else np.asarray(n_domain, dtype=np.float64)
    result = domain_estimates(
        np.zeros(m.shape, dtype=np.int64),
        n_population,
        m,
        m_d,
        n_correct,
        n_groups=1,
        confidence=confidence,
    )
    return ProportionEstimate(**{name: values[0].item() for name, values in result.items()})



def effective_size(
    estimate: npt.ArrayLike,
    variance: npt.ArrayLike,
    n: npt.ArrayLike,
    df: npt.ArrayLike,
    *,
    confidence: float = 0.95,
) -> FloatArray:
    """Korn-Graubard effective sample size.

    ``n_eff = p (1 - p) / var`` (``n`` when the variance is 0, as at p = 0 or 1),
    times ``(t_{n-1} / t_df)^2`` for the design's degrees of freedom ``df`` =
    labels minus strata (R survey ``svyciprop``, method "beta").
    """
    p = np.asarray(estimate, dtype=np.float64)
    v = np.asarray(variance, dtype=np.float64)
    count = np.asarray(n, dtype=np.float64)
    freedom = np.asarray(df, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        raw = np.where(v > 0, p * (1 - p) / v, count)
    base = raw
    usable = (count > 1) & (freedom >= 1)
    factor = np.ones_like(base)
    level = 1 - (1 - confidence) / 2
    factor[usable] = (
        stats.t.ppf(level, count[usable] - 1) / stats.t.ppf(level, freedom[usable])
    ) ** 2
    return np.asarray(base * factor, dtype=np.float64)


def clopper_pearson(
    successes: npt.ArrayLike, n: npt.ArrayLike, *, confidence: float = 0.95, sided: str = "two"
) -> tuple[FloatArray, FloatArray]:
    """Clopper-Pearson (exact binomial) bounds, also for fractional counts.

    ``sided="two"`` gives the two-sided ``confidence`` interval; ``"upper"`` /
    ``"lower"`` give a one-sided bound at ``confidence`` (the other side is 0 or 1).
    Beta quantiles: lower ``Beta(x, n - x + 1)``, upper ``Beta(x + 1, n - x)``
    (Clopper & Pearson 1934; STATS.md section 3).
    """
    if sided not in ("two", "upper", "lower"):
        raise SamplingError(f"sided must be 'two', 'upper' or 'lower', got {sided!r}")
    x = np.atleast_1d(np.asarray(successes, dtype=np.float64))
    size = np.atleast_1d(np.asarray(n, dtype=np.float64))
    alpha = 1 - confidence
    tail = alpha / 2 if sided == "two" else alpha
    valid = size > 0
    x = np.clip(x, 0, np.where(valid, size, 0))
    lower = np.full(x.shape, np.nan)
    upper = np.full(x.shape, np.nan)
    low_ok = valid & (x > 0)
    high_ok = valid & (x < size)
    lower[valid & ~low_ok] = 0.0
    upper[valid & ~high_ok] = 1.0
    lower[low_ok] = stats.beta.ppf(tail, x[low_ok], size[low_ok] - x[low_ok] + 1)
    upper[high_ok] = stats.beta.ppf(1 - tail, x[high_ok] + 1, size[high_ok] - x[high_ok])
    if sided == "upper":
        lower[valid] = 0.0
    elif sided == "lower":
        upper[valid] = 1.0
    return lower, upper
