"""Permanent random numbers (PRN), computed inside DuckDB (STATS.md section 8).

Every extraction of a week gets a fixed pseudo-random number from the MD5
digest of ``f"{seed}:{week}:{extraction_id}"``. A cell's sample is the ``n_h``
items with the smallest numbers: a simple random sample of the cell that does
not depend on row order, threads or DuckDB's internal ``hash()`` (whose values
may change between releases; MD5 never does).

Definition, so anyone can recompute it outside fieldtrust::

    H = int.from_bytes(hashlib.md5(key.encode()).digest(), "little")  # DuckDB md5_number
    u = (H >> 75) / 2**53                                             # in [0, 1)

Items are ranked by the full 128-bit ``H``; ``u`` keeps its top 53 bits so it is
an exact double strictly below 1 and sorts like ``H``.
"""

from __future__ import annotations

import hashlib

import numpy as np
from scipy import stats

#: Chance that a cell's candidate cutoff holds fewer than ``n_h`` items; then the
#: draw falls back to ranking every row, so the cutoff only saves time.
_CUTOFF_MISS = 1e-12

#: 2**53 as a SQL literal: u = (H >> 75) / 2**53 is exact in a DOUBLE.
_TWO_53 = "9007199254740992.0"


def prn_key(seed: int, week: str, extraction_id: str) -> str:
    """The text hashed for one extraction."""
    return f"{seed}:{week}:{extraction_id}"


def prn_hash(seed: int, week: str, extraction_id: str) -> int:
    """The 128-bit rank key ``H`` (what DuckDB's ``md5_number`` returns)."""
    key = prn_key(seed, week, extraction_id).encode("utf-8")
    digest = hashlib.md5(key, usedforsecurity=False).digest()
    return int.from_bytes(digest, "little")


def prn(seed: int, week: str, extraction_id: str) -> float:
    """The permanent random number ``u`` in [0, 1), as stored in ``audit_items.prn``."""
    return (prn_hash(seed, week, extraction_id) >> 75) / 2**53


def prn_hash_sql(id_column: str, *, seed_param: str = "$seed", week_param: str = "$week") -> str:
    """SQL for ``H`` of ``id_column``, with the seed and week as bound parameters."""
    return f"md5_number(CAST({seed_param} AS VARCHAR) || ':' || {week_param} || ':' || {id_column})"


def prn_sql(hash_sql: str) -> str:
    """SQL turning an ``H`` expression into ``u`` in [0, 1)."""
    return f"(({hash_sql}) >> 75)::DOUBLE / {_TWO_53}"


def candidate_cutoffs(n_population: np.ndarray, n_sample: np.ndarray) -> np.ndarray:
    """Per cell, a PRN value that the ``n_h``-th smallest PRN exceeds with chance 1e-12.

    The ``n``-th smallest of ``N`` uniform numbers is Beta(n, N - n + 1)
    (David & Nagaraja, Order Statistics, 2.2); rows above the cutoff need not
    be ranked. Full cells get 2, i.e. no cutoff.
    """
    population = np.asarray(n_population, dtype=np.float64)
    size = np.asarray(n_sample, dtype=np.float64)
    partial = size < population
    cutoff = np.full(population.shape, 2.0)
    cutoff[partial] = stats.beta.isf(
        _CUTOFF_MISS, size[partial], population[partial] - size[partial] + 1
    )
    return cutoff
