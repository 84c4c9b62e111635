"""The priority review queue: where a reviewer's next hour does the most good.

Separate from the audit (whose job is to measure, so it samples at random),
the queue sends people to the extractions most likely to be wrong among
those no approved automation covers:

1. Excluded: extractions whose stratum's current decision (the latest row of
   ``decisions`` for its (doc_type, field)) is ``approve`` with threshold ``t``
   and whose stated confidence is at least ``t``; and extractions that already
   have a label.
2. First: conflicts with another source, then values the model marked
   ``unclear``.
3. Then ascending calibrated confidence (STATS.md section 5: the current
   recalibration map of the stratum, view ``calibrated_confidence``); stated
   confidence where the stratum has no map yet.

Ties in calibrated confidence (isotonic maps are flat in places) are broken
by stated confidence, then extraction id.

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
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from fieldtrust.store.errors import InputError
from fieldtrust.store.scope import Scope

_OPEN_ITEMS = """
WITH unordered_maps AS (  -- strata whose current map ever goes down: no shortcut there
    SELECT DISTINCT doc_type, field FROM (
        SELECT m.doc_type, m.field,
               k.y < lag(k.y) OVER (PARTITION BY k.map_id ORDER BY k.x) AS down
        FROM current_recalibration_maps m JOIN recalibration_knots k USING (map_id)
    ) WHERE down
),
policy AS (
    SELECT doc_type, field, action, threshold FROM (
        SELECT doc_type, field, action, threshold,
               row_number() OVER (PARTITION BY doc_type, field
                                  ORDER BY decided_at DESC, decision_id DESC) AS rank_
        FROM decisions
    ) WHERE rank_ = 1
),
open_items AS (
    SELECT e.extraction_id, e.doc_type, e.field, e.confidence,
           CASE WHEN e.conflict THEN 0 WHEN e.value_status = 'unclear' THEN 1 ELSE 2 END AS tier
    FROM extractions e
    LEFT JOIN policy p USING (doc_type, field)
    WHERE {where}
      AND NOT (coalesce(p.action = 'approve', false) AND e.confidence >= p.threshold)
      AND e.extraction_id NOT IN (SELECT extraction_id FROM effective_labels)
)
"""

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
SELECT row_number() OVER (ORDER BY r.tier, r.priority_score, r.confidence, r.extraction_id)
           AS position,
       r.extraction_id, e.doc_id, e.doc_type, e.form_version, e.field, e.value, e.value_status,
       e.conflict, e.conflict_value, e.confidence, r.calibrated_confidence,
       r.calibration_method,
       CASE r.tier
           WHEN 0 THEN 'conflict: another source read ' || coalesce(e.conflict_value, '(nothing)')
           WHEN 1 THEN 'value marked unclear'
           ELSE CASE WHEN r.calibrated_confidence IS NULL
                     THEN printf('stated confidence %.3f (no calibration map yet)', e.confidence)
                     ELSE printf('calibrated confidence %.3f (%s)',
                                 r.calibrated_confidence, r.calibration_method) END
       END AS reason
FROM ranked r JOIN extractions e USING (extraction_id)
ORDER BY position
"""


#: Most rows one queue call returns (DuckDB's top-N limit is a million).
MAX_LIMIT = 100_000

def priority_queue(
    con: duckdb.DuckDBPyConnection, scope: Scope = Scope(), *, limit: int = 100
) -> pa.Table:
    """The next ``limit`` extractions for human review, most urgent first.

    Parameters
    ----------
    con
        Store connection (read-only is enough).
    scope
        Which extractions to consider.
    limit
        Rows to return.

    Returns
    -------
    pyarrow.Table
        position (1 = first), extraction_id, doc_id, doc_type, form_version,
        field, value, value_status, conflict, conflict_value, confidence,
        calibrated_confidence (null without a map), calibration_method,
        reason (why it sits where it does).
    """
    if not 1 <= limit <= MAX_LIMIT:
        raise InputError(f"limit must be at least 1 and at most {MAX_LIMIT:,}, got {limit}")
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
            calibrated=_CALIBRATED if mapped else _UNCALIBRATED, candidates=_CANDIDATES
        )
        params_ = {"limit": limit} | (
            {"ids": candidates.column("extraction_id").to_pylist()} if mapped else {}
        )
        return con.sql(sql, params=params_).to_arrow_table()
    finally:
        con.unregister(_CANDIDATES)
