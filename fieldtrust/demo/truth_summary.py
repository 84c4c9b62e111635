"""What a demo store holds, measured against its hidden truth.

Overall accuracy is always reported next to the worst strata and the new form
versions (STATS.md section 1): 97% overall hides a stratum that is right 60%
of the time.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from fieldtrust.store.weeks import week_sql

#: How many of the worst strata a summary lists.
WORST = 5
#: A form version first seen in the last this-many weeks of the store is new.
NEW_WEEKS = 2


@dataclass(frozen=True)
class StratumTruth:
    """True accuracy of one (doc_type, field) stratum."""

    doc_type: str
    field: str
    rows: int
    mean_confidence: float
    accuracy: float


@dataclass(frozen=True)
class VersionTruth:
    """A new form version against its type's established ones, in the same weeks."""

    doc_type: str
    form_version: str
    first_week: str
    rows: int
    accuracy: float
    #: None when a tiny demo has no established rows of that type in those weeks.
    established_accuracy: float | None


@dataclass(frozen=True)
class DemoSummary:
    """What the demo store holds; ``build_seconds`` is 0 when only described."""

    rows: int
    documents: int
    doc_types: tuple[str, ...]
    strata: int
    weeks: tuple[str, ...]
    overall_accuracy: float
    worst_strata: tuple[StratumTruth, ...]
    new_versions: tuple[VersionTruth, ...]
    labels: int
    audit_samples: int
    build_seconds: float = 0.0


def truth_summary(con: duckdb.DuckDBPyConnection) -> DemoSummary:
    """Describe a demo store from its extractions, truth and labels (aggregated in SQL)."""
    week = week_sql("e.extracted_at")
    head = con.execute(
        f"""
        SELECT count(*), count(DISTINCT e.doc_id), list(DISTINCT e.doc_type ORDER BY e.doc_type),
               count(DISTINCT (e.doc_type, e.field)),
               list(DISTINCT {week} ORDER BY {week}),
               avg(t.correct::INTEGER),
               (SELECT count(*) FROM labels), (SELECT count(*) FROM audit_samples)
        FROM extractions e JOIN demo_truth t USING (extraction_id)
        """
    ).fetchall()[0]
    worst = con.execute(
        """
        SELECT e.doc_type, e.field, count(*), avg(e.confidence), avg(t.correct::INTEGER) AS acc
        FROM extractions e JOIN demo_truth t USING (extraction_id)
        GROUP BY ALL ORDER BY acc, e.doc_type, e.field LIMIT ?
        """,
        [WORST],
    ).fetchall()
    return DemoSummary(
        rows=int(head[0]),
        documents=int(head[1]),
        doc_types=tuple(head[2] or ()),
        strata=int(head[3]),
        weeks=tuple(head[4] or ()),
        overall_accuracy=float(head[5]) if head[5] is not None else float("nan"),
        worst_strata=tuple(StratumTruth(*row) for row in worst),
        new_versions=_new_versions(con),
        labels=int(head[6]),
        audit_samples=int(head[7]),
    )


def _new_versions(con: duckdb.DuckDBPyConnection) -> tuple[VersionTruth, ...]:
    """New form versions, compared with the established ones on the same weeks and fields."""
    week = week_sql("e.extracted_at")
    rows = con.execute(
        f"""
        WITH rows_ AS (
            SELECT e.doc_type, e.form_version, e.field, {week} AS week, t.correct::INTEGER AS ok
            FROM extractions e JOIN demo_truth t USING (extraction_id)
        ),
        weeks AS (SELECT DISTINCT week FROM rows_),
        recent AS (SELECT week FROM weeks ORDER BY week DESC LIMIT ?),
        firsts AS (
            SELECT doc_type, form_version, min(week) AS first_week FROM rows_ GROUP BY ALL
        ),
        new_ AS (SELECT * FROM firsts WHERE first_week >= (SELECT min(week) FROM recent)
                 AND first_week > (SELECT min(week) FROM weeks))
        SELECT n.doc_type, n.form_version, n.first_week,
               count(*) FILTER (WHERE r.form_version = n.form_version),
               avg(r.ok) FILTER (WHERE r.form_version = n.form_version),
               avg(r.ok) FILTER (WHERE r.form_version NOT IN (SELECT form_version FROM new_ x
                                                             WHERE x.doc_type = n.doc_type))
        FROM new_ n JOIN rows_ r ON r.doc_type = n.doc_type AND r.week >= n.first_week
        GROUP BY ALL ORDER BY n.doc_type, n.form_version
        """,
        [NEW_WEEKS],
    ).fetchall()
    return tuple(VersionTruth(*row) for row in rows)
