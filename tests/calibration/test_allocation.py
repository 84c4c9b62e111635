"""Proportional and Neyman allocation with floors (Cochran 1977, section 5.5)."""

from __future__ import annotations

import numpy as np
import pytest
from fieldtrust.calibration.allocation import allocate

from fieldtrust.errors import InputError


def test_proportional_allocation_follows_the_cell_sizes() -> None:
    np.testing.assert_array_equal(allocate([12000, 6000, 2000], 1000), [600, 300, 100])


def test_neyman_allocation_follows_size_times_standard_deviation() -> None:
    size = np.array([12000, 6000, 2000])
    p = np.array([0.01, 0.04, 0.12])
    sizes = allocate(size, 1000, allocation="neyman", expected_error=p)
    exact = 1000 * size * np.sqrt(p * (1 - p)) / np.sum(size * np.sqrt(p * (1 - p)))
    assert sizes.sum() == 1000
    np.testing.assert_allclose(sizes, exact, atol=1)


def test_floors_and_caps_hold_and_the_rest_is_reallocated() -> None:
    sizes = allocate([12000, 6000, 20, 900], 1000, allocation="neyman",
                     expected_error=[0.002, 0.04, 0.12, 0.01], floor=50)
    assert sizes[2] == 20  # a cell smaller than the floor is taken whole
    assert sizes[0] >= 50 and sizes[3] >= 50  # every band audited
    assert sizes.sum() == 1000


def test_a_budget_below_the_floors_shares_them() -> None:
    sizes = allocate([500, 500, 500], 90, floor=50)
    assert sizes.sum() == 90 and np.all(sizes == 30)


def test_unknown_allocations_and_missing_rates_are_refused() -> None:
    with pytest.raises(InputError, match="not one of"):
        allocate([10], 5, allocation="optimal")
    with pytest.raises(InputError, match="expected_error"):
        allocate([10], 5, allocation="neyman")
