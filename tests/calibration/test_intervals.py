"""Intervals and label counts against scipy and STATS.md's tables."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.survey import (
    clopper_pearson_interval,
    error_lower_bound,
    error_upper_bound,
    jeffreys_interval,
    korn_graubard_interval,
    labels_needed,
    labels_needed_at_rate,
    wilson_interval,
)
from scipy.stats import beta, binomtest

from fieldtrust.errors import InputError

CASES = [(0, 1), (0, 10), (1, 10), (3, 100), (50, 100), (99, 100), (100, 100), (7, 13), (0, 400),
         (399, 400), (123, 456)]


@pytest.mark.parametrize("level", [0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize(("k", "n"), CASES)
@pytest.mark.parametrize(
    ("method", "interval"), [("exact", clopper_pearson_interval), ("wilson", wilson_interval)]
)
def test_intervals_equal_scipy_binomtest(method, interval, k, n, level) -> None:
    expected = binomtest(k, n).proportion_ci(confidence_level=level, method=method)
    low, high = interval(k, n, confidence=level)
    assert low == pytest.approx(expected.low, abs=1e-9)
    assert high == pytest.approx(expected.high, abs=1e-9)


def test_intervals_vectorise_like_scalars() -> None:
    k = np.array([c[0] for c in CASES])
    n = np.array([c[1] for c in CASES])
    low, high = wilson_interval(k, n)
    for i, (ki, ni) in enumerate(CASES):
        assert (low[i], high[i]) == pytest.approx(wilson_interval(ki, ni), abs=1e-12)


def test_stats_md_check_values() -> None:
    # STATS.md section 3: 3/100 -> Wilson [0.0103, 0.0845], Clopper-Pearson [0.0062, 0.0852].
    assert wilson_interval(3, 100) == pytest.approx((0.0103, 0.0845), abs=5e-5)
    assert clopper_pearson_interval(3, 100) == pytest.approx((0.0062, 0.0852), abs=5e-5)


@pytest.mark.parametrize(("k", "n"), [(0, 10), (3, 100), (10, 10), (20, 50)])
def test_jeffreys_is_beta_quantiles_with_end_corrections(k, n) -> None:
    low, high = jeffreys_interval(k, n, confidence=0.9)
    assert low == (0.0 if k == 0 else pytest.approx(beta.ppf(0.05, k + 0.5, n - k + 0.5)))
    assert high == (1.0 if k == n else pytest.approx(beta.ppf(0.95, k + 0.5, n - k + 0.5)))


@pytest.mark.parametrize(("k", "n"), [(0, 59), (1, 93), (5, 208), (3, 20), (20, 20), (0, 0)])
def test_one_sided_bounds_match_scipy(k, n) -> None:
    upper = error_upper_bound(k, n, delta=0.05)
    lower = error_lower_bound(k, n, delta=0.05)
    if n == 0 or k == n:
        assert upper == 1.0
    else:
        assert upper == pytest.approx(beta.ppf(0.95, k + 1, n - k), abs=1e-12)
        ci = binomtest(k, n, alternative="less").proportion_ci(0.95, "exact")
        assert upper == pytest.approx(ci.high, abs=1e-9)
    if k == 0:
        assert lower == 0.0
    else:
        ci = binomtest(k, n, alternative="greater").proportion_ci(0.95, "exact")
        assert lower == pytest.approx(ci.low, abs=1e-9)


def test_label_count_table_of_stats_md() -> None:
    # STATS.md section 6: at a = 0.95, delta = 0.05.
    assert [labels_needed(k) for k in range(6)] == [59, 93, 124, 153, 181, 208]


@pytest.mark.parametrize("errors", range(6))
def test_labels_needed_is_the_first_count_that_certifies(errors) -> None:
    n = labels_needed(errors)
    assert error_upper_bound(errors, n) <= 0.05 < error_upper_bound(errors, n - 1)


@pytest.mark.parametrize(
    ("rate", "target", "delta"),
    [(0.0, 0.95, 0.05), (0.01, 0.95, 0.05), (0.03, 0.95, 0.05), (0.04, 0.95, 0.05),
     (0.045, 0.95, 0.05), (0.02, 0.9, 0.1), (0.004, 0.99, 0.05), (0.012, 0.98, 0.01)],
)
def test_labels_needed_at_rate_equals_a_brute_force_scan(rate, target, delta) -> None:
    n = labels_needed_at_rate(rate, target=target, delta=delta)
    assert n is not None
    counts = np.arange(1, n + 1, dtype=float)
    bounds = error_upper_bound(np.floor(rate * counts + 0.5), counts, delta=delta)
    first = int(counts[np.flatnonzero(bounds <= 1 - target)[0]])
    assert n == first


@pytest.mark.parametrize("rate", [0.05, 0.2, 1.0])
def test_labels_needed_at_a_rate_at_or_above_the_limit_is_none(rate) -> None:
    assert labels_needed_at_rate(rate) is None


def test_korn_graubard_equals_clopper_pearson_when_weights_are_equal() -> None:
    # A simple random sample: variance p(1-p)/n gives n_eff = n exactly.
    k, n = 37, 400
    p = k / n
    assert korn_graubard_interval(p, p * (1 - p) / n, n) == pytest.approx(
        clopper_pearson_interval(k, n), abs=1e-12
    )


def test_korn_graubard_widens_with_the_design_effect() -> None:
    p, n = 0.9, 400
    srs = korn_graubard_interval(p, p * (1 - p) / n, n)
    deff3 = korn_graubard_interval(p, 3 * p * (1 - p) / n, n)
    assert deff3[0] < srs[0] and deff3[1] > srs[1]
    # n_eff = n / 3: the interval of 120 successes in 133.3 trials.
    assert deff3 == pytest.approx(clopper_pearson_interval(p * n / 3, n / 3), abs=1e-12)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: wilson_interval(5, 3), "0 <= successes <= trials"),
        (lambda: wilson_interval(1, 3, confidence=1.5), "confidence 1.5"),
        (lambda: error_upper_bound(1, 3, delta=0.0), "delta 0.0"),
        (lambda: labels_needed(-1), "errors must be >= 0"),
        (lambda: labels_needed_at_rate(0.01, target=1.0), "target 1.0"),
    ],
)
def test_bad_arguments_say_what_is_wrong(call, message) -> None:
    with pytest.raises(InputError, match=message):
        call()
