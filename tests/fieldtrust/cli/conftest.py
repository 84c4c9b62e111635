"""Fixtures of the CLI tests that the package test folders also use.

The stores themselves come from the root conftest (``db_path``, ``review_store``)
or from the package helpers (``tests.sampling.conftest.World``,
``tests.calibration.calib_store``), so a command and its library are tested on
the same data.
"""

from __future__ import annotations

import pytest

from tests.sampling.conftest import World


@pytest.fixture
def world() -> World:
    """The sampling tests' store builder: users, synthetic weeks, labels from the truth."""
    return World()
