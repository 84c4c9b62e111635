"""How a sample's review stands: per cell for the QA lead, per item for the reviewer.

:func:`fieldtrust.labels.assignment.sample_progress` gives one line for a whole sample;
:func:`cell_progress` splits it by sampling cell, so a QA lead sees which
cells still lack labels (an estimate needs every cell). :func:`item_context`
is what the review screen shows beside an assigned item that
:class:`~fieldtrust.labels.assignment.ReviewItem` deliberately leaves out: the stated
confidence (shown folded away, so it does not anchor the judgement), the
other source's conflicting value and how many items the reviewer has done.

"Labelled" means the same here as in ``sample_progress``: the item has a
primary, imported or adjudicated label (a second review alone does not
count), so the cells add up to the sample's total.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow as pa
from fieldtrust.labels.assignment import resolve_sample
from fieldtrust.store.retry import first_row

from fieldtrust.errors import InputError

_CELL_PROGRESS_SQL = """
WITH items AS (
    SELECT i.cell, i.extraction_id,
           row_number() OVER (PARTITION BY i.cell ORDER BY i.prn, i.extraction_id) AS turn,
           EXISTS (SELECT 1 FROM effective_labels v
                   WHERE v.extraction_id = i.extraction_id) AS done
    FROM audit_items i WHERE i.sample_id = $sample
),
prefix AS (
    SELECT cell, coalesce(min(turn) FILTER (WHERE NOT done) - 1, count(*)) AS n_usable
    FROM items GROUP BY cell
)
SELECT c.sample_id, c.cell, c.doc_type, c.field, c.band, c.version_status, c.n_population,
       c.n_sample, c.inclusion_prob,
       count(i.extraction_id) FILTER (WHERE EXISTS (
           SELECT 1 FROM labels l WHERE l.extraction_id = i.extraction_id
             AND l.review_round IN ('primary', 'import', 'adjudication'))) AS n_labelled,
       coalesce(any_value(p.n_usable), 0) AS n_usable
FROM audit_cells c
LEFT JOIN audit_items i ON i.sample_id = c.sample_id AND i.cell = c.cell
LEFT JOIN prefix p ON p.cell = c.cell
WHERE c.sample_id = $sample
GROUP BY ALL
ORDER BY c.doc_type, c.field, c.band, c.version_status
"""


def cell_progress(con: duckdb.DuckDBPyConnection, sample_id: str | None = None) -> pa.Table:
    """Per sampling cell of a sample: population, items drawn and items labelled.

    Parameters
    ----------
    sample_id
        Sample like ``'2026-W48/v1'``; default the newest sample
        (:func:`fieldtrust.labels.assignment.current_sample`).

    Returns
    -------
    pyarrow.Table
        One row per cell, ordered by doc_type, field, band, version_status;
        columns ``sample_id, cell, doc_type, field, band, version_status,
        n_population, n_sample, inclusion_prob, n_labelled, n_usable``.
        ``n_labelled`` counts items with a primary, imported or adjudicated
        label, as :func:`fieldtrust.labels.assignment.sample_progress` does;
        ``n_usable`` is the cell's labelled PRN prefix (its items in PRN order
        up to the first without a verdict): the labels estimates can use now
        (STATS.md section 10). Labels past a gap wait until it is filled.

    Raises
    ------
    InputError
        No such sample, or none drawn yet.
    """
    sample = resolve_sample(con, sample_id)
    return con.sql(_CELL_PROGRESS_SQL, params={"sample": sample}).to_arrow_table()


@dataclass(frozen=True)
class ItemContext:
    """What the review screen shows beside an item that ``ReviewItem`` leaves out."""

    extraction_id: str
    confidence: float
    conflict: bool
    conflict_value: str | None
    reviewer_labelled: int  # labels the reviewer has given in this sample, any round


def item_context(
    con: duckdb.DuckDBPyConnection, extraction_id: str, reviewer: str, sample_id: str
) -> ItemContext:
    """Stated confidence and source conflict of one extraction, and the reviewer's count.

    Parameters
    ----------
    extraction_id
        The item on screen.
    reviewer
        Whose count of labels to give.
    sample_id
        The sample the count is taken in.

    Returns
    -------
    ItemContext
        ``reviewer_labelled`` counts every label row ``reviewer`` wrote with
        this ``sample_id`` (superseded ones included: it measures work done).

    Raises
    ------
    InputError
        No extraction ``extraction_id`` in the store.
    """
    # A seed shows its host's confidence and conflict, and counts in the
    # reviewer's work like any item: the screen must not tell it apart. The host
    # is looked up first: a constant id is a point read of extractions, an id
    # from a subquery a scan of it.
    host = first_row(con.execute(
        "SELECT host_extraction_id FROM seed_items WHERE seed_id = ?", [extraction_id]
    ).fetchall())
    row = first_row(con.execute(
        "SELECT confidence, conflict, conflict_value,"
        " (SELECT count(*) FROM labels WHERE reviewer = $reviewer AND sample_id = $sample)"
        " + (SELECT count(*) FROM seed_verdicts WHERE reviewer = $reviewer"
        "    AND sample_id = $sample)"
        " FROM extractions WHERE extraction_id = $id",
        {"id": host[0] if host else extraction_id, "reviewer": reviewer, "sample": sample_id},
    ).fetchall())
    if row is None:
        raise InputError(
            f"no extraction {extraction_id!r} in the store; item ids come from the sample's"
            " items (fieldtrust sample --out FILE)"
        )
    confidence, conflict, conflict_value, labelled = row
    return ItemContext(extraction_id, float(confidence), bool(conflict), conflict_value,
                       int(labelled))
