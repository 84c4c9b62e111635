"""How the review queue orders and shows its items, as SQL both queues share.

The queue of the store's rows (:mod:`fieldtrust.sampling.queue`) and the
queue of a lake (:mod:`fieldtrust.sampling.lake_queue`) find their
candidates differently, then map them through the current recalibration
maps and show them with these same texts, so an item sits at the same place
for the same reason whichever holds the rows.
"""

from __future__ import annotations

#: The current maps as line segments: a CTE named ``segments``.
SEGMENTS = """
segments AS (
    SELECT m.doc_type, m.field, m.method, k.x, k.y,
           lead(k.x) OVER w AS x_next, lead(k.y) OVER w AS y_next
    FROM current_recalibration_maps m JOIN recalibration_knots k USING (map_id)
    WINDOW w AS (PARTITION BY k.map_id ORDER BY k.x)
)"""

#: The items of ``{items}`` with their calibrated confidence and its method (null
#: without a map): the formula of the view ``calibrated_confidence`` (migration
#: 0012), applied to a few rows instead of every extraction. Needs :data:`SEGMENTS`.
MAPPED = """
SELECT i.*, s.method AS calibration_method,
       CASE WHEN s.x IS NULL THEN NULL
            WHEN s.x_next IS NULL OR s.x_next = s.x THEN s.y
            ELSE s.y + (s.y_next - s.y) * (i.confidence - s.x) / (s.x_next - s.x)
       END AS calibrated_confidence
FROM {items} i
ASOF LEFT JOIN segments s
  ON i.doc_type = s.doc_type AND i.field = s.field AND i.confidence >= s.x"""

#: The queue's columns, from the ranked items ``r`` (tier, priority_score,
#: confidence, extraction_id, calibrated_confidence, calibration_method) and
#: their extraction rows ``{e}``; a FROM clause follows.
OUTPUT = """
SELECT row_number() OVER (ORDER BY r.tier, r.priority_score, r.confidence, r.extraction_id)
           AS position,
       r.extraction_id, {e}.doc_id, {e}.doc_type, {e}.form_version, {e}.field, {e}.value,
       {e}.value_status, {e}.conflict, {e}.conflict_value, {e}.confidence,
       r.calibrated_confidence, r.calibration_method,
       CASE r.tier
           WHEN 0 THEN 'conflict: another source read ' || coalesce({e}.conflict_value, '(nothing)')
           WHEN 1 THEN 'value marked unclear'
           ELSE CASE WHEN r.calibrated_confidence IS NULL
                     THEN printf('stated confidence %.3f (no calibration map yet)', {e}.confidence)
                     ELSE printf('calibrated confidence %.3f (%s)',
                                 r.calibrated_confidence, r.calibration_method) END
       END AS reason"""
