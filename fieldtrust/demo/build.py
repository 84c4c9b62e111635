"""Write the demo into a store, and describe what was planted there.

The extractions go through the same validated ingest as a user's file
(``ingest.extractions.ingest_table``); the hidden truth goes into
``demo_truth`` (:mod:`fieldtrust.demo.truth`), a table the demo creates and
nothing but the demo and its simulated reviewers ever reads.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, replace
from pathlib import Path

import duckdb

from fieldtrust import store
from fieldtrust.demo.generator import check_size, generate_demo
from fieldtrust.demo.page_layout import with_locations
from fieldtrust.demo.reviewers import simulate_reviews
from fieldtrust.demo.truth import TRUTH_TABLE, insert_truth, truth_rows
from fieldtrust.demo.truth_summary import DemoSummary, truth_summary
from fieldtrust.errors import Refused
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.store.connection import DEFAULT_LOCK_TIMEOUT
from fieldtrust.store.migrations import migrate
from fieldtrust.store.sql import has_table, quote_ident


@dataclass(frozen=True)
class _Counts:
    extractions: int
    truth: int


def _counts(con: duckdb.DuckDBPyConnection) -> _Counts:
    row = con.execute("SELECT count(*) FROM extractions").fetchall()[0]
    return _Counts(int(row[0]), truth_rows(con))


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
    Refused
        The store already holds extractions or demo truth.
    """
    started = time.perf_counter()
    counts = _counts(con)
    if counts.extractions or counts.truth:
        raise Refused(
            f"the store already holds {counts.extractions:,} extractions; the demo only fills"
            " an empty store: pick another --db, or pass --force to delete and rebuild it"
        )
    data = generate_demo(seed, rows, end_week, weeks)
    # Each row says where its value is printed; the pages are drawn only when opened.
    ingest_table(con, with_locations(data.extractions, data.truth), source="demo", fmt="demo")
    insert_truth(con, data.truth)
    if labelled:
        simulate_reviews(con, seed=seed, weeks=data.weeks)
    summary = truth_summary(con)
    return replace(summary, build_seconds=time.perf_counter() - started)


def build_demo_store(
    path: str | os.PathLike[str],
    *,
    seed: int = 7,
    rows: int = 300_000,
    force: bool = False,
    labelled: bool = True,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> DemoSummary:
    """Build the demo store file at ``path``; with ``force``, empty a demo store there first.

    The file is opened read-write first, which takes DuckDB's lock on it (a
    store another process has open is waited for, then refused), and is
    emptied in place: it is never deleted from under a process holding it.
    Only a demo store is emptied (:func:`demo_store_problems`).

    Raises
    ------
    Refused
        ``path`` holds extractions and ``force`` is not set.
    Refused
        ``force`` is set and ``path`` holds more than a demo: nothing was changed.
    """
    check_size(seed, rows)  # before --force empties anything
    con = store.connect(Path(path), lock_timeout=lock_timeout)
    try:
        if force:
            problems = demo_store_problems(con)
            if problems:
                raise Refused(
                    f"{path} is not a demo store ({'; '.join(problems)}): --force only rebuilds"
                    " a demo store, and left this one unchanged; pick another --db"
                )
            _empty(con)
        return build_demo(con, seed=seed, rows=rows, labelled=labelled)
    finally:
        con.close()


def demo_store_problems(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What makes the store more than a demo store; empty when it is one (or holds nothing).

    A demo store's every extraction came from the demo (its batches are
    ``demo`` batches) and has its hidden truth.
    """
    # A store without the truth table holds no demo row at all.
    untrue = ("SELECT count(*) FROM extractions e WHERE NOT EXISTS"
              " (SELECT 1 FROM demo_truth t WHERE t.extraction_id = e.extraction_id)"
              if has_table(con, TRUTH_TABLE) else "SELECT count(*) FROM extractions")
    row = con.execute(
        f"SELECT ({untrue}),"
        " (SELECT count(*) FROM ingest_batches WHERE format <> 'demo'),"
        " (SELECT count(*) FROM label_imports)"
    ).fetchall()[0]
    problems = []
    if row[0]:
        problems.append(f"{row[0]:,} extractions without demo truth")
    if row[1]:
        problems.append(f"{row[1]:,} ingested files")
    if row[2]:
        problems.append(f"{row[2]:,} imported label files")
    return problems


def _empty(con: duckdb.DuckDBPyConnection) -> None:
    """Drop everything in the store and migrate it again: a new, empty store in the same file."""
    objects = con.execute(
        "SELECT 'VIEW', view_name FROM duckdb_views() WHERE database_name = current_database()"
        " AND schema_name = 'main' AND NOT internal"
        " UNION ALL SELECT 'TABLE', table_name FROM duckdb_tables()"
        " WHERE database_name = current_database() AND schema_name = 'main'"
        " UNION ALL SELECT 'SEQUENCE', sequence_name FROM duckdb_sequences()"
        " WHERE database_name = current_database() AND schema_name = 'main'"
    ).fetchall()
    with store.transaction(con):
        for kind, name in objects:
            con.execute(f"DROP {kind} IF EXISTS {quote_ident(name)} CASCADE")
    con.execute("CHECKPOINT")
    migrate(con)


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
