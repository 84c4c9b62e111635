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
from fieldtrust.sampling.queue_order import MAPPED, OUTPUT, SEGMENTS
from fieldtrust.store.scope import Scope

#: The strata automated above a threshold, which the lake leaves out above it.
_AUTOMATED = """
SELECT doc_type, field, automated_above AS threshold FROM policy_in_force
WHERE automated_above IS NOT NULL
"""

_CANDIDATES = "_fieldtrust_source_queue"

# The open candidates, mapped and ordered as the store's queue orders its own.
_ORDERED = (
    f"WITH {SEGMENTS},"
    + f"""
open_rows AS (
    SELECT * FROM {_CANDIDATES} c
    WHERE c.extraction_id NOT IN (SELECT extraction_id FROM effective_labels)
),
ranked AS (
    SELECT *, coalesce(calibrated_confidence, confidence) AS priority_score
    FROM ({MAPPED.format(items="open_rows")})
    ORDER BY tier, priority_score, confidence, extraction_id
    LIMIT $limit
)"""
    + OUTPUT.format(e="r")
    + """
FROM ranked r
ORDER BY position
"""
)


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
