"""A few extractions by id, without reading every extraction row.

DuckDB keeps no index on ``extractions.extraction_id``: a lookup by id reads
the id column of every row (tens of milliseconds at ten million rows, more
on a busy machine), and the review screen makes several per key press. Two
things make it cheap. An extraction that was sampled or labelled has a copy
of its columns in ``sampled_extractions`` (a few per cent of the rows), and
that copy holds its ``extracted_at``: stores are ingested in time order, so a
lookup bounded by that time lets DuckDB skip every row group of other weeks
(the same trick as :mod:`fieldtrust.labels.agreement`'s values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
from fieldtrust.store.sql import fetch_one


def is_copied(con: duckdb.DuckDBPyConnection, extraction_id: str) -> bool:
    """Whether ``extraction_id`` has its copy in ``sampled_extractions`` (a small table)."""
    return fetch_one(con, "SELECT 1 FROM sampled_extractions WHERE extraction_id = ?",
                     [extraction_id]) is not None


def has_extraction(con: duckdb.DuckDBPyConnection, extraction_id: str) -> bool:
    """Whether the store holds ``extraction_id``: the sampled copy first, the rows if needed."""
    if is_copied(con, extraction_id):
        return True
    return fetch_one(con, "SELECT 1 FROM extractions WHERE extraction_id = ? LIMIT 1",
                     [extraction_id]) is not None


@dataclass(frozen=True)
class ItemFacts:
    """What a review screen shows of one extraction: where it is from, its value, its excerpt.

    ``confidence`` is for the folded-away panel only (a number anchors a
    reviewer's judgement); ``conflict_value`` is another source's value, None
    when the sources agree.
    """

    extraction_id: str
    doc_id: str
    doc_type: str
    form_version: str
    field: str
    value: str | None
    value_status: str
    source_excerpt: str | None
    confidence: float
    conflict_value: str | None
    conflict: bool


_SPAN_SQL = """
SELECT min(extracted_at), max(extracted_at), count(*) FROM sampled_extractions
WHERE list_contains(?::VARCHAR[], extraction_id)
"""
_FACTS_SQL = """
SELECT extraction_id, doc_id, doc_type, form_version, field, value, value_status,
       source_excerpt, confidence, conflict_value, conflict
FROM extractions WHERE list_contains(?::VARCHAR[], extraction_id) AND {span}
"""


def item_facts(
    con: duckdb.DuckDBPyConnection, extraction_ids: Sequence[str]
) -> dict[str, ItemFacts]:
    """:class:`ItemFacts` of each of ``extraction_ids`` the store holds, by id.

    When every id is in the sampled copy (audit items and labelled items
    are), the read is bounded by their ``extracted_at`` span, so it touches
    only the row groups of that time; otherwise it reads the id column of
    every row.
    """
    ids = list(dict.fromkeys(extraction_ids))
    if not ids:
        return {}
    first, last, copied = con.execute(_SPAN_SQL, [ids]).fetchall()[0]
    if copied == len(ids):  # bound values, so the span reaches the scan
        sql, params = _FACTS_SQL.format(span="extracted_at BETWEEN ? AND ?"), [ids, first, last]
    else:
        sql, params = _FACTS_SQL.format(span="TRUE"), [ids]
    facts = {}
    for (extraction_id, doc_id, doc_type, form_version, field, value, status, excerpt,
         confidence, conflict_value, conflict) in con.execute(sql, params).fetchall():
        facts[extraction_id] = ItemFacts(
            extraction_id, doc_id, doc_type, form_version, field, value, status, excerpt,
            float(confidence), conflict_value if conflict else None, bool(conflict))
    return facts
