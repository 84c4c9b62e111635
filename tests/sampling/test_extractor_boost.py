"""A new extractor version is boosted in the draw like a new form version.

Files ingested through the library (the ``extractor_version`` column), cells
planned by :func:`fieldtrust.sampling.cells.plan_cells`: a form version whose
extractor changed within ``new_version_weeks`` is *new* (sampled at
``base_rate * boost``), the same form version with its old extractor only
is established, and a model change older than ``new_version_weeks`` is
established again.
"""

from __future__ import annotations

import datetime as dt

import duckdb
import pyarrow as pa
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.sampling.cells import plan_cells
from fieldtrust.sampling.design import Design
from fieldtrust.store.weeks import Week

WEEKS = [Week("2026-W40").shift(k) for k in range(6)]


def _rows(week: Week, extractor: str, n: int, prefix: str) -> pa.Table:
    start, _ = week.bounds()
    return pa.table({
        "extraction_id": [f"{prefix}-{week}-{i}" for i in range(n)],
        "doc_id": [f"d{i}" for i in range(n)],
        "doc_type": ["invoice"] * n,
        "form_version": ["v1"] * n,
        "field": ["total"] * n,
        "value": ["1"] * n,
        "confidence": [0.97] * n,
        "extracted_at": [start + dt.timedelta(hours=1 + i % 100) for i in range(n)],
        "extractor_version": [extractor] * n,
    })


def _status(con: duckdb.DuckDBPyConnection, week: Week) -> dict[str, float]:
    cells = plan_cells(con, week, Design(base_rate=0.02, new_version_weeks=2, boost=5.0))
    return dict(zip(cells.column("version_status").to_pylist(),
                    cells.column("inclusion_prob").to_pylist(), strict=True))


def test_a_model_change_makes_its_form_version_new_for_new_version_weeks(
    con: duckdb.DuckDBPyConnection,
) -> None:
    for week in WEEKS[:3]:
        ingest_table(con, _rows(week, "model-a", 1000, "a"), source=f"a-{week}")
    assert _status(con, WEEKS[2]) == {"established": 0.02}
    ingest_table(con, _rows(WEEKS[3], "model-b", 1000, "b"), source="b")
    first_seen = con.execute("SELECT extractor_version, first_seen_at FROM extractor_versions"
                             " ORDER BY 1").fetchall()
    assert [e for e, _ in first_seen] == ["model-a", "model-b"]
    assert first_seen[1][1] == WEEKS[3].start + dt.timedelta(hours=1)
    # The model change's week and the next: boosted fivefold; before it: as it was.
    assert _status(con, WEEKS[3]) == {"new": 0.1}
    ingest_table(con, _rows(WEEKS[4], "model-b", 1000, "b2"), source="b2")
    assert _status(con, WEEKS[4]) == {"new": 0.1}
    assert _status(con, WEEKS[2]) == {"established": 0.02}
    ingest_table(con, _rows(WEEKS[5], "model-b", 1000, "b3"), source="b3")
    assert _status(con, WEEKS[5]) == {"established": 0.02}
    stored = con.execute("SELECT extractor_version, count(*) FROM extractions GROUP BY 1"
                         " ORDER BY 1").fetchall()
    assert stored == [("model-a", 3000), ("model-b", 3000)]


def test_a_file_without_the_column_stores_unknown(con: duckdb.DuckDBPyConnection) -> None:
    ingest_table(con, _rows(WEEKS[0], "x", 10, "u").drop(["extractor_version"]), source="u")
    assert con.execute("SELECT DISTINCT extractor_version FROM extractions").fetchall() == [
        ("unknown",)]
