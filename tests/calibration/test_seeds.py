"""The miss-rate bound from seeds: a confidence sequence, checked by integration and simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from fieldtrust.calibration.seeds import (
    MIN_SEEDS,
    PRIOR,
    _log_mixture_evalue,
    miss_allowance,
    miss_rate_upper_bound,
    seeds_for_rate,
)
from scipy.integrate import quad
from scipy.stats import beta as beta_dist
from scipy.stats import binomtest

from fieldtrust.errors import InputError


def test_the_mixture_matches_numerical_integration() -> None:
    k, n, rate = 9, 80, 0.2
    a, b = PRIOR
    prior = beta_dist(a, b)

    def ratio(p: float) -> float:
        return (p / rate) ** k * ((1 - p) / (1 - rate)) ** (n - k) * prior.pdf(p)

    integral, _ = quad(ratio, 0, rate, limit=200)
    expected = math.log(integral / prior.cdf(rate))
    assert _log_mixture_evalue(k, n, rate, PRIOR) == pytest.approx(expected, rel=1e-8)


def test_no_seeds_bound_nothing_and_more_misses_raise_the_bound() -> None:
    assert miss_rate_upper_bound(0, 0, delta=0.05) == 1.0
    bounds = [miss_rate_upper_bound(k, 100, delta=0.05) for k in (0, 5, 10, 20, 40)]
    assert bounds == sorted(bounds) and bounds[0] < 0.06
    assert miss_rate_upper_bound(10, 1000, delta=0.05) < miss_rate_upper_bound(1, 100, delta=0.05)


@pytest.mark.parametrize(("k", "n"), [(3, 50), (10, 100), (30, 300)])
def test_the_sequence_is_wider_than_the_one_look_exact_bound(k: int, n: int) -> None:
    one_look = binomtest(k, n).proportion_ci(0.90, "exact").high  # one-sided 95%
    assert miss_rate_upper_bound(k, n, delta=0.05) >= one_look


def test_the_bound_holds_at_every_look_in_simulation() -> None:
    rng = np.random.default_rng(5)
    reps, n, rate = 400, 300, 0.1
    misses = np.cumsum(rng.random((reps, n)) < rate, axis=1)
    looks = np.arange(9, n, 10)
    violated = [any(miss_rate_upper_bound(int(m[i]), i + 1, delta=0.05) < rate for i in looks)
                for m in misses]
    rate_violated = float(np.mean(violated))
    print(f"\nmiss-rate bound below the truth at some look: {rate_violated:.3f} (400 runs)")
    assert rate_violated <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / reps)


def test_the_allowance_lowers_the_level_and_refuses_without_seeds() -> None:
    allowance = miss_allowance(0.05, seeds=200, misses=20, delta=0.05, seed_share=0.2)
    assert allowance.delta_labels == pytest.approx(0.04)
    assert allowance.max_error == pytest.approx(
        0.05 * (1 - miss_rate_upper_bound(20, 200, delta=0.01)))
    assert not allowance.refused
    few = miss_allowance(0.05, seeds=MIN_SEEDS - 1, misses=0, delta=0.05)
    assert few.refused and f"{MIN_SEEDS - 1} seeds judged" in (few.reason or "")


def test_seed_counts_and_input_checks() -> None:
    assert seeds_for_rate(0.1, 95) == 10
    with pytest.raises(InputError, match="misses"):
        miss_rate_upper_bound(5, 3, delta=0.05)
