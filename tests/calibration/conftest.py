"""Fixtures of the calibration tests: stores built row by row with SQL (see calib_store)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import duckdb
import pandas as pd
import pytest
from calib_store import add_stratum as _add_stratum

AddStratum = Callable[..., pd.DataFrame]


@pytest.fixture
def add_stratum(con: duckdb.DuckDBPyConnection) -> AddStratum:
    """:func:`calib_store.add_stratum` bound to the test's store."""
    return partial(_add_stratum, con)
