"""Draw (or find) the audit sample of an ISO week (STATS.md section 8): the one door.

:func:`draw_sample` is how every caller draws, whatever holds the rows: the
store's own ``extractions``, or a lake source the store was refreshed from
(:mod:`fieldtrust.sampling.lake_draw`, given the open source). Either way
the same design, cells and permanent random numbers give the same picks,
and the sample is recorded the same way (:mod:`fieldtrust.sampling.samples`).

Drawing with the design and seed of the week's current sample returns it
unchanged; any other design or seed draws a new version that becomes
current. Nothing is deleted: labels point at extraction ids, so a new
version simply holds the labelled items again wherever it picks them.

Each cell's sample is its ``n_h`` items with the smallest permanent random
number (:mod:`fieldtrust.sampling.prn`). On the store, selection runs in two
SQL statements over the week's rows: one counts the cells, one ranks and
inserts the picks.

Drawing is checked here, not only in the dashboard: the acting user must hold
a role allowed to ``draw_sample`` (:data:`fieldtrust.store.access.PERMISSIONS`, the
qa_lead), read from the store's grants as every other writer does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from fieldtrust.ingest.sources import Source
from fieldtrust.sampling.cells import plan_frame, population_sql
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.lake_draw import draw_from_lake
from fieldtrust.sampling.prn import candidate_cutoffs, prn_hash_sql, prn_sql
from fieldtrust.sampling.samples import (
    SampleResult,
    current_sample,
    load_sample,
    record_sample,
)
from fieldtrust.sampling.seeding import seed_sample
from fieldtrust.store.access import require, user_name
from fieldtrust.store.bar import policy_bar
from fieldtrust.store.connection import transaction
from fieldtrust.store.rollup import LOCATION_COLUMNS, record_sampled_rows
from fieldtrust.store.weeks import Week

from fieldtrust.errors import InputError

#: The draw's picks, per connection, until they are stored.
_PICKS = "_fieldtrust_draw_picks"
#: Columns of the picks copied to sampled_extractions beside doc_type, field, form_version.
_COPIED = ("confidence", "extracted_at", "extractor_version", *LOCATION_COLUMNS)


def draw_sample(
    con: duckdb.DuckDBPyConnection,
    week: Week | str,
    design: Design | None = None,
    *,
    seed: int,
    actor: str,
    redraw: bool = False,
    source: Source | None = None,
    skip_invalid: bool = False,
    progress: Callable[[str, int, int], None] | None = None,
    seed_rate: float | None = None,
) -> SampleResult:
    """Draw the audit sample of ISO ``week``, or return it if already drawn so.

    Parameters
    ----------
    week
        ISO week, ``'2026-W48'`` (UTC).
    design
        The sampling design; ``Design()`` defaults when None.
    seed
        Seed of the permanent random numbers (``fieldtrust.settings`` ``seed``).
    actor
        The acting user; their role in the store must allow ``draw_sample``
        (qa_lead). Recorded as ``drawn_by`` with the sample.
    redraw
        Draw a new version even when the current one has this design and seed
        (after late rows arrived, say). PRN keeps it close to the old one.
    source
        The open lake source the store was refreshed from
        (:func:`fieldtrust.ingest.sources.open_configured` of the settings);
        None draws from the store's own rows. Only the picked rows of a lake
        come home.
    skip_invalid
        A lake only: leave the week's rows an ingest rule rejects out of the
        sample and its population (their count is recorded) instead of
        refusing. The store's own rows were checked at ingest.
    progress
        A lake only: ``progress(stage, done, total)`` as each of its 3 stages
        starts.
    seed_rate
        Share of the sample's items to add as seeds (known wrong values that
        measure reviewer misses, :mod:`fieldtrust.sampling.seeding`); None
        takes the store's policy (``seed_rate``, default 0: none). The store's
        own rows only: a lake's draw makes no seeds yet.

    Returns
    -------
    SampleResult
        ``created`` is False when the current sample was returned.

    Raises
    ------
    PermissionDenied
        ``actor`` holds no role allowed to draw (an unknown name included);
        nothing was written.
    InputError
        ``actor`` is empty or not a usable name; the week is malformed or
        holds no extractions; ``skip_invalid`` without a lake.
    ValidationError
        A lake's counted rows of the week hold a bad id, value or status
        (unless ``skip_invalid``); nothing was written.

    Notes
    -----
    Each cell takes its ``n_h`` smallest permanent random numbers: a simple
    random sample without replacement, so ``pi_i = n_h / N_h`` (Ohlsson,
    "Coordination of samples using permanent random numbers", 1995).
    """
    actor = user_name(actor, what="acting user")
    week = Week(week)
    design = design or Design()
    if source is not None:  # ranked on the lake's engine; only the picked rows come home
        return draw_from_lake(con, source, week, design, seed=seed, actor=actor, redraw=redraw,
                              skip_invalid=skip_invalid, progress=progress)
    if skip_invalid:
        raise InputError(
            "skipping invalid rows (--skip-invalid) is for a lake source: the store's own rows"
            " were checked at ingest"
        )
    # Asked even when the sample exists: whoever may not draw learns it now, not
    # on the first week whose sample is new. Inside the transaction, so a role
    # revoked meanwhile cannot draw.
    with transaction(con):
        require(con, actor, "draw_sample")
        current = current_sample(con, week)
        if current is not None and not redraw and current.drawn_with(design, seed):
            return load_sample(con, current.sample_id)
        cells = plan_frame(con, week, design)
        drawn = record_sample(con, week, design, cells, seed=seed, actor=actor, replaced=current)
        _insert_items(con, drawn.sample_id, week, seed, design, cells)
        rate = policy_bar(con).bar.seed_rate if seed_rate is None else seed_rate
        seed_sample(con, drawn.sample_id, week, design, cells, seed=seed, rate=rate)
        return drawn


def _insert_items(
    con: duckdb.DuckDBPyConnection,
    sample_id: str,
    week: Week,
    seed: int,
    design: Design,
    cells: pd.DataFrame,
    cutoffs: np.ndarray | None = None,
) -> None:
    """Rank and insert the picks of every cell; rank every row if a cutoff fell short."""
    if cutoffs is None:
        cutoffs = candidate_cutoffs(cells["n_population"].to_numpy(),
                                    cells["n_sample"].to_numpy())
    sql, params = _picks_sql(week, seed, design, cells)
    wanted = dict(zip(cells["cell"], cells["n_sample"], strict=True))
    for attempt in (cutoffs, np.full(len(cells), 2.0)):
        # One allocation row per (cell, form version), as _picks_sql explodes them.
        per_version = cells.assign(cutoff=attempt).explode("form_versions")["cutoff"]
        con.execute(sql, params | {"cutoff": per_version.tolist()})
        drawn = dict(con.sql(f"SELECT cell, count(*) FROM {_PICKS} GROUP BY cell").fetchall())
        if all(drawn.get(cell, 0) == n for cell, n in wanted.items()):
            break
    con.execute(
        "INSERT INTO audit_items (sample_id, extraction_id, cell, inclusion_prob, prn,"
        f" double_review) SELECT ?, extraction_id, cell, inclusion_prob, prn, double_review"
        f" FROM {_PICKS}",
        [sample_id],
    )
    # Labels of these items are read from this copy, not by joining every extraction.
    record_sampled_rows(con, _PICKS)
    con.execute(f"DROP TABLE {_PICKS}")


def _picks_sql(
    week: Week, seed: int, design: Design, cells: pd.DataFrame
) -> tuple[str, dict[str, Any]]:
    """The statement that ranks each cell's rows into the picks table, and its parameters.

    Bind ``cutoff`` too: per allocation row, the PRN above which no row is ranked.
    """
    population, params = population_sql(week, design, _COPIED)
    # Double review: the first share of each cell in PRN order, itself a simple
    # random sample of the cell (round half up, so a cell of 5 gets one at 10%).
    double = np.floor(cells["n_sample"].to_numpy() * design.double_review_share + 0.5)
    # One allocation row per (cell, form version): rows find their cell by a
    # join on columns they already have.
    parts = cells.assign(n_double=double.astype(np.int64)).explode("form_versions")
    params |= {
        "seed": seed,
        "week": week,
        "doc_types": parts["doc_type"].tolist(),
        "fields": parts["field"].tolist(),
        "versions": parts["form_versions"].tolist(),
        "band_indexes": parts["band_index"].tolist(),
        "cells": parts["cell"].tolist(),
        "n_sample": parts["n_sample"].tolist(),
        "prob": parts["inclusion_prob"].tolist(),
        "n_double": parts["n_double"].tolist(),
    }
    hash_sql = prn_hash_sql("p.extraction_id")
    # The picks go to a temp table first: audit_items takes them, and
    # sampled_extractions their columns, without reading the week twice.
    sql = f"""
        CREATE OR REPLACE TEMP TABLE {_PICKS} AS
        WITH alloc AS (
            SELECT unnest($doc_types::VARCHAR[]) AS doc_type, unnest($fields::VARCHAR[]) AS field,
                   unnest($versions::VARCHAR[]) AS form_version,
                   unnest($band_indexes::INTEGER[]) AS band_index,
                   unnest($cells::VARCHAR[]) AS cell, unnest($n_sample::BIGINT[]) AS n_sample,
                   unnest($prob::DOUBLE[]) AS inclusion_prob, unnest($cutoff::DOUBLE[]) AS cutoff,
                   unnest($n_double::BIGINT[]) AS n_double
        ),
        hashed AS (
            SELECT p.*, {hash_sql} AS h FROM ({population}) p
        ),
        candidates AS (
            SELECT h.extraction_id, a.cell, h.h, {prn_sql("h.h")} AS prn,
                   a.n_sample, a.inclusion_prob, a.n_double, doc_type, form_version, field,
                   {", ".join(f"h.{column}" for column in _COPIED)}
            FROM hashed h JOIN alloc a USING (doc_type, field, form_version, band_index)
            WHERE {prn_sql("h.h")} < a.cutoff
        )
        SELECT extraction_id, cell, inclusion_prob, prn, rank_ <= n_double AS double_review,
               doc_type, form_version, field, {", ".join(_COPIED)}
        FROM (
            SELECT *, row_number() OVER (PARTITION BY cell ORDER BY h, extraction_id) AS rank_
            FROM candidates
        )
        WHERE rank_ <= n_sample
        """
    return sql, params
