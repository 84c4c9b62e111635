"""A short description of what a store holds, for `fieldtrust info` and the demo."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from store.sql import fetch_one
from store.weeks import week_sql


@dataclass(frozen=True)
class StoreSummary:
    extractions: int
    documents: int
    doc_types: int
    strata: int
    form_versions: int
    first_week: str | None
    last_week: str | None
    labels: int
    audit_samples: int
    decisions: int


def store_summary(con: duckdb.DuckDBPyConnection) -> StoreSummary:
    """Counts of what the store holds (one pass over each table)."""
    row = fetch_one(
        con,
        f"""
        SELECT count(*), count(DISTINCT doc_id), count(DISTINCT doc_type),
               count(DISTINCT (doc_type, field)),
               count(DISTINCT (doc_type, form_version)),
               {week_sql("min(extracted_at)")}, {week_sql("max(extracted_at)")},
               (SELECT count(*) FROM labels),
               (SELECT count(*) FROM audit_samples),
               (SELECT count(*) FROM decisions)
        FROM extractions
        """,
    )
    assert row is not None
    return StoreSummary(*row)
