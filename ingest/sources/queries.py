"""The source queries, each one text in DuckDB SQL (Spark runs its translation).

Every query reads ``source_rows``: the source's rows typed as the store keeps
them (``fieldtrust.ingest.extractions.typed_select``), with ``bad_`` (true on a row
an ingest rule rejects), ``uncounted_`` (true on a row a rule on what it is
counted by rejects: :func:`fieldtrust.ingest.sources.checks.counting_rules`),
``file_`` and ``row_`` (where the row is). Values are
bound parameters (``$name``); small inputs (a draw's allocation) are tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fieldtrust.store.rollup import GRID
from fieldtrust.store.sql import quote_ident

_K = f"CAST(floor(confidence * {GRID} + 1e-9) AS SMALLINT)"

#: The Monday (UTC) of ``{stamp}``'s ISO week. Counting per week rather than
#: per day sends the store a seventh of the rows, which at 10M rows was a
#: quarter of a refresh.
WEEK_START = "CAST(date_trunc('week', {stamp}) AS DATE)"

#: Rows a counting rule rejects, asked only when :func:`checked_rollup` flags some.
BAD_ROWS = """
SELECT count(*) AS bad FROM source_rows
WHERE uncounted_ AND (extracted_at IS NULL OR extracted_at > $since)
"""


#: Counted rows of a week that a rule the refresh does not ask rejects (a bad id,
#: value or status), asked only when :func:`cell_parts` finds bad rows: computing
#: ``uncounted_`` on every row of the week would cost the draw a third more.
WEEK_INVALID = """
SELECT count(*) AS invalid FROM source_rows
WHERE extracted_at >= $start AND extracted_at < $end AND bad_ AND NOT uncounted_
"""


def rollup(*, since: bool, skip_bad: bool) -> str:
    """Counts per (stratum, form version, week, confidence step) of the selected rows.

    ``since``: only rows after ``$since`` (a watermark); ``skip_bad``: leave out
    the rows a counting rule rejects (asked only when there are some). A week
    is its Monday (:data:`WEEK_START`, which every engine computes alike); the
    store names it as an ISO week.
    """
    week = WEEK_START.format(stamp="extracted_at")
    where = [
        *(["(extracted_at IS NULL OR extracted_at > $since)"] if since else []),
        *(["NOT uncounted_"] if skip_bad else []),
    ]
    return f"""
    SELECT doc_type, field, form_version, {week} AS week_start, {_K} AS k,
           count(*) AS n, sum(confidence) AS sum_confidence, min(extracted_at) AS first_seen_at
    FROM source_rows
    {"WHERE " + " AND ".join(where) if where else ""}
    GROUP BY doc_type, field, form_version, {week}, {_K}
    """


def checked_rollup(
    typed: dict[str, str],
    grouped: Sequence[str],
    group_checks: Sequence[str],
    row_checks: Sequence[str],
    *,
    since: bool,
) -> str:
    """:func:`rollup` of every selected row and, in the same scan, how many rows may be bad.

    Reads ``source_raw`` once. Rows are grouped by the raw text of the ``grouped``
    columns (a few distinct values each), so the ``group_checks`` (conditions on
    those columns alone) run once per group, not once per row; the
    ``row_checks`` run on every row. ``suspect`` counts the rows a check flags:
    zero means no row is bad and the counts are those of :func:`rollup`. A
    check may flag more than the ingest rules do (a cheaper test that never
    misses one), so a nonzero ``suspect`` only says to look closer.
    ``typed`` are the stored columns' expressions over ``source_raw``
    (:func:`fieldtrust.ingest.extractions.typed_columns`); ``last_seen_at`` gives the
    next watermark.
    """
    stamp, number = typed["extracted_at"], typed["confidence"]
    # TRY_CAST: bad rows (NaN, 1e300) are counted here too, before they are refused.
    step = f"TRY_CAST(floor({number} * {GRID} + 1e-9) AS SMALLINT)"
    keys = [quote_ident(c) for c in grouped]
    row_bad = " OR ".join(f"({c})" for c in row_checks) or "false"
    group_bad = " OR ".join(f"({c})" for c in group_checks) or "false"
    week = WEEK_START.format(stamp=stamp)
    where = f"WHERE ({stamp} IS NULL OR {stamp} > $since)" if since else ""
    return f"""
    WITH raw_groups AS (
        SELECT {"".join(k + ", " for k in keys)}{week} AS week_start, {step} AS k,
               count(*) AS n, sum({number}) AS sum_confidence,
               min({stamp}) AS first_seen_at, max({stamp}) AS last_seen_at,
               count_if(coalesce({row_bad}, false)) AS suspect_rows
        FROM source_raw
        {where}
        GROUP BY {"".join(k + ", " for k in keys)}{week}, {step}
    )
    SELECT {typed["doc_type"]} AS doc_type, {typed["field"]} AS field,
           {typed["form_version"]} AS form_version, week_start, k,
           sum(n) AS n, sum(sum_confidence) AS sum_confidence,
           min(first_seen_at) AS first_seen_at, max(last_seen_at) AS last_seen_at,
           sum(CASE WHEN coalesce({group_bad}, false) THEN n ELSE suspect_rows END) AS suspect
    FROM raw_groups
    GROUP BY 1, 2, 3, 4, 5
    """


def band_sql(edges: Sequence[float]) -> tuple[str, dict[str, Any]]:
    """The band index of ``confidence`` for inner band ``edges`` (0 = lowest band)."""
    params = {f"edge_{i}": float(edge) for i, edge in enumerate(edges)}
    cases = " ".join(f"WHEN confidence < $edge_{i} THEN {i}" for i in range(len(edges)))
    return (f"CASE {cases} ELSE {len(edges)} END" if edges else "0"), params


def cell_parts(edges: Sequence[float]) -> tuple[str, dict[str, Any]]:
    """Rows of a week per (doc_type, field, form_version, band_index); bind start, end.

    ``n`` counts the rows every ingest rule accepts, ``bad`` the others: those
    a refresh left out, and any :data:`WEEK_INVALID` counts.
    """
    band, params = band_sql(edges)
    sql = f"""
    SELECT doc_type, field, form_version, {band} AS band_index,
           count_if(NOT bad_) AS n, count_if(bad_) AS bad
    FROM source_rows
    WHERE extracted_at >= $start AND extracted_at < $end
    GROUP BY doc_type, field, form_version, {band}
    """
    return sql, params


def rank_key(digest: str) -> str:
    """The permanent random number's rank key as text, from the hex MD5 ``digest``.

    MD5's bytes reversed, in hex: DuckDB's md5_number reads the digest
    little-endian, so this text sorts exactly as ``H``
    (fieldtrust.sampling.prn), and every engine has md5() and substr().
    """
    return " || ".join(f"substr({digest}, {31 - 2 * i}, 2)" for i in range(16))


#: The digest :func:`rank_key` reads: of ``"{seed}:{week}:{extraction_id}"``.
RANK_DIGEST = "md5(CAST($seed AS VARCHAR) || ':' || $week || ':' || extraction_id)"

#: Every stored column a picked row brings home, its document's location included.
_COPIED = (
    "extraction_id, doc_id, doc_type, form_version, field, value, value_status, confidence,"
    " model, extracted_at, conflict, conflict_value, source_excerpt, extractor_version,"
    " document_uri, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1"
)


def draw_picks(edges: Sequence[float], *, skip_bad: bool) -> tuple[str, dict[str, Any]]:
    """The first ``n_sample`` rows of each cell by rank key, with every stored column.

    ``skip_bad``: leave out the rows an ingest rule rejects (asked only when
    :func:`cell_parts` found some: the rules are a third of a draw's work).

    Joins the table ``draw_alloc`` (doc_type, field, form_version, band_index,
    cell, n_sample, cutoff_top): rows whose key's first byte is above
    ``cutoff_top`` (the first two characters of the cell's cutoff key) are not
    ranked. A first byte, not the whole key: building the key is most of the
    cost of a draw, so it is built only for the few rows ranked. Bind seed,
    week, start, end.
    """
    band, params = band_sql(edges)
    sql = f"""
    WITH week_rows AS (
        SELECT {_COPIED}, {band} AS band_index, {RANK_DIGEST} AS digest_
        FROM source_rows
        WHERE extracted_at >= $start AND extracted_at < $end{" AND NOT bad_" if skip_bad else ""}
    ),
    candidates AS (
        SELECT w.*, {rank_key("w.digest_")} AS rank_key, a.cell, a.n_sample
        FROM week_rows w JOIN draw_alloc a
          ON w.doc_type = a.doc_type AND w.field = a.field
         AND w.form_version = a.form_version AND w.band_index = a.band_index
        WHERE substr(w.digest_, 31, 2) <= a.cutoff_top
    ),
    ranked AS (
        SELECT *, row_number() OVER (PARTITION BY cell ORDER BY rank_key, extraction_id) AS rank_
        FROM candidates
    )
    SELECT {_COPIED}, cell, rank_ FROM ranked WHERE rank_ <= n_sample
    """
    return sql, params


def problems(conditions: Sequence[tuple[str, str, str]], limit: int, where: str = "true") -> str:
    """The first ``limit`` rule failures, by file, row and rule, over ``source_raw``.

    ``conditions`` are (condition, value, extra) SQL of the ingest rules;
    ``where`` (SQL over ``source_raw``) picks the rows looked at.
    """
    parts = [
        f"SELECT file_, row_, {index} AS rule_, CAST({value} AS VARCHAR) AS value_,"
        f" CAST({extra} AS VARCHAR) AS extra_ FROM source_raw WHERE ({where}) AND {condition}"
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
