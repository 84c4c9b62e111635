"""Reviews of a stratum still waiting for a qa_lead: what an approval waits for (issue 23).

Two kinds, read straight from the history tables: double-reviewed items whose
live primary and second verdicts differ (the queue of
:func:`fieldtrust.labels.agreement.adjudication_queue`), and blind re-keys whose
typed value differed (:func:`fieldtrust.labels.rekey.rekey_queue`), each until
an adjudication label settles it. Here, in the store, so governance can ask
without reaching into its sibling ``labels``.
"""

from __future__ import annotations

import duckdb

_OPEN_SQL = """
WITH live AS (
    SELECT * FROM labels l
    WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
),
settled AS (SELECT extraction_id FROM live WHERE review_round = 'adjudication'),
disagreed AS (
    SELECT p.extraction_id FROM live p JOIN live s USING (extraction_id)
    WHERE p.review_round = 'primary' AND s.review_round = 'second' AND p.verdict <> s.verdict
),
rekeyed AS (SELECT extraction_id FROM rekeyed_values WHERE NOT matches),
waiting AS (
    SELECT extraction_id FROM disagreed UNION SELECT extraction_id FROM rekeyed
),
still_open AS (
    SELECT extraction_id FROM waiting
    WHERE extraction_id NOT IN (SELECT extraction_id FROM settled)
),
strata AS (
    SELECT o.extraction_id, coalesce(x.doc_type, e.doc_type) AS doc_type,
           coalesce(x.field, e.field) AS field
    FROM still_open o
    LEFT JOIN sampled_extractions x USING (extraction_id)
    LEFT JOIN (SELECT extraction_id, doc_type, field FROM extractions
               WHERE extraction_id IN (SELECT extraction_id FROM still_open)) e
        USING (extraction_id)
)
SELECT extraction_id FROM strata WHERE doc_type = $doc_type AND field = $field
ORDER BY extraction_id
"""


def open_adjudications(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str
) -> list[str]:
    """Extraction ids of the stratum's reviews waiting for adjudication, in id order.

    Reviewed rows are in the sampled copy (``sampled_extractions``); the few
    open ones are looked up in ``extractions`` by id too, for labels written
    around the copy.
    """
    rows = con.execute(_OPEN_SQL, {"doc_type": doc_type, "field": field}).fetchall()
    return [str(r[0]) for r in rows]
