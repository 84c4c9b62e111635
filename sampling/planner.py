"""How many labels a measurement needs, and what a design would draw (STATS.md section 8).

Nothing here writes to the store: plan first, then draw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
from fieldtrust.sampling.cells import CELL_COLUMNS, plan_frame
from fieldtrust.sampling.design import Design
from fieldtrust.store.weeks import Week
from scipy import stats

from fieldtrust.errors import InputError


def sample_size(p: float, margin: float, N: int | None = None, z: float = 1.96) -> int:
    """Labels needed to measure a proportion ``p`` to +-``margin`` (normal approximation).

    ``n0 = z^2 p (1 - p) / E^2`` and, for a finite population of ``N``,
    ``n = n0 / (1 + (n0 - 1) / N)``; rounded up (Cochran, Sampling Techniques,
    4.4). ``p = 0.05, E = 0.02`` gives 457.

    Raises
    ------
    ValueError
        ``p`` outside [0, 1], ``margin`` not in (0, 1), ``N`` below 1.
    """
    if not 0 <= p <= 1:
        raise InputError(f"p = {p} must be in [0, 1]")
    if not 0 < margin < 1:
        raise InputError(f"margin = {margin} must be in (0, 1), e.g. 0.02 for +-2 points")
    if N is not None and N < 1:
        raise InputError(f"N = {N} must be at least 1")
    n0 = z**2 * p * (1 - p) / margin**2
    n = n0 if N is None else n0 / (1 + (n0 - 1) / N)
    # Round away float noise before rounding up (457.0000000001 is 457).
    size = math.ceil(round(n, 9))
    return size if N is None else min(size, N)


def attribute_sample_size(
    tolerable_rate: float, *, expected_deviations: int = 0, risk: float = 0.05
) -> int:
    """Smallest ``n`` with ``P(X <= k | n, tolerable_rate) <= risk`` (binomial).

    Seeing at most ``k`` deviations in ``n`` items then supports "the rate is
    below ``tolerable_rate``" at ``1 - risk`` confidence (AICPA Audit Guide,
    Audit Sampling, attribute sampling tables): 5% -> 59, 3% -> 99, 2% -> 149
    at zero deviations and 5% risk.
    """
    if not 0 < tolerable_rate < 1:
        raise InputError(f"tolerable_rate = {tolerable_rate} must be in (0, 1)")
    if not 0 < risk < 1:
        raise InputError(f"risk = {risk} must be in (0, 1)")
    if expected_deviations < 0:
        raise InputError(f"expected_deviations = {expected_deviations} must be 0 or more")
    n = expected_deviations + 1
    # The cdf falls as n grows: a doubling search then bisection finds the first n.
    while stats.binom.cdf(expected_deviations, n, tolerable_rate) > risk:
        n *= 2
    low, high = max(expected_deviations + 1, n // 2), n
    while low < high:
        middle = (low + high) // 2
        if stats.binom.cdf(expected_deviations, middle, tolerable_rate) <= risk:
            high = middle
        else:
            low = middle + 1
    return low


def attribute_sampling_table(
    rates: Sequence[float] = (0.10, 0.05, 0.03, 0.02, 0.01),
    deviations: Sequence[int] = (0, 1, 2, 3),
    *,
    risk: float = 0.05,
) -> pa.Table:
    """:func:`attribute_sample_size` per tolerable rate (rows) and deviation count (columns).

    Columns: ``tolerable_rate``, then ``"k deviations"`` for each ``k`` of ``deviations``.
    """
    columns: dict[str, list[float] | list[int]] = {"tolerable_rate": [float(r) for r in rates]}
    for k in deviations:
        columns[f"{k} deviations"] = [
            attribute_sample_size(rate, expected_deviations=k, risk=risk) for rate in rates
        ]
    return pa.table(columns)


PREVIEW_COLUMNS = (*CELL_COLUMNS, "n_sample", "inclusion_prob", "boosted", "error_rate", "margin")


@dataclass(frozen=True)
class DesignPreview:
    """What drawing a week with a design would give, per cell and in total."""

    week: Week
    n_population: int
    n_sample: int
    budget: int | None  # None without a label budget
    over_budget: bool  # the minimums alone exceed the budget
    cells: pa.Table  # one row per cell, columns PREVIEW_COLUMNS

    def to_dict(self) -> dict[str, Any]:
        """What ``fieldtrust plan --json`` prints: the totals, then the cells as rows."""
        totals = {name: getattr(self, name) for name in self.__dataclass_fields__
                  if name != "cells"}
        return {**totals, "cells": self.cells.to_pylist()}


def preview_design(
    con: duckdb.DuckDBPyConnection, week: Week | str, design: Design | None = None, *,
    z: float = 1.96,
) -> DesignPreview:
    """What drawing ``week`` with ``design`` would give, per cell, without writing.

    Returns
    -------
    DesignPreview
        The totals, and ``cells``: cell, doc_type, field, band,
        version_status, n_population (``N_h``), n_sample (``n_h``),
        inclusion_prob (``pi_h``), boosted, error_rate (Neyman's ``p_h``,
        budget designs only, else null), margin (expected +- of the cell's
        accuracy at ``p_h`` or the prior, with the finite-population
        correction).
    """
    week = Week(week)
    design = design or Design()
    cells = plan_frame(con, week, design, from_rollup=True)  # a page never counts the rows
    p = cells["error_rate"].fillna(design.prior_error).to_numpy()
    population = cells["n_population"].to_numpy(dtype=np.float64)
    size = cells["n_sample"].to_numpy(dtype=np.float64)
    fpc = np.clip(1 - size / population, 0, 1)
    cells["margin"] = z * np.sqrt(fpc * p * (1 - p) / np.maximum(size, 1))
    total = int(cells["n_sample"].sum())
    return DesignPreview(
        week=week,
        n_population=int(cells["n_population"].sum()),
        n_sample=total,
        budget=design.budget,
        over_budget=design.budget is not None and total > design.budget,
        cells=pa.Table.from_pandas(cells[list(PREVIEW_COLUMNS)], preserve_index=False),
    )
