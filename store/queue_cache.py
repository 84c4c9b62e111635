"""The review queue's candidates, kept small: the first items of every queue partition.

The priority queue (:mod:`fieldtrust.sampling.queue`) ranks the open
extractions (no label yet) of each stratum by tier (conflicts, then values
marked unclear, then the rest) and, within a tier, by calibrated confidence,
which a stratum's map keeps in the order of stated confidence. Ranking every
extraction on each page run costs seconds at ten million rows, so this cache
keeps, per *partition* (tier, doc_type, field, ISO week), the first
:data:`DEPTH` open items by (stated confidence, extraction id), with the
columns the queue shows. Ingest rebuilds the partitions of the weeks a batch
touches, in the same transaction as the rows.

A partition holding more open items than :data:`DEPTH` records its
*frontier*, the last item kept: items after it may be missing. The queue
reads the cache only when no frontier in its scope could hide an item of
its answer, and leaves out what changed since: items labelled since,
strata an approval now covers, the current maps (applied when read).

Like the rollup (:mod:`fieldtrust.store.rollup`) the cache is never the
truth. :func:`is_current` checks that it was built over exactly the rows of
``extractions`` (rows added with SQL outside fieldtrust are not in it) and
that no label was deleted since; when it was not, the queue ranks the rows
themselves and the next ingest rebuilds the whole cache.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from fieldtrust.store.scope import Scope
from fieldtrust.store.sql import fetch_one, has_table

from fieldtrust.errors import InputError

#: Open items kept per (tier, doc_type, field, week): a queue of up to this many
#: items reads the cache, with room for the items labelled between two ingests.
DEPTH = 500

_TOP = "_fieldtrust_queue_top"

# Weeks as whole weeks since Monday 1900-01-01, labelled after aggregating
# (as store.rollup does: integer arithmetic, not strftime, on every row).
# The ranking keeps row ids, and only the items kept are read in full: carrying
# every row's text (value, conflict_value) through the ranking cost three times
# as much at ten million rows.
_TOP_SQL = """
CREATE TEMP TABLE {top} AS
WITH open_items AS (
    SELECT e.rowid AS row_id, e.extraction_id, e.doc_type, e.field, e.confidence,
           CASE WHEN e.conflict THEN 0 WHEN e.value_status = 'unclear' THEN 1 ELSE 2 END
               AS tier,
           (epoch_us(e.extracted_at) - epoch_us(TIMESTAMP '1900-01-01'))
               // 604800000000 AS week_index
    FROM extractions e
    WHERE {where}
      AND e.extraction_id NOT IN (SELECT extraction_id FROM effective_labels)
),
top AS (
    SELECT tier, doc_type, field, week_index, count(*) AS open_items,
           min_by(row_id, {{'confidence': confidence, 'extraction_id': extraction_id}},
                  {depth}) AS row_ids
    FROM open_items
    GROUP BY tier, doc_type, field, week_index
),
kept AS (
    SELECT tier, doc_type, field, week_index, open_items, unnest(row_ids) AS row_id FROM top
),
items AS (
    SELECT k.tier, k.doc_type, k.field, k.week_index, any_value(k.open_items) AS open_items,
           list({{'extraction_id': e.extraction_id, 'doc_id': e.doc_id,
                  'form_version': e.form_version, 'value': e.value,
                  'value_status': e.value_status, 'conflict': e.conflict,
                  'conflict_value': e.conflict_value, 'confidence': e.confidence}}
                ORDER BY {{'confidence': e.confidence, 'extraction_id': e.extraction_id}})
               AS items
    FROM kept k JOIN extractions e ON e.rowid = k.row_id
    GROUP BY k.tier, k.doc_type, k.field, k.week_index
)
SELECT tier, doc_type, field,
       strftime(TIMESTAMP '1900-01-01' + to_weeks(week_index::INTEGER), '%G-W%V') AS week,
       open_items, items
FROM items
"""

_PARTITIONS_SQL = f"""
INSERT INTO queue_partitions
SELECT tier, doc_type, field, week, open_items,
       CASE WHEN open_items > len(items) THEN items[-1].confidence END,
       CASE WHEN open_items > len(items) THEN items[-1].extraction_id END
FROM {_TOP}
"""

_CANDIDATES_SQL = f"""
INSERT INTO queue_candidates
SELECT tier, doc_type, field, week, item.extraction_id, item.doc_id, item.form_version,
       item.value, item.value_status, item.conflict, item.conflict_value, item.confidence
FROM (SELECT tier, doc_type, field, week, unnest(items) AS item FROM {_TOP})
"""


def refresh(con: duckdb.DuckDBPyConnection, *, depth: int = DEPTH) -> None:
    """Rebuild the whole cache from every extraction (a derived cache: nothing is lost).

    ``depth``: open items kept per partition (later ingests keep it).
    """
    if depth < 1:
        raise InputError(f"depth must be at least 1, got {depth}")
    con.execute("DELETE FROM queue_candidates")
    con.execute("DELETE FROM queue_partitions")
    _build(con, "TRUE", [], depth)
    _record_state(con, depth)


def append_batch(con: duckdb.DuckDBPyConnection, batch_id: str, rows_added: int) -> None:
    """Rebuild the weeks a batch just stored touches; call inside the ingest's transaction.

    Rebuilds everything instead when the cache was already out of step
    (rows added outside fieldtrust), so one ingest puts it right again.
    """
    state = _state(con)
    if state is None or state.extraction_rows + rows_added != _count(con, "extractions") or (
        not _labels_kept(con, state.label_rows)
    ):
        refresh(con, depth=state.depth if state else DEPTH)
        return
    if rows_added:
        weeks = tuple(
            week for (week,) in con.execute(
                "SELECT strftime(TIMESTAMP '1900-01-01' + to_weeks(week_index::INTEGER),"
                " '%G-W%V') FROM (SELECT DISTINCT (epoch_us(extracted_at)"
                " - epoch_us(TIMESTAMP '1900-01-01')) // 604800000000 AS week_index"
                " FROM extractions WHERE batch_id = ?)",
                [batch_id],
            ).fetchall()
        )
        con.execute("DELETE FROM queue_candidates WHERE list_contains(?, week)", [list(weeks)])
        con.execute("DELETE FROM queue_partitions WHERE list_contains(?, week)", [list(weeks)])
        where, params = Scope(weeks=weeks).where("e")
        _build(con, where, params, state.depth)
    _record_state(con, state.depth)


def depth(con: duckdb.DuckDBPyConnection) -> int | None:
    """Open items the cache keeps per partition; None when it is out of step (see is_current)."""
    if not has_table(con, "queue_cache_state"):  # migration 0021
        return None
    state = _state(con)
    current = (
        state is not None
        and state.extraction_rows == _count(con, "extractions")
        and _labels_kept(con, state.label_rows)
    )
    return state.depth if state is not None and current else None


def is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the cache covers exactly the rows of ``extractions`` and every label since.

    Extractions are append-only, so an equal row count means the same rows
    (a whole table's count comes from DuckDB's row counts, not a scan);
    labels are append-only too, so fewer labels than at the build means rows
    were deleted by hand and items the cache left out may be open again.
    """
    return depth(con) is not None


def _build(con: duckdb.DuckDBPyConnection, where: str, params: list[object], depth: int) -> None:
    con.execute(_TOP_SQL.format(top=_TOP, where=where, depth=int(depth)), params)
    try:
        con.execute(_PARTITIONS_SQL)
        con.execute(_CANDIDATES_SQL)
    finally:
        con.execute(f"DROP TABLE {_TOP}")


@dataclass(frozen=True)
class _State:
    extraction_rows: int
    label_rows: int
    depth: int


def _record_state(con: duckdb.DuckDBPyConnection, depth: int) -> None:
    con.execute("DELETE FROM queue_cache_state")
    con.execute(
        "INSERT INTO queue_cache_state VALUES (?, ?, ?, (now() AT TIME ZONE 'UTC')::TIMESTAMP)",
        [_count(con, "extractions"), _count(con, "labels"), depth],
    )


def _state(con: duckdb.DuckDBPyConnection) -> _State | None:
    row = fetch_one(con, "SELECT extraction_rows, label_rows, depth FROM queue_cache_state")
    return None if row is None else _State(int(row[0]), int(row[1]), int(row[2]))


def _labels_kept(con: duckdb.DuckDBPyConnection, label_rows: int) -> bool:
    return _count(con, "labels") >= label_rows


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = fetch_one(con, f"SELECT count(*) FROM {table}")
    return int(row[0]) if row else 0
