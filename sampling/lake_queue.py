"""The priority review queue of a lake source (:mod:`fieldtrust.sampling.queue`'s rules).

:func:`fieldtrust.sampling.queue.priority_queue` comes here when it is given
a lake.
The source returns, per (tier, doc_type, field), its open rows of lowest
stated confidence (approved strata above their threshold left out); the store
removes the labelled ones, maps the rest through the current recalibration
maps and orders them as the embedded queue does. A map is nondecreasing in
stated confidence, so a stratum's first items by calibrated confidence are
among its first by stated confidence: asking for ``limit`` plus the
stratum's labelled count is enough.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from fieldtrust.ingest.sources import Source, queries
from fieldtrust.ingest.sources.refresh import select_counted
from fieldtrust.store.scope import Scope

#: The strata automated above a threshold, which the lake leaves out above it.
_AUTOMATED = """
SELECT doc_type, field, automated_above AS threshold FROM policy_in_force
WHERE automated_above IS NOT NULL
"""

_CANDIDATES = "_fieldtrust_source_queue"

_ORDERED = f"""
WITH segments AS (
    SELECT m.doc_type, m.field, m.method, k.x, k.y,
           lead(k.x) OVER w AS x_next, lead(k.y) OVER w AS y_next
    FROM current_recalibration_maps m JOIN recalibration_knots k USING (map_id)
    WINDOW w AS (PARTITION BY k.map_id ORDER BY k.x)
),
open_rows AS (
    SELECT * FROM {_CANDIDATES} c
    WHERE c.extraction_id NOT IN (SELECT extraction_id FROM effective_labels)
),
calibrated AS (
    SELECT o.extraction_id, s.method,
           CASE WHEN s.x_next IS NULL OR s.x_next = s.x THEN s.y
                ELSE s.y + (s.y_next - s.y) * (o.confidence - s.x) / (s.x_next - s.x)
           END AS calibrated_confidence
    FROM open_rows o ASOF JOIN segments s
      ON o.doc_type = s.doc_type AND o.field = s.field AND o.confidence >= s.x
),
ranked AS (
    SELECT o.*, c.calibrated_confidence, c.method AS calibration_method,
           coalesce(c.calibrated_confidence, o.confidence) AS priority_score
    FROM open_rows o LEFT JOIN calibrated c USING (extraction_id)
    ORDER BY tier, priority_score, confidence, extraction_id
    LIMIT $limit
)
SELECT row_number() OVER (ORDER BY tier, priority_score, confidence, extraction_id) AS position,
       extraction_id, doc_id, doc_type, form_version, field, value, value_status,
       conflict, conflict_value, confidence, calibrated_confidence, calibration_method,
       CASE tier
           WHEN 0 THEN 'conflict: another source read ' || coalesce(conflict_value, '(nothing)')
           WHEN 1 THEN 'value marked unclear'
           ELSE CASE WHEN calibrated_confidence IS NULL
                     THEN printf('stated confidence %.3f (no calibration map yet)', confidence)
                     ELSE printf('calibrated confidence %.3f (%s)',
                                 calibrated_confidence, calibration_method) END
       END AS reason
FROM ranked
ORDER BY position
"""


def lake_queue(
    con: duckdb.DuckDBPyConnection, source: Source, scope: Scope, *, limit: int
) -> pa.Table:
    """The next ``limit`` extractions of the lake for human review, most urgent first.

    What :func:`fieldtrust.sampling.queue.priority_queue` does when given a
    lake (its parameters, checked there), with its columns. ``scope``
    filters the candidates the source returns (each stratum's lowest
    stated confidences over every counted row), so a narrow scope of
    weeks may come back shorter than ``limit``.
    """
    labelled = con.execute("SELECT count(*) FROM effective_labels").fetchall()[0][0]
    policy = con.sql(_AUTOMATED).to_arrow_table()
    select_counted(con, source)
    source.register("queue_policy", pa.table({
        "doc_type": pa.array(policy["doc_type"].to_pylist(), pa.string()),
        "field": pa.array(policy["field"].to_pylist(), pa.string()),
        "threshold": pa.array(policy["threshold"].to_pylist(), pa.float64()),
    }))
    candidates = source.query(queries.queue_candidates(limit + int(labelled)))
    con.register(_CANDIDATES, candidates)
    try:
        where, params = scope.where("q")
        if scope != Scope():
            kept = con.sql(f"SELECT * FROM {_CANDIDATES} q WHERE {where}", params=params)
            con.unregister(_CANDIDATES)
            con.register(_CANDIDATES, kept.to_arrow_table())
        return con.sql(_ORDERED, params={"limit": limit}).to_arrow_table()
    finally:
        con.unregister(_CANDIDATES)
