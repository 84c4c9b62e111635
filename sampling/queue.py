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

Labels given from the queue are not an audit sample and do not enter the
audit estimates (see :mod:`sampling.estimates`).
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from store.scope import Scope

_QUEUE_SQL = """
WITH policy AS (
    SELECT doc_type, field, action, threshold FROM (
        SELECT doc_type, field, action, threshold,
               row_number() OVER (PARTITION BY doc_type, field
                                  ORDER BY decided_at DESC, decision_id DESC) AS rank_
        FROM decisions
    ) WHERE rank_ = 1
),
open_items AS (
    SELECT e.*
    FROM extractions e
    LEFT JOIN policy p USING (doc_type, field)
    WHERE {where}
      AND NOT (coalesce(p.action = 'approve', false) AND e.confidence >= p.threshold)
      AND NOT EXISTS (SELECT 1 FROM effective_labels l WHERE l.extraction_id = e.extraction_id)
),
ranked AS (
    SELECT o.extraction_id, o.doc_id, o.doc_type, o.form_version, o.field, o.value,
           o.value_status, o.conflict, o.conflict_value, o.confidence,
           c.calibrated_confidence, c.method AS calibration_method,
           coalesce(c.calibrated_confidence, o.confidence) AS priority_score,
           CASE WHEN o.conflict THEN 0 WHEN o.value_status = 'unclear' THEN 1 ELSE 2 END AS tier
    FROM open_items o
    LEFT JOIN calibrated_confidence c USING (extraction_id)
)
SELECT row_number() OVER (ORDER BY tier, priority_score, extraction_id) AS position,
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
ORDER BY tier, priority_score, extraction_id
LIMIT ?
"""


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
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    where, params = scope.where("e")
    return con.sql(_QUEUE_SQL.format(where=where), params=[*params, limit]).to_arrow_table()
