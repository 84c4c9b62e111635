from __future__ import annotations

import math

import numpy as np
import pytest
from fieldtrust.sampling.allocation import neyman_allocation, neyman_weights, rate_allocation
from fieldtrust.sampling.design import Design
from hypothesis import given, settings
from hypothesis import strategies as st

cells = st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=30)


@given(
    population=cells,
    rate=st.floats(min_value=0.001, max_value=1.0),
    minimum=st.integers(min_value=2, max_value=50),
    cap=st.one_of(st.none(), st.integers(min_value=50, max_value=400)),
)
@settings(max_examples=100, deadline=None)
def test_rate_rule_keeps_minimums_and_caps(
    population: list[int], rate: float, minimum: int, cap: int | None
) -> None:
    design = Design(base_rate=rate, minimum=minimum, cap=cap)
    big_n = np.array(population)
    size = rate_allocation(big_n, np.zeros(len(big_n), dtype=bool), design)
    expected = [min(n, cap or n, max(minimum, math.ceil(round(rate * n, 9)))) for n in population]
    assert size.tolist() == expected
    assert (size >= np.minimum(big_n, minimum)).all()
    assert (size <= big_n).all()
    if cap is not None:
        assert (size <= cap).all()


def test_rate_rule_boosts_new_versions_and_rounds_exactly() -> None:
    design = Design(base_rate=0.01, minimum=2, boost=5)
    size = rate_allocation(np.array([300, 300, 1]), np.array([False, True, True]), design)
    # 0.01 * 300 is 3.0000000000000004 in floating point: still 3 items, not 4.
    assert size.tolist() == [3, 15, 1]


@given(
    population=cells,
    p=st.lists(st.floats(min_value=0.001, max_value=0.5), min_size=30, max_size=30),
    budget=st.integers(min_value=1, max_value=20000),
    minimum=st.integers(min_value=2, max_value=30),
    cap=st.one_of(st.none(), st.integers(min_value=30, max_value=2000)),
)
@settings(max_examples=100, deadline=None)
def test_neyman_keeps_minimums_and_spends_the_budget(
    population: list[int], p: list[float], budget: int, minimum: int, cap: int | None
) -> None:
    big_n = np.array(population)
    weights = neyman_weights(big_n, np.array(p[: len(population)]), np.zeros(len(big_n), bool), 5)
    size = neyman_allocation(big_n, weights, budget=budget, minimum=minimum, cap=cap)
    lo = np.minimum(big_n, minimum)
    hi = big_n if cap is None else np.minimum(big_n, cap)
    assert (size >= lo).all() and (size <= hi).all()
    if lo.sum() >= budget:
        assert size.tolist() == lo.tolist()  # infeasible: minimums win, the caller reports it
    elif hi.sum() <= budget:
        assert size.tolist() == hi.tolist()
    else:
        assert size.sum() == budget


def test_neyman_follows_n_times_s() -> None:
    big_n = np.array([10000, 10000, 40000])
    p = np.array([0.02, 0.18, 0.02])
    weights = neyman_weights(big_n, p, np.zeros(3, bool), 5)
    size = neyman_allocation(big_n, weights, budget=1000, minimum=2)
    expected = 1000 * weights / weights.sum()
    assert np.abs(size - expected).max() < 1
    assert size.sum() == 1000


def test_neyman_boosts_new_versions() -> None:
    big_n = np.array([1000, 1000])
    weights = neyman_weights(big_n, np.array([0.05, 0.05]), np.array([False, True]), 5)
    assert neyman_allocation(big_n, weights, budget=600, minimum=2).tolist() == [100, 500]


def test_neyman_minimums_then_proportional() -> None:
    size = neyman_allocation(np.array([5, 100000]), np.array([1.0, 1000.0]), budget=50, minimum=10)
    assert size.tolist() == [5, 45]


@pytest.mark.parametrize("budget", [1, 5, 19])
def test_minimums_over_budget_return_minimums(budget: int) -> None:
    size = neyman_allocation(np.array([100, 100]), np.array([1.0, 1.0]), budget=budget, minimum=10)
    assert size.tolist() == [10, 10]
