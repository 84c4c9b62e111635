"""What kind of errors the reviewers found, per (doc_type, field, form_version).

Counts come from the effective labels (an adjudicated verdict counts, a
superseded one does not), so the report agrees with what calibration uses.
They are plain counts of reviewed items, not design-weighted population
rates: the question here is *what* goes wrong and where it clusters (tax
copied from the total on one form version), not how often it happens in
production; the audit estimates answer that.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa
from fieldtrust.store.rollup import labelled_columns_sql
from fieldtrust.store.scope import Scope

_REPORT_SQL = """
WITH labelled AS (
    SELECT e.doc_type, e.field, e.form_version, l.correct,
           coalesce(l.error_type, 'unspecified') AS error_type
    FROM effective_labels l JOIN {labelled} e USING (extraction_id)
    WHERE l.correct IS NOT NULL AND {where}
),
groups AS (
    SELECT doc_type, field, form_version,
           count(*) AS n_labelled, count(*) FILTER (WHERE correct = 0) AS n_incorrect
    FROM labelled GROUP BY ALL
)
SELECT l.doc_type, l.field, l.form_version, l.error_type,
       count(*) AS n_errors,
       count(*) / any_value(g.n_incorrect) AS share_of_errors,
       any_value(g.n_labelled) AS n_labelled,
       count(*) / any_value(g.n_labelled) AS share_of_labelled
FROM labelled l JOIN groups g USING (doc_type, field, form_version)
WHERE l.correct = 0
GROUP BY l.doc_type, l.field, l.form_version, l.error_type
ORDER BY l.doc_type, l.field, l.form_version, n_errors DESC, l.error_type
"""


def error_report(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> pa.Table:
    """Counts and shares of error types per (doc_type, field, form_version).

    Columns: doc_type, field, form_version, error_type, n_errors,
    share_of_errors (of the group's incorrect labels), n_labelled (the
    group's labels with a verdict of correct or incorrect), share_of_labelled.
    Incorrect labels without a type (e.g. imported) count as ``unspecified``.
    Groups without any error do not appear.
    """
    where, params = scope.where("e")
    labelled = labelled_columns_sql(con, "SELECT extraction_id FROM effective_labels")
    sql = _REPORT_SQL.format(where=where, labelled=labelled)
    return con.sql(sql, params=params).to_arrow_table()
