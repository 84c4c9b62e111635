"""Writes that retry when a concurrent writer got to the same rows first.

DuckDB checks conflicts optimistically: two transactions that insert the same
key both run, and the second to commit fails (``TransactionException``), or
fails at the insert (``ConstraintException``) when the first already
committed. The work function re-reads the store on every attempt, so a retry
either succeeds on fresh data or raises a clear error (a label already there,
an item already taken).

Every history write also appends to the one history chain (:mod:`fieldtrust.store.chain`),
so any two concurrent writes now conflict on the chain head, not only two
writes to the same item. Writes in one process therefore take a lock for the
length of their transaction (they are milliseconds long): threads queue instead
of failing and redoing their work in lockstep. Processes never write at once
(DuckDB locks the file per process); the retry stays for writers that do not
come through here.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb
from fieldtrust.store.connection import transaction

from fieldtrust.errors import StoreError

T = TypeVar("T")

#: Attempts before a write gives up; the pause doubles from 10 ms up to 0.5 s.
MAX_ATTEMPTS = 8

_WRITE_LOCK = threading.RLock()
# Jitter, so two writers that collided do not retry in step (not a statistic).
_JITTER = random.Random()


def write_with_retry(
    con: duckdb.DuckDBPyConnection,
    work: Callable[[duckdb.DuckDBPyConnection], T],
    *,
    what: str,
) -> T:
    """Run ``work(con)`` in one transaction; retry write-write conflicts a bounded time."""
    pause = 0.01
    for attempt in range(1, MAX_ATTEMPTS + 1):
        try:
            with _WRITE_LOCK, transaction(con):
                return work(con)
        except (duckdb.TransactionException, duckdb.ConstraintException) as exc:
            if attempt == MAX_ATTEMPTS:
                raise StoreError(
                    f"{what}: gave up after {MAX_ATTEMPTS} attempts because other writers kept"
                    f" changing the same rows ({exc}); try again"
                ) from exc
            time.sleep(pause * _JITTER.uniform(0.5, 1.5))
            pause = min(pause * 2, 0.5)
    raise AssertionError("unreachable")  # pragma: no cover


def first_row(rows: list[tuple[Any, ...]]) -> tuple[Any, ...] | None:
    """The first of ``fetchall()``'s rows, or None.

    Used instead of ``fetchone()``: DuckDB 2.0 keeps a result fetched with
    ``fetchone()`` open, and the connection then refuses the next ``con.sql``
    (ResourceInUseException), which would break whoever uses it after us.
    """
    return rows[0] if rows else None
