"""A short description of what a store holds, for `fieldtrust info`, the demo and the filters."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import duckdb
from fieldtrust.store.rollup import counts_a_lake, is_current
from fieldtrust.store.sql import fetch_one
from fieldtrust.store.weeks import Week, week_sql


@dataclass(frozen=True)
class StoreSummary:
    extractions: int
    documents: int | None  # None for a lake source: only its counts are known
    doc_types: int
    strata: int
    form_versions: int
    first_week: str | None
    last_week: str | None
    labels: int
    audit_samples: int
    decisions: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``--json`` prints)."""
        return dataclasses.asdict(self)


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
    if counts_a_lake(con):
        # A lake's rows are counted, not stored: what the store holds is its sample.
        lake = fetch_one(
            con,
            "SELECT sum(n), count(DISTINCT doc_type), count(DISTINCT (doc_type, field)),"
            " count(DISTINCT (doc_type, form_version)), min(week), max(week)"
            " FROM extraction_counts",
        )
        assert lake is not None
        row = (lake[0], None, *lake[1:], *row[7:])  # documents: not known from counts
    return StoreSummary(*row)


@dataclass(frozen=True)
class FilterOptions:
    """The values a scope can filter on: what the store actually holds."""

    weeks: tuple[Week, ...]
    doc_types: tuple[str, ...]
    form_versions: tuple[tuple[str, str], ...]  # (doc_type, form_version)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``fieldtrust info --values --json`` prints)."""
        return {
            "weeks": list(self.weeks),
            "doc_types": list(self.doc_types),
            "form_versions": [{"doc_type": d, "form_version": v} for d, v in self.form_versions],
        }


def filter_options(con: duckdb.DuckDBPyConnection) -> FilterOptions:
    """ISO weeks, document types and form versions present in the store, sorted.

    These are the values a :class:`~fieldtrust.store.scope.Scope` can usefully hold (the
    dashboard's sidebar filters offer them, ``fieldtrust info --values`` lists
    them). An empty store gives empty tuples.

    Returns
    -------
    FilterOptions
        ``weeks`` oldest first (``'2026-W48'``); ``doc_types`` sorted;
        ``form_versions`` as (doc_type, form_version) pairs sorted by both.
    """
    if is_current(con):  # the rollup holds every week and version in a few thousand rows
        weeks = [w for (w,) in con.sql(
            "SELECT DISTINCT week FROM extraction_counts ORDER BY week").fetchall()]
        versions = con.sql(
            "SELECT DISTINCT doc_type, form_version FROM extraction_counts ORDER BY ALL"
        ).fetchall()
        return FilterOptions(
            weeks=tuple(Week(w) for w in weeks),
            doc_types=tuple(sorted({str(doc_type) for doc_type, _ in versions})),
            form_versions=tuple((str(d), str(v)) for d, v in versions),
        )
    # Truncating to the Monday is cheaper than formatting every timestamp as a
    # week label; only the few distinct Mondays are formatted, in Python.
    mondays = con.sql(
        "SELECT DISTINCT date_trunc('week', extracted_at) AS monday FROM extractions"
        " ORDER BY monday"
    ).fetchall()
    versions = con.sql(
        "SELECT DISTINCT doc_type, form_version FROM extractions ORDER BY ALL"
    ).fetchall()
    return FilterOptions(
        weeks=tuple(Week.of(monday) for (monday,) in mondays),
        doc_types=tuple(sorted({str(doc_type) for doc_type, _ in versions})),
        form_versions=tuple((str(d), str(v)) for d, v in versions),
    )
