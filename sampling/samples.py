"""The audit samples a store holds: a week's versions, their cells and items.

A week's samples are versions ``'2026-W48/v1'``, ``'/v2'``...; the newest is
the week's *current* sample. Both draws (:mod:`fieldtrust.sampling.draw` on
the store's rows, :mod:`fieldtrust.sampling.lake_draw` on a lake's) find
and record samples here, so a sample reads the same whichever engine drew it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from fieldtrust.sampling.design import Design
from fieldtrust.store.connection import utc_now
from fieldtrust.store.weeks import Week

from fieldtrust.errors import InputError

_CELLS_SQL = """
SELECT cell, doc_type, field, band, version_status, n_population, n_sample, inclusion_prob
FROM audit_cells WHERE sample_id = ?
ORDER BY doc_type, field, band, version_status
"""

#: Columns of audit_cells after sample_id, as a planned cell frame names them.
_CELL_COLUMNS = ("cell", "doc_type", "field", "band", "version_status", "n_population",
                 "n_sample", "inclusion_prob")

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

# The items and the sample's seeds, each seed as its host with the seeded
# value and its cell's inclusion probability: the rows look alike.
_ITEMS_WITH_SEEDS_SQL = """
SELECT * EXCLUDE (prn) FROM (
    SELECT i.extraction_id, e.doc_id, e.doc_type, e.form_version, e.field, e.value,
           e.confidence, i.cell, i.inclusion_prob, i.double_review, i.sample_id,
           e.document_uri, e.page, e.bbox_x0, e.bbox_y0, e.bbox_x1, e.bbox_y1,
           e.source_excerpt, i.prn
    FROM audit_items i JOIN extractions e USING (extraction_id)
    WHERE i.sample_id = $sample
      AND NOT ($open_only AND EXISTS (SELECT 1 FROM effective_labels l
                                      WHERE l.extraction_id = i.extraction_id))
    UNION ALL
    SELECT s.seed_id, e.doc_id, e.doc_type, e.form_version, e.field, s.seed_value,
           e.confidence, s.cell, c.inclusion_prob, false, s.sample_id,
           e.document_uri, e.page, e.bbox_x0, e.bbox_y0, e.bbox_x1, e.bbox_y1,
           e.source_excerpt, s.prn
    FROM seed_items s
    JOIN extractions e ON e.extraction_id = s.host_extraction_id
    JOIN audit_cells c ON c.sample_id = s.sample_id AND c.cell = s.cell
    WHERE s.sample_id = $sample
      AND NOT ($open_only AND EXISTS (SELECT 1 FROM seed_verdicts v
                                      WHERE v.seed_id = s.seed_id))
)
ORDER BY cell, prn, extraction_id
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
    week: Week
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
        return int(pc.sum(self.cells["n_population"]).as_py() or 0)

    @property
    def n_sample(self) -> int:
        """Items drawn."""
        return int(pc.sum(self.cells["n_sample"]).as_py() or 0)

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


@dataclass(frozen=True)
class CurrentSample:
    """The newest sample version of a week, and how it was drawn."""

    sample_id: str
    seed: int
    design_sha256: str

    def drawn_with(self, design: Design, seed: int) -> bool:
        """Whether drawing again with ``design`` and ``seed`` would give this sample."""
        return self.seed == seed and self.design_sha256 == design.sha256()


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
    return SampleResult(sample_id, Week(week), version, seed, design, digest, False, cells,
                        rows_skipped=int(skipped[0][0]) if skipped else 0)


def current_sample(con: duckdb.DuckDBPyConnection, week: Week) -> CurrentSample | None:
    """The newest sample version of ``week``, or None when none was drawn."""
    rows = con.sql(
        "SELECT sample_id, seed, design_sha256 FROM audit_samples WHERE week = ?"
        " ORDER BY version DESC LIMIT 1",
        params=[week],
    ).fetchall()
    return None if not rows else CurrentSample(rows[0][0], int(rows[0][1]), rows[0][2])


def latest_design(con: duckdb.DuckDBPyConnection) -> Design | None:
    """The design the store's newest sample was drawn with, or None when none was drawn.

    What a form offers first: drawing a week again with it returns the week's
    sample instead of a new version.
    """
    rows = con.sql(
        "SELECT sample_id, design_json FROM audit_samples ORDER BY drawn_at DESC, week DESC,"
        " version DESC LIMIT 1"
    ).fetchall()
    return None if not rows else Design.from_json(rows[0][1], source=f"sample {rows[0][0]}")


def current_sample_id(con: duckdb.DuckDBPyConnection, week: Week | str) -> str | None:
    """The newest sample version of ``week``, or None when none was drawn."""
    current = current_sample(con, Week(week))
    return None if current is None else current.sample_id


def sample_items(
    con: duckdb.DuckDBPyConnection, sample_id: str, *, open_only: bool = False,
    with_seeds: bool = False,
) -> pa.Table:
    """The items of a sample, in review order (by cell, then permanent random number).

    Columns: extraction_id, doc_id, doc_type, form_version, field, value,
    confidence, cell, inclusion_prob, double_review, sample_id, and where the
    value came from: document_uri, page, bbox_x0 ... bbox_y1, source_excerpt.
    Labelling a cell in this order keeps any finished prefix a simple random
    sample of it. ``open_only``: only the items without a label yet (a redrawn
    week's sheet need not list the items labelled already). ``with_seeds``
    mixes in the sample's seeds (:mod:`~.seeding`), shaped and ordered like the
    items, for files reviewers label (``sample --out``).
    """
    if not con.sql(
        "SELECT 1 FROM audit_samples WHERE sample_id = ?", params=[sample_id]
    ).fetchall():
        raise InputError(f"no audit sample {sample_id!r}; draw one with `fieldtrust sample`")
    sql = _ITEMS_WITH_SEEDS_SQL if with_seeds else _ITEMS_SQL
    return con.sql(sql, params={"sample": sample_id, "open_only": open_only}).to_arrow_table()


def record_sample(
    con: duckdb.DuckDBPyConnection, week: Week, design: Design, cells: pd.DataFrame, *,
    seed: int, actor: str, replaced: CurrentSample | None, rows_skipped: int = 0,
) -> SampleResult:
    """Store a new version of ``week``'s sample with its planned ``cells``; the new sample.

    ``replaced`` is the week's current sample until now, ``rows_skipped`` the
    rows of a lake's week left out of it. The items are the draw's to add.
    Call inside the draw's transaction.
    """
    rows = con.sql(
        "SELECT coalesce(max(version), 0) + 1 FROM audit_samples WHERE week = ?", params=[week]
    ).fetchall()
    version = int(rows[0][0])
    sample_id = f"{week}/v{version}"
    digest = design.sha256()
    con.execute(
        "INSERT INTO audit_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [sample_id, week, version, seed, design.canonical_json(), digest, utc_now(), actor],
    )
    unnested = ", ".join(f"unnest(?) AS {column}" for column in _CELL_COLUMNS)
    con.execute(
        f"INSERT INTO audit_cells SELECT ?, {unnested}",
        [sample_id, *(cells[c].tolist() for c in _CELL_COLUMNS)],
    )
    if rows_skipped:
        con.execute("INSERT INTO source_draw_skips VALUES (?, ?)", [sample_id, rows_skipped])
    return SampleResult(
        sample_id, week, version, seed, design, digest, True,
        con.sql(_CELLS_SQL, params=[sample_id]).to_arrow_table(),
        replaced=None if replaced is None else replaced.sample_id, rows_skipped=rows_skipped,
    )
