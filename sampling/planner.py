"""How many labels a measurement needs, and what a design would draw (STATS.md section 8).

Nothing here writes to the store: plan first, then draw.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import duckdb
import numpy as np
import pandas as pd
from fieldtrust.sampling.cells import plan_cells
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.errors import SamplingError
from scipy import stats


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
        raise SamplingError(f"p = {p} must be in [0, 1]")
    if not 0 < margin < 1:
        raise SamplingError(f"margin = {margin} must be in (0, 1), e.g. 0.02 for +-2 points")
    if N is not None and N < 1:
        raise SamplingError(f"N = {N} must be at least 1")
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
        raise SamplingError(f"tolerable_rate = {tolerable_rate} must be in (0, 1)")
    if not 0 < risk < 1:
        raise SamplingError(f"risk = {risk} must be in (0, 1)")
    if expected_deviations < 0:
        raise SamplingError(f"expected_deviations = {expected_deviations} must be 0 or more")
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
) -> pd.DataFrame:
    """:func:`attribute_sample_size` per tolerable rate (rows) and deviation count (columns)."""
    table = pd.DataFrame(
        [
            [attribute_sample_size(rate, expected_deviations=k, risk=risk) for k in deviations]
            for rate in rates
        ],
        index=pd.Index(list(rates), name="tolerable_rate"),
        columns=[f"{k} deviations" for k in deviations],
    )
    return table


PREVIEW_COLUMNS = (
    "cell",
    "doc_type",
    "field",
    "band",
    "version_status",
    "n_population",
    "n_sample",
    "inclusion_prob",
    "boosted",
    "error_rate",
    "margin",
)


def preview_design(
    con: duckdb.DuckDBPyConnection, week: str, design: Design | None = None, *, z: float = 1.96
) -> pd.DataFrame:
    """What drawing ``week`` with ``design`` would give, per cell, without writing.

    Returns
    -------
    pandas.DataFrame
        cell, doc_type, field, band, version_status, n_population (``N_h``),
        n_sample (``n_h``), inclusion_prob (``pi_h``), boosted, error_rate
        (Neyman's ``p_h``, budget designs only), margin (expected +- of the
        cell's accuracy at ``p_h`` or the prior, with the finite-population
        correction). ``frame.attrs`` holds the totals: ``n_population``,
        ``n_sample`` and ``budget`` (None without one); ``over_budget`` is
        true when the minimums alone exceed the budget.
    """
    design = design or Design()
    cells = plan_cells(con, week, design, from_rollup=True)  # a page never counts the rows
    p = cells["error_rate"].fillna(design.prior_error).to_numpy()
    population = cells["n_population"].to_numpy(dtype=np.float64)
    size = cells["n_sample"].to_numpy(dtype=np.float64)
    fpc = np.clip(1 - size / population, 0, 1)
    cells["margin"] = z * np.sqrt(fpc * p * (1 - p) / np.maximum(size, 1))
    cells = cells[list(PREVIEW_COLUMNS)].copy()
    total = int(cells["n_sample"].sum())
    cells.attrs = {
        "week": week,
        "n_population": int(cells["n_population"].sum()),
        "n_sample": total,
        "budget": design.budget,
        "over_budget": design.budget is not None and total > design.budget,
    }
    return cells
