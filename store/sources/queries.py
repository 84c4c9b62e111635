"""The source queries, each one text in DuckDB SQL (Spark runs its translation).

Every query reads ``source_rows``: the source's rows typed as the store keeps
them (``fieldtrust.store.ingest.typed_select``), with ``bad_`` (true on a row
an ingest rule rejects), ``file_`` and ``row_`` (where the row is). Values are
bound parameters (``$name``); small inputs (a draw's allocation) are tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fieldtrust.store.rollup import GRID

_K = f"CAST(floor(confidence * {GRID} + 1e-9) AS SMALLINT)"

#: Rows an ingest rule rejects. ``bad_`` in WHERE lets DuckDB skip every row group
#: whose statistics rule each problem out: on a valid lake this reads almost nothing.
BAD_ROWS = """
SELECT count(*) AS bad FROM source_rows
WHERE bad_ AND (extracted_at IS NULL OR extracted_at > $since)
"""


def rollup(*, since: bool, skip_bad: bool) -> str:
    """Counts per (stratum, form version, UTC day, confidence step) of the selected rows.

    ``since``: only rows after ``$since`` (a watermark); ``skip_bad``: leave out
    the rows an ingest rule rejects (asked only when there are some). Days, not
    weeks: a portable cast; the store turns them into ISO weeks.
    """
    where = [
        *(["(extracted_at IS NULL OR extracted_at > $since)"] if since else []),
        *(["NOT bad_"] if skip_bad else []),
    ]
    return f"""
    SELECT doc_type, field, form_version, CAST(extracted_at AS DATE) AS day, {_K} AS k,
           count(*) AS n, sum(confidence) AS sum_confidence, min(extracted_at) AS first_seen_at
    FROM source_rows
    {"WHERE " + " AND ".join(where) if where else ""}
    GROUP BY doc_type, field, form_version, CAST(extracted_at AS DATE), {_K}
    """


#: The newest time counted: the next watermark of a Spark table.
WATERMARK_SINCE = """
SELECT max(extracted_at) AS watermark FROM source_rows WHERE extracted_at > $since
"""


def band_sql(edges: Sequence[float]) -> tuple[str, dict[str, Any]]:
    """The band index of ``confidence`` for inner band ``edges`` (0 = lowest band)."""
    params = {f"edge_{i}": float(edge) for i, edge in enumerate(edges)}
    cases = " ".join(f"WHEN confidence < $edge_{i} THEN {i}" for i in range(len(edges)))
    return (f"CASE {cases} ELSE {len(edges)} END" if edges else "0"), params


def cell_parts(edges: Sequence[float]) -> tuple[str, dict[str, Any]]:
    """Rows of a week per (doc_type, field, form_version, band_index); bind start, end."""
    band, params = band_sql(edges)
    sql = f"""
    SELECT doc_type, field, form_version, {band} AS band_index, count(*) AS n
    FROM source_rows
    WHERE extracted_at >= $start AND extracted_at < $end AND NOT bad_
    GROUP BY doc_type, field, form_version, {band}
    """
    return sql, params


#: The permanent random number's rank key as text: MD5's bytes reversed, in hex.
#: DuckDB's md5_number reads the digest little-endian, so this text sorts exactly
#: as ``H`` (fieldtrust.sampling.prn), and every engine has md5() and substr().
RANK_KEY = " || ".join(
    f"substr(md5(CAST($seed AS VARCHAR) || ':' || $week || ':' || extraction_id), {31 - 2 * i}, 2)"
    for i in range(16)
)

_COPIED = (
    "extraction_id, doc_id, doc_type, form_version, field, value, value_status, confidence,"
    " model, extracted_at, conflict, conflict_value, source_excerpt"
)


def draw_picks(edges: Sequence[float]) -> tuple[str, dict[str, Any]]:
    """The first ``n_sample`` rows of each cell by rank key, with every stored column.

    Joins the table ``draw_alloc`` (doc_type, field, form_version, band_index,
    cell, n_sample, cutoff_key): rows whose key is not below their cell's
    cutoff are not ranked. Bind seed, week, start, end.
    """
    band, params = band_sql(edges)
    sql = f"""
    WITH week_rows AS (
        SELECT {_COPIED}, {band} AS band_index, {RANK_KEY} AS rank_key
        FROM source_rows
        WHERE extracted_at >= $start AND extracted_at < $end AND NOT bad_
    ),
    candidates AS (
        SELECT w.*, a.cell, a.n_sample
        FROM week_rows w JOIN draw_alloc a
          ON w.doc_type = a.doc_type AND w.field = a.field
         AND w.form_version = a.form_version AND w.band_index = a.band_index
        WHERE w.rank_key < a.cutoff_key
    ),
    ranked AS (
        SELECT *, row_number() OVER (PARTITION BY cell ORDER BY rank_key, extraction_id) AS rank_
        FROM candidates
    )
    SELECT {_COPIED}, cell, rank_ FROM ranked WHERE rank_ <= n_sample
    """
    return sql, params


def problems(conditions: Sequence[tuple[str, str, str]], limit: int) -> str:
    """The first ``limit`` rule failures, by file, row and rule, over ``source_raw``.

    ``conditions`` are (condition, value, extra) SQL of the ingest rules.
    """
    parts = [
        f"SELECT file_, row_, {index} AS rule_, CAST({value} AS VARCHAR) AS value_,"
        f" CAST({extra} AS VARCHAR) AS extra_ FROM source_raw WHERE {condition}"
        for index, (condition, value, extra) in enumerate(conditions)
    ]
    return (
        "SELECT file_, row_, rule_, value_, extra_ FROM ("
        + " UNION ALL ".join(parts)
        + f") AS p ORDER BY file_, row_, rule_ LIMIT {int(limit)}"
    )


def queue_candidates(limit: int) -> str:
    """Per (tier, doc_type, field), the ``limit`` open rows of lowest stated confidence.

    Joins ``queue_policy`` (doc_type, field, threshold: approved strata) and
    leaves out rows above the threshold; the store removes labelled ones.
    """
    return f"""
    WITH open_rows AS (
        SELECT r.*, CASE WHEN r.conflict THEN 0 WHEN r.value_status = 'unclear' THEN 1
                         ELSE 2 END AS tier
        FROM source_rows r LEFT JOIN queue_policy p
          ON r.doc_type = p.doc_type AND r.field = p.field
        WHERE NOT r.bad_ AND (p.threshold IS NULL OR r.confidence < p.threshold)
    ),
    ranked AS (
        SELECT {_COPIED}, tier, row_number() OVER (
            PARTITION BY tier, doc_type, field ORDER BY confidence, extraction_id) AS rank_
        FROM open_rows
    )
    SELECT {_COPIED}, tier FROM ranked WHERE rank_ <= {int(limit)}
    """
