"""Labelled extractions with their design weights (STATS.md section 2).

Every estimate in fieldtrust reads labels through :func:`labelled_items`, so
calibration, audit estimates and thresholds all weigh a label the same way:

* an extraction drawn into a weekly audit sample carries ``1 / pi`` where
  ``pi`` is its inclusion probability in the newest sample version of its
  week that holds it, whoever labelled it and however the label arrived;
* a labelled extraction in no audit sample (a one-off labelled set) counts as
  a simple random sample of its stratum (doc_type, field) within the scope:
  ``pi = n_h / N_h``.

Labels with verdict 'unclear' are left out: an unreadable source is neither a
right nor a wrong extraction.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from fieldtrust.store.rollup import extraction_columns_sql, is_current
from fieldtrust.store.scope import Scope
from fieldtrust.store.weeks import week_sql

_LABELLED_SQL = """
WITH live AS (
    SELECT * FROM effective_labels WHERE correct IS NOT NULL
),
facts AS {facts},  -- the labelled rows' columns, from the small copy where it has them
labelled AS (
    SELECT e.extraction_id, e.doc_type, e.form_version, e.field, e.confidence,
           {week} AS week, l.correct, l.label_id, l.reviewer, l.review_round
    FROM live l JOIN facts e USING (extraction_id)
    WHERE {where}
),
design AS (
    SELECT extraction_id, inclusion_prob FROM (
        SELECT i.extraction_id, i.inclusion_prob,
               row_number() OVER (PARTITION BY i.extraction_id
                                  ORDER BY s.version DESC) AS rank_
        FROM audit_items i JOIN audit_samples s USING (sample_id)
        SEMI JOIN labelled USING (extraction_id)
    ) WHERE rank_ = 1
),
joined AS (
    SELECT l.*, d.inclusion_prob AS design_prob
    FROM labelled l LEFT JOIN design d USING (extraction_id)
),
srs_strata AS (  -- strata holding labels without a design; usually none
    SELECT doc_type, field, count(*) AS n_labelled
    FROM joined WHERE design_prob IS NULL GROUP BY ALL
),
srs AS (  -- a simple random sample of its stratum: pi = n_h / N_h
    SELECT p.doc_type, p.field, any_value(s.n_labelled) / sum(p.n) AS srs_prob
    FROM ({population}) p JOIN srs_strata s USING (doc_type, field)
    GROUP BY ALL
)
SELECT j.extraction_id, j.doc_type, j.form_version, j.field, j.confidence, j.week,
       j.correct::TINYINT AS correct,
       coalesce(j.design_prob, srs.srs_prob) AS inclusion_prob,
       1.0 / coalesce(j.design_prob, srs.srs_prob) AS weight,
       j.design_prob IS NOT NULL AS from_audit,
       j.label_id, j.reviewer, j.review_round
FROM joined j LEFT JOIN srs USING (doc_type, field)
ORDER BY j.extraction_id
"""


def labelled_items(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> pa.Table:
    """Labelled extractions in ``scope`` with ``correct`` (0/1) and design ``weight``.

    Columns: extraction_id, doc_type, form_version, field, confidence, week,
    correct, inclusion_prob, weight, from_audit, label_id, reviewer,
    review_round. Sorted by extraction_id, so results never depend on the
    order rows were stored in.
    """
    where, params = scope.where("e")
    population, population_params = _population_sql(con, scope)
    sql = _LABELLED_SQL.format(
        week=week_sql("e.extracted_at"), where=where, population=population,
        facts=extraction_columns_sql("SELECT extraction_id FROM live"),
    )
    return con.sql(sql, params=params + population_params).to_arrow_table()


def _population_sql(con: duckdb.DuckDBPyConnection, scope: Scope) -> tuple[str, list[object]]:
    """Stratum sizes in ``scope``: from the rollup when it is current, else counted."""
    if is_current(con):
        where, params = scope.where_week_labels("r")
        return f"SELECT doc_type, field, n FROM extraction_counts r WHERE {where}", params
    where, params = scope.where("e")
    return f"SELECT doc_type, field, 1 AS n FROM extractions e WHERE {where}", params
