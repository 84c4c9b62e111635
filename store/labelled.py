"""Labelled extractions with their provenance and design weights (STATS.md sections 2 and 10).

Every estimate in fieldtrust reads labels through :func:`labelled_items`, so
calibration, audit estimates, thresholds and alerts all weigh a label the same
way. Each labelled extraction has a *provenance*, how its item was chosen:

* ``audit``: the extraction is an item of an audit sample. Reviewers work
  each cell in PRN order, so the cell's design-based sample is its labelled
  *prefix*: its items in PRN order up to the first one without an effective
  verdict (an ``unclear`` verdict counts as one; a skip is a gap). A
  labelled item inside the prefix of its cell in the week's current sample
  (per stratum, the sample version whose labelled prefixes hold the most
  labels, the newest on ties: a redraw nobody has labelled yet does not hide the
  labelled one; label counts, never verdicts, decide) has inclusion probability
  ``prefix_h / N_h``; one beyond a gap (or in another sample version only)
  waits, ``design_based`` false.
* ``random_import``: imported from a file declared a simple random sample
  (``fieldtrust labels import FILE --random-sample``); within each
  (doc_type, field) and ISO week the file's items cover, ``pi = n / N``.
* ``non_random``: everything else (the priority queue, ad hoc review, an
  import without the declaration). No inclusion probability: ``weight`` is
  NULL and ``design_based`` false. Such labels may train recalibration maps
  and count in the error-type report; they never enter an estimate,
  interval, certificate, stability check or alert.

Labels with verdict 'unclear' are left out of the rows (an unreadable source
is neither right nor wrong), but they do close a gap in a cell's prefix.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from fieldtrust.store.rollup import is_current, labelled_columns_sql
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import week_sql

#: The provenance values, in the order reports list them.
PROVENANCES = ("audit", "random_import", "non_random")

_LABELLED_SQL = """
WITH verdicts AS (  -- one effective label per extraction, 'unclear' included
    SELECT e.extraction_id, e.label_id, e.correct, e.reviewer, e.review_round,
           l.import_batch_id
    FROM effective_labels e JOIN labels l USING (label_id)
),
live AS (SELECT * FROM verdicts WHERE correct IS NOT NULL),
facts AS {facts},  -- the labelled rows' columns, from the small copy where it has them
labelled AS (
    SELECT e.extraction_id, e.doc_type, e.form_version, e.extractor_version, e.field,
           e.confidence, {week} AS week, l.correct, l.label_id, l.reviewer, l.review_round,
           l.import_batch_id
    FROM live l JOIN facts e USING (extraction_id)
    WHERE {where}
),
items AS (  -- every sample's items, in PRN order per cell
    SELECT i.sample_id, i.cell, i.extraction_id,
           row_number() OVER (PARTITION BY i.sample_id, i.cell
                              ORDER BY i.prn, i.extraction_id) AS turn,
           v.extraction_id IS NOT NULL AS done
    FROM audit_items i LEFT JOIN verdicts v USING (extraction_id)
),
prefix AS (
    SELECT p.sample_id, p.cell, c.doc_type, c.field, p.prefix_n
    FROM (SELECT sample_id, cell,
                 coalesce(min(turn) FILTER (WHERE NOT done) - 1, count(*)) AS prefix_n
          FROM items GROUP BY sample_id, cell) p
    JOIN audit_cells c USING (sample_id, cell)
),
current_samples AS (  -- per week and stratum: the version whose prefixes hold most labels
    SELECT sample_id, doc_type, field FROM (
        SELECT p.sample_id, p.doc_type, p.field, row_number() OVER (
                   PARTITION BY s.week, p.doc_type, p.field
                   ORDER BY p.usable DESC, s.version DESC
               ) AS rank_
        FROM (SELECT sample_id, doc_type, field, sum(prefix_n) AS usable
              FROM prefix GROUP BY ALL) p
        JOIN audit_samples s USING (sample_id)
    ) WHERE rank_ = 1
),
audit AS (
    SELECT it.extraction_id, it.sample_id, it.cell, it.turn <= p.prefix_n AS in_prefix,
           p.prefix_n::DOUBLE / c.n_population AS prefix_prob
    FROM items it JOIN prefix p USING (sample_id, cell)
    JOIN audit_cells c USING (sample_id, cell)
    SEMI JOIN current_samples k
        ON k.sample_id = p.sample_id AND k.doc_type = p.doc_type AND k.field = p.field
    SEMI JOIN labelled USING (extraction_id)
),
in_any_sample AS (
    SELECT DISTINCT extraction_id FROM audit_items SEMI JOIN labelled USING (extraction_id)
),
joined AS (
    SELECT l.*, a.sample_id, a.cell, a.in_prefix, a.prefix_prob,
           CASE WHEN s.extraction_id IS NOT NULL THEN 'audit'
                WHEN d.batch_id IS NOT NULL THEN 'random_import'
                ELSE 'non_random' END AS provenance
    FROM labelled l
    LEFT JOIN audit a USING (extraction_id)
    LEFT JOIN in_any_sample s USING (extraction_id)
    LEFT JOIN label_import_designs d ON d.batch_id = l.import_batch_id
),
random_cells AS (  -- a declared random sample: per (doc_type, field, week)
    SELECT doc_type, field, week, count(*) AS n_labelled
    FROM joined WHERE provenance = 'random_import' GROUP BY ALL
),
random_probs AS (
    SELECT p.doc_type, p.field, p.week, any_value(r.n_labelled) / sum(p.n) AS random_prob
    FROM ({population}) p JOIN random_cells r USING (doc_type, field, week)
    GROUP BY ALL
)
SELECT j.extraction_id, j.doc_type, j.form_version, j.field, j.confidence, j.week,
       j.correct::TINYINT AS correct,
       CASE WHEN j.provenance = 'audit' AND j.in_prefix THEN j.prefix_prob
            WHEN j.provenance = 'random_import' THEN least(r.random_prob, 1.0) END
           AS inclusion_prob,
       1.0 / CASE WHEN j.provenance = 'audit' AND j.in_prefix THEN j.prefix_prob
                  WHEN j.provenance = 'random_import' THEN least(r.random_prob, 1.0) END
           AS weight,
       coalesce(j.provenance = 'audit' AND j.in_prefix, false) AS from_audit,
       coalesce(j.provenance = 'audit' AND j.in_prefix, false)
           OR (j.provenance = 'random_import' AND r.random_prob IS NOT NULL) AS design_based,
       j.provenance, j.sample_id, j.cell,
       j.label_id, j.reviewer, j.review_round, j.extractor_version
FROM joined j LEFT JOIN random_probs r USING (doc_type, field, week)
ORDER BY j.extraction_id
"""


def labelled_items(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> pa.Table:
    """Labelled extractions in ``scope`` with ``correct`` (0/1), provenance and design weight.

    Columns: extraction_id, doc_type, form_version, field, confidence, week,
    correct, inclusion_prob, weight (both NULL unless ``design_based``),
    from_audit (in its cell's labelled prefix), design_based, provenance
    (``audit``, ``random_import``, ``non_random``), sample_id and cell (the
    current sample's cell of an audit item), label_id, reviewer,
    review_round, extractor_version. Sorted by extraction_id, so results never depend on the
    order rows were stored in.
    """
    where, params = scope.where("e")
    population, population_params = _population_sql(con, scope)
    sql = _LABELLED_SQL.format(
        week=week_sql("e.extracted_at"), where=where, population=population,
        facts=labelled_columns_sql(con, "SELECT extraction_id FROM live"),
    )
    return con.sql(sql, params=params + population_params).to_arrow_table()


def design_based_items(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> pa.Table:
    """:func:`labelled_items` restricted to the labels design-based figures may use."""
    items = labelled_items(con, scope)
    return items.filter(items.column("design_based"))


def _population_sql(con: duckdb.DuckDBPyConnection, scope: Scope) -> tuple[str, list[object]]:
    """Population per (doc_type, field, week) in ``scope``: from the rollup when current."""
    if is_current(con):
        where, params = scope.where_week_labels("r")
        return f"SELECT doc_type, field, week, n FROM extraction_counts r WHERE {where}", params
    where, params = scope.where("e")
    return (
        f"SELECT doc_type, field, {week_sql('e.extracted_at')} AS week, 1 AS n"
        f" FROM extractions e WHERE {where}",
        params,
    )
