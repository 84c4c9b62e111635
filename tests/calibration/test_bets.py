"""Bets: Kelly's for one cell, growth-optimal across cells, checked by direct optimisation."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.bets import growth_bets, kelly_bet, scaled_bets
from scipy.optimize import minimize

from fieldtrust.errors import InputError


def expected_growth(bets: np.ndarray, size: np.ndarray, pi: np.ndarray, p: np.ndarray,
                    max_error: float) -> float:
    """Expected log evidence per label of the stratified statistic, with replacement.

    The least favourable null splits ``a N`` errors so that every cell's
    marginal cost ``pi c / (1 - c eta)`` is one multiplier ``nu``, which gives
    ``nu = n / (sum N / c - a N)`` and the closed form below.
    """
    n = np.sum(pi * size)
    nu = n / (np.sum(size / bets) - max_error * size.sum())
    labels = pi * size
    return float(np.sum(labels * (p * np.log1p(-bets) - np.log(pi * bets))) / n + np.log(nu))


def test_one_cell_gets_kellys_bet() -> None:
    assert kelly_bet(0.05, 0.03) == pytest.approx(0.02 / (0.05 * 0.97))
    assert growth_bets([1000], [0.1], 0.03, max_error=0.05)[0] == pytest.approx(
        kelly_bet(0.05, 0.03), rel=1e-8)
    assert kelly_bet(0.05, 0.06) == 0.0


def test_equal_inclusion_probabilities_give_one_bet() -> None:
    bets = growth_bets([1000, 300, 4000], [0.1, 0.1, 0.1], 0.03, max_error=0.05)
    np.testing.assert_allclose(bets, kelly_bet(0.05, 0.03), rtol=1e-8)


@pytest.mark.parametrize(("pi", "p"), [
    ([0.033, 0.05, 0.15], [0.01, 0.03, 0.10]),  # boosted low band, errors where labels are
    ([0.05, 0.05, 0.05], [0.005, 0.03, 0.12]),  # proportional, errors by band
    ([0.02, 0.06, 0.10], [0.02, 0.02, 0.02]),  # Neyman-like spread, flat prior
])
def test_growth_bets_maximise_the_expected_growth(pi: list[float], p: list[float]) -> None:
    size = np.array([6000.0, 3000.0, 1000.0])
    pi_a, p_a = np.array(pi), np.array(p)
    bets = growth_bets(size, pi_a, p_a, max_error=0.05, max_bet=0.99)
    best = minimize(lambda c: -expected_growth(c, size, pi_a, p_a, 0.05), x0=np.full(3, 0.3),
                    bounds=[(1e-3, 0.99)] * 3, method="L-BFGS-B")
    assert expected_growth(bets, size, pi_a, p_a, 0.05) == pytest.approx(-best.fun, abs=1e-7)
    np.testing.assert_allclose(bets, best.x, atol=2e-3)


def test_rows_are_weeks_solved_at_once() -> None:
    size = np.array([[6000, 3000, 1000], [100, 0, 40]])
    pi = np.array([[0.03, 0.05, 0.15], [0.2, 0.1, 1.0]])
    both = growth_bets(size, pi, 0.03, max_error=0.05)
    for row in range(2):
        np.testing.assert_allclose(both[row], growth_bets(size[row], pi[row], 0.03,
                                                          max_error=0.05), rtol=1e-9)
    assert both[1, 1] == 0.0  # an empty cell bets nothing


def test_a_prior_below_target_still_bets() -> None:
    bets = growth_bets([1000, 1000], [0.1, 0.1], 0.08, max_error=0.05)
    assert np.all(bets > 0)


def test_scaled_bets_fall_with_the_inclusion_probability() -> None:
    bets = scaled_bets([0.02, 0.04, 0.08], max_error=0.05, prior_error=0.03)
    np.testing.assert_allclose(bets, kelly_bet(0.05, 0.03) * np.array([1, 0.5, 0.25]))


def test_bets_refuse_impossible_settings() -> None:
    with pytest.raises(InputError, match="max_error"):
        growth_bets([10], [0.1], 0.03, max_error=1.0)
    with pytest.raises(InputError, match="inclusion probabilities"):
        growth_bets([10], [1.5], 0.03, max_error=0.05)
