"""The priority review queue: where a reviewer's next hour does the most good.

Separate from the audit (whose job is to measure, so it samples at random),
the queue sends people to the extractions most likely to be wrong among
those no approved automation covers:

1. Excluded: extractions whose stratum's policy in force (view
   ``policy_in_force``: the latest row of ``decisions`` for its (doc_type,
   field)) is ``approve`` with threshold ``t`` and whose stated confidence is
   at least ``t``; and extractions that already have a label.
2. First: conflicts with another source, then values the model marked
   ``unclear``.
3. Then ascending calibrated confidence (STATS.md section 5: the current
   recalibration map of the stratum, view ``calibrated_confidence``); stated
   confidence where the stratum has no map yet.

Ties in calibrated confidence (isotonic maps are flat in places) are broken
by stated confidence, then extraction id.

The same queue comes from a lake source (:mod:`fieldtrust.sampling.lake_queue`)
when :func:`priority_queue` is given one: the lake returns its candidates and
the store orders them by these rules.

Labels given from the queue are not an audit sample and do not enter the
audit estimates (see :mod:`fieldtrust.sampling.estimates`).

Speed: the ``calibrated_confidence`` view maps every extraction of the store
(an ASOF join over millions of rows), so the queue asks it only about
candidates. A map is nondecreasing in stated confidence in practice
(isotonic always; Platt with a positive slope), and then a stratum's first
``limit`` items in queue order are its first ``limit`` by (stated
confidence, extraction id). So step 1 finds, per (tier, doc_type, field),
the ``limit``-th lowest stated confidence (a top-n aggregate; no cutoff for
a stratum whose map ever goes down), step 2 keeps the first ``limit`` items
up to it, and step 3 asks the view about those alone and orders them.

On the embedded store even that reads every extraction, so the queue first
asks its cache (:mod:`fieldtrust.store.queue_cache`: the first open items
of every (tier, stratum, week), kept at ingest). It leaves out the items
labelled since and the ones an approval now covers, applies the current maps
to what is left and orders it as above. The answer is the same as ranking
every row whenever no partition's frontier (the last item it kept, when it
could not keep all) ranks before the last item returned; otherwise, and
when the cache is out of step, a map of the scope goes down, or ``limit``
exceeds the cache's depth, the queue ranks the rows themselves.
"""

from __future__ import annotations

import dataclasses

import duckdb
import pyarrow as pa
from fieldtrust.ingest.sources import Source
from fieldtrust.sampling.lake_queue import lake_queue
from fieldtrust.sampling.queue_order import MAPPED, OUTPUT, SEGMENTS
from fieldtrust.store import queue_cache
from fieldtrust.store.scope import Scope

from fieldtrust.errors import InputError

_UNORDERED_MAPS = """
unordered_maps AS (  -- strata whose current map ever goes down: no shortcut there
    SELECT DISTINCT doc_type, field FROM (
        SELECT m.doc_type, m.field,
               k.y < lag(k.y) OVER (PARTITION BY k.map_id ORDER BY k.x) AS down
        FROM current_recalibration_maps m JOIN recalibration_knots k USING (map_id)
    ) WHERE down
)"""

_OPEN_ITEMS = (
    f"WITH {_UNORDERED_MAPS},"
    + """
open_items AS (
    SELECT e.extraction_id, e.doc_type, e.field, e.confidence,
           CASE WHEN e.conflict THEN 0 WHEN e.value_status = 'unclear' THEN 1 ELSE 2 END AS tier
    FROM extractions e
    LEFT JOIN policy_in_force p USING (doc_type, field)
    WHERE {where}
      AND NOT coalesce(e.confidence >= p.automated_above, false)
      AND e.extraction_id NOT IN (SELECT extraction_id FROM effective_labels)
)
"""
)

# Per (tier, stratum), the ``limit``-th lowest stated confidence: a top-n
# aggregate, one pass, no sort of every open item.
_CUTOFFS_SQL = (
    _OPEN_ITEMS
    + """
SELECT tier, doc_type, field,
       CASE WHEN (doc_type, field) IN (SELECT (doc_type, field) FROM unordered_maps) THEN 2.0
            ELSE list_max(min_by(confidence, confidence, ?)) END AS cutoff
FROM open_items
GROUP BY tier, doc_type, field
"""
)

# The first ``limit`` per (tier, stratum) by (stated confidence, id): the rows
# up to the cutoff (ties included), ranked; few rows, so the window is cheap.
_CANDIDATES_SQL = (
    _OPEN_ITEMS
    + """,
cutoffs AS (
    SELECT unnest(?::INTEGER[]) AS tier, unnest(?::VARCHAR[]) AS doc_type,
           unnest(?::VARCHAR[]) AS field, unnest(?::DOUBLE[]) AS cutoff
)
SELECT o.extraction_id, o.doc_type, o.field, o.confidence, o.tier
FROM open_items o JOIN cutoffs c USING (tier, doc_type, field)
WHERE o.confidence <= c.cutoff
QUALIFY c.cutoff > 1
     OR row_number() OVER (PARTITION BY o.tier, o.doc_type, o.field
                           ORDER BY o.confidence, o.extraction_id) <= ?
"""
)

_CANDIDATES = "_fieldtrust_queue_candidates"

# The view maps every extraction of the store; asked only about candidates
# (the filter reaches its scan), and not at all when none has a map.
_CALIBRATED = """
    SELECT extraction_id, calibrated_confidence, method
    FROM calibrated_confidence WHERE list_contains($ids::VARCHAR[], extraction_id)
"""
_UNCALIBRATED = """
    SELECT NULL::VARCHAR AS extraction_id, NULL::DOUBLE AS calibrated_confidence,
           NULL::VARCHAR AS method WHERE false
"""

_QUEUE_SQL = """
WITH calibrated AS ({calibrated}),
ranked AS (
    SELECT o.extraction_id, o.confidence, o.tier, c.calibrated_confidence,
           c.method AS calibration_method,
           coalesce(c.calibrated_confidence, o.confidence) AS priority_score
    FROM {candidates} o LEFT JOIN calibrated c USING (extraction_id)
    ORDER BY tier, priority_score, confidence, extraction_id
    LIMIT $limit
)
{output}
FROM ranked r JOIN extractions e USING (extraction_id)
ORDER BY position
"""

# The queue from the cache: its open items in scope, mapped and ordered.
_CACHED_SQL = (
    f"WITH {SEGMENTS},"
    + """
open_items AS MATERIALIZED (
    SELECT c.* FROM queue_candidates c LEFT JOIN policy_in_force p USING (doc_type, field)
    WHERE {where}
      AND NOT coalesce(c.confidence >= p.automated_above, false)
      AND c.extraction_id NOT IN (SELECT extraction_id FROM effective_labels)
),
-- The maps keep each stratum's order: its first ``limit`` items (ties
-- included) are enough, and a top-n aggregate finds them without a sort.
cutoffs AS (
    SELECT tier, doc_type, field, list_max(min_by(confidence, confidence, ?)) AS cutoff
    FROM open_items GROUP BY tier, doc_type, field
),
first_items AS (
    SELECT o.* FROM open_items o JOIN cutoffs c USING (tier, doc_type, field)
    WHERE o.confidence <= c.cutoff
),
ranked AS (
    SELECT *, coalesce(calibrated_confidence, confidence) AS priority_score
    FROM ("""
    + MAPPED.format(items="first_items")
    + """)
    ORDER BY tier, priority_score, confidence, extraction_id
    LIMIT ?
)"""
    + OUTPUT.format(e="r")
    + """, r.tier AS _tier, r.priority_score AS _score
FROM ranked r
ORDER BY position
"""
)

# The frontiers of the partitions in scope that could hide an open item: as
# (tier, priority score, confidence, id), the key the queue orders by.
_FRONTIERS_SQL = (
    f"WITH {SEGMENTS},"
    + """
frontiers AS (
    SELECT q.tier, q.doc_type, q.field, q.frontier_confidence AS confidence,
           q.frontier_id AS extraction_id
    FROM queue_partitions q LEFT JOIN policy_in_force p USING (doc_type, field)
    WHERE {where} AND q.frontier_id IS NOT NULL
      -- an approved frontier: every item after it is approved too
      AND NOT coalesce(q.frontier_confidence >= p.automated_above, false)
)
SELECT tier, coalesce(calibrated_confidence, confidence), confidence, extraction_id
FROM ("""
    + MAPPED.format(items="frontiers")
    + ")"
)

_UNORDERED_IN_SCOPE_SQL = (
    f"WITH {_UNORDERED_MAPS}"
    + """
SELECT count(*) FROM unordered_maps q WHERE {where}
"""
)


#: The longest queue returned at once (DuckDB's arg_min takes fewer than a million).
MAX_LIMIT = 100_000


def priority_queue(
    con: duckdb.DuckDBPyConnection, scope: Scope = Scope(), *, limit: int = 100,
    source: Source | None = None,
) -> pa.Table:
    """The next ``limit`` extractions for human review, most urgent first.

    Parameters
    ----------
    scope
        Which extractions to consider.
    limit
        Rows to return, 1 to :data:`MAX_LIMIT`.
    source
        The open lake source the store was refreshed from
        (:func:`fieldtrust.ingest.sources.open_configured` of the settings):
        its rows are the candidates. None: the store's own rows.

    Returns
    -------
    pyarrow.Table
        position (1 = first), extraction_id, doc_id, doc_type, form_version,
        field, value, value_status, conflict, conflict_value, confidence,
        calibrated_confidence (null without a map), calibration_method,
        reason (why it sits where it does).
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be between 1 and {MAX_LIMIT:,}, got {limit:,}")
    if source is not None:
        return lake_queue(con, source, scope, limit=limit)
    cached = _from_cache(con, scope, limit)
    return cached if cached is not None else _ranked_rows(con, scope, limit)


def _from_cache(con: duckdb.DuckDBPyConnection, scope: Scope, limit: int) -> pa.Table | None:
    """The queue read from the cache, or None when the cache cannot answer it exactly."""
    depth = queue_cache.depth(con)
    if depth is None or limit > depth:
        return None
    # Partitions are per stratum and week: a form-version filter applies to items only.
    stratum_where, stratum_params = dataclasses.replace(
        scope, weeks=(), form_versions=()).where_week_labels("q")
    if con.execute(
        _UNORDERED_IN_SCOPE_SQL.format(where=stratum_where), stratum_params
    ).fetchall()[0][0]:
        return None
    where, params = scope.where_week_labels("c")
    queue = con.sql(
        _CACHED_SQL.format(where=where), params=[*params, limit, limit]
    ).to_arrow_table()
    part_where, part_params = dataclasses.replace(scope, form_versions=()).where_week_labels("q")
    frontiers = con.execute(_FRONTIERS_SQL.format(where=part_where), part_params).fetchall()
    if frontiers:
        if queue.num_rows < limit:
            return None
        last = tuple(queue.column(name)[-1].as_py()
                     for name in ("_tier", "_score", "confidence", "extraction_id"))
        if any(tuple(frontier) < last for frontier in frontiers):
            return None
    return queue.drop_columns(["_tier", "_score"])


def _ranked_rows(con: duckdb.DuckDBPyConnection, scope: Scope, limit: int) -> pa.Table:
    """The queue ranked over the extraction rows themselves (see the module docstring)."""
    where, params = scope.where("e")
    cutoffs = con.sql(_CUTOFFS_SQL.format(where=where), params=[*params, limit]).fetchall()
    columns = [list(values) for values in zip(*cutoffs, strict=True)] or [[], [], [], []]
    candidates = con.sql(
        _CANDIDATES_SQL.format(where=where), params=[*params, *columns, limit]
    ).to_arrow_table()
    con.register(_CANDIDATES, candidates)
    try:
        mapped = con.sql(
            f"SELECT count(*) FROM current_recalibration_maps"
            f" WHERE (doc_type, field) IN (SELECT (doc_type, field) FROM {_CANDIDATES})"
        ).fetchall()[0][0]
        sql = _QUEUE_SQL.format(
            calibrated=_CALIBRATED if mapped else _UNCALIBRATED, candidates=_CANDIDATES,
            output=OUTPUT.format(e="e"),
        )
        params_ = {"limit": limit} | (
            {"ids": candidates.column("extraction_id").to_pylist()} if mapped else {}
        )
        return con.sql(sql, params=params_).to_arrow_table()
    finally:
        con.unregister(_CANDIDATES)
