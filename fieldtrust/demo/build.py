"""Write the demo into a store, and describe what was planted there.

The extractions go through the same validated ingest as a user's file
(``store.ingest.ingest_table``); the hidden truth goes into ``demo_truth``,
which nothing but the demo and its simulated reviewers ever reads.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb
import pyarrow as pa

from fieldtrust import store
from fieldtrust.demo.generator import check_size, generate_demo
from fieldtrust.demo.layout import with_locations
from fieldtrust.demo.reviewers import simulate_reviews
from fieldtrust.demo.summary import DemoSummary, truth_summary
from fieldtrust.store.errors import FieldtrustError
from fieldtrust.store.ingest import ingest_table


class DemoStoreNotEmptyError(FieldtrustError, FileExistsError):
    """The target store already holds extractions; the demo only fills an empty one."""


@dataclass(frozen=True)
class _Counts:
    extractions: int
    truth: int


def _counts(con: duckdb.DuckDBPyConnection) -> _Counts:
    row = con.execute(
        "SELECT (SELECT count(*) FROM extractions), (SELECT count(*) FROM demo_truth)"
    ).fetchall()[0]
    return _Counts(int(row[0]), int(row[1]))


def build_demo(
    con: duckdb.DuckDBPyConnection,
    *,
    seed: int = 7,
    rows: int = 300_000,
    end_week: str | None = None,
    weeks: int = 8,
    labelled: bool = True,
) -> DemoSummary:
    """Fill an empty store with the demo extractions and their hidden truth.

    Parameters
    ----------
    con
        A read-write connection to an empty, migrated store.
    seed, rows, end_week, weeks
        See :func:`fieldtrust.demo.generator.generate_demo`; the same values
        give the same rows, ids and timestamps.
    labelled
        Also draw the weekly audit samples and label them with simulated
        reviewers (:func:`fieldtrust.demo.reviewers.simulate_reviews`).

    Returns
    -------
    DemoSummary
        What was built, with the true accuracy overall next to the worst strata.

    Raises
    ------
    DemoStoreNotEmptyError
        The store already holds extractions or demo truth.
    """
    started = time.perf_counter()
    counts = _counts(con)
    if counts.extractions or counts.truth:
        raise DemoStoreNotEmptyError(
            f"the store already holds {counts.extractions:,} extractions; the demo only fills"
            " an empty store: pick another --db, or pass --force to delete and rebuild it"
        )
    data = generate_demo(seed, rows, end_week, weeks)
    # Each row says where its value is printed; the pages are drawn only when opened.
    ingest_table(con, with_locations(data.extractions, data.truth), source="demo", fmt="demo")
    _insert_truth(con, data.truth)
    if labelled:
        simulate_reviews(con, seed=seed, weeks=data.weeks)
    summary = truth_summary(con)
    return replace(summary, build_seconds=time.perf_counter() - started)


def _insert_truth(con: duckdb.DuckDBPyConnection, truth: pa.Table) -> None:
    con.register("demo_truth_staged", truth)
    try:
        con.execute(
            "INSERT INTO demo_truth (extraction_id, correct, true_value, error_type, error_detail)"
            " SELECT extraction_id, correct, true_value, error_type, error_detail"
            " FROM demo_truth_staged"
        )
    finally:
        con.unregister("demo_truth_staged")


def build_demo_store(
    path: str | os.PathLike[str],
    *,
    seed: int = 7,
    rows: int = 300_000,
    force: bool = False,
    labelled: bool = True,
) -> DemoSummary:
    """Build the demo store file at ``path``; with ``force``, delete what is there first.

    Raises
    ------
    DemoStoreNotEmptyError
        ``path`` holds extractions and ``force`` is not set.
    """
    check_size(seed, rows)  # before --force deletes anything
    target = Path(path)
    if force:
        for stale in (target, target.with_name(target.name + ".wal")):
            stale.unlink(missing_ok=True)
    con = store.connect(target)
    try:
        return build_demo(con, seed=seed, rows=rows, labelled=labelled)
    finally:
        con.close()


def ensure_demo_store(path: str | os.PathLike[str], seed: int = 7, rows: int = 300_000) -> Path:
    """The demo store at ``path``, built only when it does not hold extractions yet.

    What the README's first command and ``fieldtrust serve`` call: a second
    start reuses the store (and the labels reviewers added since).
    """
    target = Path(path)
    if target.exists():
        con = store.connect(target)
        try:
            if _counts(con).extractions:
                return target
        finally:
            con.close()
    build_demo_store(target, seed=seed, rows=rows)
    return target
