"""Draw (or find) the audit sample of an ISO week (STATS.md section 8).

A week's samples are versions ``'2026-W48/v1'``, ``'/v2'``...; the newest is
the week's *current* sample. Drawing with the design and seed of the current
sample returns it unchanged; any other design or seed draws a new version
that becomes current. Nothing is deleted: labels point at extraction ids, so
a new version simply holds the labelled items again wherever it picks them.

Each cell's sample is its ``n_h`` items with the smallest permanent random
number (:mod:`fieldtrust.sampling.prn`). Selection runs in two SQL statements over the
week's rows: one counts the cells, one ranks and inserts the picks.

Drawing is checked here, not only in the dashboard: the acting user must hold
a role allowed to ``draw_sample`` (:data:`fieldtrust.store.access.PERMISSIONS`, the
qa_lead), read from the store's grants as every other writer does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
from fieldtrust.sampling.cells import checked_week, plan_frame, population_sql
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.prn import prn_hash_sql, prn_sql
from fieldtrust.store.access import require, user_name
from fieldtrust.store.connection import transaction, utc_now
from fieldtrust.store.rollup import LOCATION_COLUMNS, record_sampled_rows
from scipy import stats

from fieldtrust.errors import InputError

#: Chance that a cell's candidate cutoff holds fewer than ``n_h`` items; then the
#: draw falls back to ranking every row, so the cutoff only saves time.
_CUTOFF_MISS = 1e-12

#: The draw's picks, per connection, until they are stored.
_PICKS = "_fieldtrust_draw_picks"
#: Columns of the picks copied to sampled_extractions beside doc_type, field, form_version.
_COPIED = ("confidence", "extracted_at", *LOCATION_COLUMNS)

_CELLS_SQL = """
SELECT cell, doc_type, field, band, version_status, n_population, n_sample, inclusion_prob
FROM audit_cells WHERE sample_id = ?
ORDER BY doc_type, field, band, version_status
"""

_ITEMS_SQL = """
SELECT i.extraction_id, e.doc_id, e.doc_type, e.form_version, e.field, e.value,
       e.confidence, i.cell, i.inclusion_prob, i.double_review, i.sample_id,
       e.document_uri, e.page, e.bbox_x0, e.bbox_y0, e.bbox_x1, e.bbox_y1, e.source_excerpt
FROM audit_items i JOIN extractions e USING (extraction_id)
WHERE i.sample_id = $sample
  AND NOT ($open_only AND EXISTS (SELECT 1 FROM effective_labels l
                                  WHERE l.extraction_id = i.extraction_id))
ORDER BY i.cell, i.prn, i.extraction_id
"""


@dataclass(frozen=True)
class SampleResult:
    """A week's sample: its id, how it was drawn and its cells.

    ``cells`` has one row per cell: cell, doc_type, field, band,
    version_status, n_population, n_sample, inclusion_prob. ``replaced`` is
    the sample that was current before this one was drawn (None when this
    is the week's first, or was returned rather than drawn): its labelled
    items that this version does not hold leave the week's estimates.
    """

    sample_id: str
    week: str
    version: int
    seed: int
    design: Design
    design_sha256: str
    created: bool
    cells: pa.Table
    replaced: str | None = None
    #: Rows of a lake's week an ingest rule rejects, left out when asked to skip them.
    rows_skipped: int = 0

    @property
    def n_population(self) -> int:
        """Extractions in the week."""
        return int(pa.compute.sum(self.cells["n_population"]).as_py() or 0)

    @property
    def n_sample(self) -> int:
        """Items drawn."""
        return int(pa.compute.sum(self.cells["n_sample"]).as_py() or 0)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``fieldtrust sample --json`` prints), cells as a list of rows."""
        return {
            "sample_id": self.sample_id,
            "week": self.week,
            "version": self.version,
            "seed": self.seed,
            "created": self.created,
            "replaced": self.replaced,
            "design_sha256": self.design_sha256,
            "design": self.design.to_dict(),
            "n_population": self.n_population,
            "n_sample": self.n_sample,
            "rows_skipped": self.rows_skipped,
            "cells": self.cells.to_pylist(),
        }


def draw_sample(
    con: duckdb.DuckDBPyConnection,
    week: str,
    design: Design | None = None,
    *,
    seed: int,
    actor: str,
    redraw: bool = False,
) -> SampleResult:
    """Draw the audit sample of ISO ``week``, or return it if already drawn so.

    Parameters
    ----------
    con
        A read-write store connection.
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
        ``actor`` is empty or not a usable name.
    InputError
        The week is malformed or holds no extractions.

    Notes
    -----
    Each cell takes its ``n_h`` smallest permanent random numbers: a simple
    random sample without replacement, so ``pi_i = n_h / N_h`` (Ohlsson,
    "Coordination of samples using permanent random numbers", 1995).
    """
    actor = user_name(actor, what="acting user")
    week = checked_week(week)
    design = design or Design()
    digest = design.sha256()
    # Asked even when the sample exists: whoever may not draw learns it now, not
    # on the first week whose sample is new. Inside the transaction, so a role
    # revoked meanwhile cannot draw.
    with transaction(con):
        require(con, actor, "draw_sample")
        current = _current(con, week)
        if current is not None and not redraw and current[2] == digest and current[1] == seed:
            return load_sample(con, current[0])
        cells = plan_frame(con, week, design)
        version = _next_version(con, week)
        sample_id = f"{week}/v{version}"
        con.execute(
            "INSERT INTO audit_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [sample_id, week, version, seed, design.canonical_json(), digest, utc_now(), actor],
        )
        _insert_cells(con, sample_id, cells)
        _insert_items(con, sample_id, week, seed, design, cells)
    return SampleResult(
        sample_id,
        week,
        version,
        seed,
        design,
        digest,
        True,
        con.sql(_CELLS_SQL, params=[sample_id]).to_arrow_table(),
        replaced=None if current is None else current[0],
    )


def load_sample(con: duckdb.DuckDBPyConnection, sample_id: str) -> SampleResult:
    """The stored sample ``sample_id`` (``created`` is False)."""
    rows = con.sql(
        "SELECT week, version, seed, design_json, design_sha256 FROM audit_samples"
        " WHERE sample_id = ?",
        params=[sample_id],
    ).fetchall()
    if not rows:
        raise InputError(f"no audit sample {sample_id!r}; draw one with `fieldtrust sample`")
    week, version, seed, design_json, digest = rows[0]
    design = Design.from_json(design_json, source=f"sample {sample_id}")
    cells = con.sql(_CELLS_SQL, params=[sample_id]).to_arrow_table()
    skipped = con.sql(
        "SELECT rows_skipped FROM source_draw_skips WHERE sample_id = ?", params=[sample_id]
    ).fetchall()
    return SampleResult(sample_id, week, version, seed, design, digest, False, cells,
                        rows_skipped=int(skipped[0][0]) if skipped else 0)


def current_sample_id(con: duckdb.DuckDBPyConnection, week: str) -> str | None:
    """The newest sample version of ``week``, or None when none was drawn."""
    current = _current(con, checked_week(week))
    return None if current is None else current[0]


def sample_items(
    con: duckdb.DuckDBPyConnection, sample_id: str, *, open_only: bool = False
) -> pa.Table:
    """The items of a sample, in review order (by cell, then permanent random number).

    Columns: extraction_id, doc_id, doc_type, form_version, field, value,
    confidence, cell, inclusion_prob, double_review, sample_id, and where the
    value came from: document_uri, page, bbox_x0 ... bbox_y1, source_excerpt.
    Labelling a cell in this order keeps any finished prefix a simple random
    sample of it. ``open_only``: only the items without a label yet (a redrawn
    week's sheet need not list the items labelled already).
    """
    if not con.sql(
        "SELECT 1 FROM audit_samples WHERE sample_id = ?", params=[sample_id]
    ).fetchall():
        raise InputError(f"no audit sample {sample_id!r}; draw one with `fieldtrust sample`")
    return con.sql(_ITEMS_SQL, params={"sample": sample_id, "open_only": open_only}
                   ).to_arrow_table()


def _current(con: duckdb.DuckDBPyConnection, week: str) -> tuple[str, int, str] | None:
    rows = con.sql(
        "SELECT sample_id, seed, design_sha256 FROM audit_samples WHERE week = ?"
        " ORDER BY version DESC LIMIT 1",
        params=[week],
    ).fetchall()
    return None if not rows else (rows[0][0], int(rows[0][1]), rows[0][2])


def _next_version(con: duckdb.DuckDBPyConnection, week: str) -> int:
    rows = con.sql(
        "SELECT coalesce(max(version), 0) + 1 FROM audit_samples WHERE week = ?", params=[week]
    ).fetchall()
    return int(rows[0][0])


def _insert_cells(con: duckdb.DuckDBPyConnection, sample_id: str, cells: pd.DataFrame) -> None:
    columns = [
        "cell",
        "doc_type",
        "field",
        "band",
        "version_status",
        "n_population",
        "n_sample",
        "inclusion_prob",
    ]
    con.execute(
        f"INSERT INTO audit_cells SELECT ?, {', '.join(f'unnest(?) AS {c}' for c in columns)}",
        [sample_id, *(cells[c].tolist() for c in columns)],
    )


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


def _insert_items(
    con: duckdb.DuckDBPyConnection,
    sample_id: str,
    week: str,
    seed: int,
    design: Design,
    cells: pd.DataFrame,
    cutoffs: np.ndarray | None = None,
) -> None:
    """Rank and insert the picks of every cell; rank every row if a cutoff fell short."""
    if cutoffs is None:
        cutoffs = candidate_cutoffs(cells["n_population"].to_numpy(), cells["n_sample"].to_numpy())
    _select(con, sample_id, week, seed, design, cells, cutoffs)
    drawn = dict(
        con.sql(
            "SELECT cell, count(*) FROM audit_items WHERE sample_id = ? GROUP BY cell",
            params=[sample_id],
        ).fetchall()
    )
    if any(drawn.get(c, 0) != n for c, n in zip(cells["cell"], cells["n_sample"], strict=True)):
        con.execute("DELETE FROM audit_items WHERE sample_id = ?", [sample_id])
        _select(con, sample_id, week, seed, design, cells, np.full(len(cells), 2.0))
    # Labels of these items are read from this copy, not by joining every extraction.
    record_sampled_rows(con, _PICKS)
    con.execute(f"DROP TABLE {_PICKS}")


def _select(
    con: duckdb.DuckDBPyConnection,
    sample_id: str,
    week: str,
    seed: int,
    design: Design,
    cells: pd.DataFrame,
    cutoffs: np.ndarray,
) -> None:
    population, params = population_sql(week, design, _COPIED)
    # Double review: the first share of each cell in PRN order, itself a simple
    # random sample of the cell (round half up, so a cell of 5 gets one at 10%).
    double = np.floor(cells["n_sample"].to_numpy() * design.double_review_share + 0.5)
    # One allocation row per (cell, form version): rows find their cell by a
    # join on columns they already have.
    parts = cells.assign(n_double=double.astype(np.int64), cutoff=cutoffs).explode("form_versions")
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
        "cutoff": parts["cutoff"].tolist(),
        "n_double": parts["n_double"].tolist(),
    }
    hash_sql = prn_hash_sql("p.extraction_id")
    # The picks go to a temp table first: audit_items takes them, and
    # sampled_extractions their columns, without reading the week twice.
    con.execute(
        f"""
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
        """,
        params,
    )
    con.execute(
        "INSERT INTO audit_items (sample_id, extraction_id, cell, inclusion_prob, prn,"
        f" double_review) SELECT ?, extraction_id, cell, inclusion_prob, prn, double_review"
        f" FROM {_PICKS}",
        [sample_id],
    )
