from __future__ import annotations

import datetime as dt

import duckdb
import pandas as pd
import pytest
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.queue import priority_queue
from fieldtrust.store.scope import Scope

WHEN = dt.datetime(2026, 11, 24, 12)


def rows(*items: tuple[str, str, str, float, str, bool]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "extraction_id": eid,
                "doc_id": f"d-{eid}",
                "doc_type": doc_type,
                "form_version": "v1",
                "field": field,
                "value": "1.00",
                "value_status": status,
                "confidence": confidence,
                "extracted_at": WHEN,
                "conflict": conflict,
                "correct": True,
            }
            for eid, doc_type, field, confidence, status, conflict in items
        ]
    )


def decide(
    con: duckdb.DuckDBPyConnection,
    decision_id: str,
    doc_type: str,
    field: str,
    action: str,
    threshold: float | None,
    day: int,
) -> None:
    con.execute(
        "INSERT INTO decisions VALUES (?, ?, ?, ?, ?, 'mia', 'manager', 'test', ?, NULL)",
        [decision_id, doc_type, field, action, threshold, dt.datetime(2026, 12, day)],
    )


def add_map(
    con: duckdb.DuckDBPyConnection, doc_type: str, field: str, knots: list[tuple[float, float]]
) -> None:
    con.execute(
        "INSERT INTO recalibration_maps VALUES ('m1', ?, ?, 'isotonic', 500, NULL, NULL, NULL,"
        " TIMESTAMP '2026-12-01')",
        [doc_type, field],
    )
    for x, y in knots:
        con.execute("INSERT INTO recalibration_knots VALUES ('m1', ?, ?)", [x, y])


@pytest.fixture
def store_with_queue(con: duckdb.DuckDBPyConnection, world) -> duckdb.DuckDBPyConnection:
    world.insert(
        con,
        rows(
            ("a-high", "invoice", "total", 0.97, "present", False),  # covered by approval at 0.9
            ("a-low", "invoice", "total", 0.60, "present", False),
            ("a-conflict", "invoice", "total", 0.99, "present", True),  # covered despite conflict
            ("b-mid", "receipt", "date", 0.70, "present", False),
            ("b-unclear", "receipt", "date", 0.95, "unclear", False),
            ("b-conflict", "receipt", "date", 0.90, "present", True),
            ("b-labelled", "receipt", "date", 0.10, "present", False),
            ("c-cal", "w2", "wages", 0.80, "present", False),  # calibrated down to 0.40
            ("d-revoked", "bank", "iban", 0.98, "present", False),  # approval later revoked
        ),
    )
    decide(con, "d1", "invoice", "total", "approve", 0.9, 1)
    decide(con, "d2", "bank", "iban", "approve", 0.9, 1)
    decide(con, "d3", "bank", "iban", "revoke", None, 2)
    con.execute(
        "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round, labeled_at)"
        " VALUES ('l1', 'b-labelled', 'correct', 'ana', 'primary', TIMESTAMP '2026-12-01')"
    )
    add_map(con, "w2", "wages", [(0.0, 0.0), (1.0, 0.5)])
    return con


def test_queue_order_and_reasons(store_with_queue: duckdb.DuckDBPyConnection) -> None:
    queue = priority_queue(store_with_queue).to_pandas()
    assert queue["extraction_id"].tolist() == [
        "b-conflict",  # conflicts first
        "b-unclear",  # then unclear values
        "c-cal",  # then calibrated 0.40 ...
        "a-low",  # ... stated 0.60 (no map for invoice/total)
        "b-mid",  # ... stated 0.70
        "d-revoked",  # revoked approval covers nothing
    ]
    assert queue["position"].tolist() == [1, 2, 3, 4, 5, 6]
    reasons = dict(zip(queue["extraction_id"], queue["reason"], strict=True))
    assert reasons["b-conflict"].startswith("conflict")
    assert reasons["b-unclear"] == "value marked unclear"
    assert reasons["c-cal"] == "calibrated confidence 0.400 (isotonic)"
    assert reasons["a-low"] == "stated confidence 0.600 (no calibration map yet)"
    cal = queue.set_index("extraction_id").loc["c-cal"]
    assert (cal["calibrated_confidence"], cal["calibration_method"]) == (
        pytest.approx(0.4),
        "isotonic",
    )


def test_approved_and_labelled_items_are_left_out(
    store_with_queue: duckdb.DuckDBPyConnection,
) -> None:
    ids = set(priority_queue(store_with_queue).column("extraction_id").to_pylist())
    assert not ids & {"a-high", "a-conflict", "b-labelled"}


def test_a_newer_approval_replaces_the_threshold(
    store_with_queue: duckdb.DuckDBPyConnection,
) -> None:
    decide(store_with_queue, "d4", "invoice", "total", "approve", 0.5, 3)
    ids = priority_queue(store_with_queue).column("extraction_id").to_pylist()
    assert "a-low" not in ids


def test_limit_and_scope(store_with_queue: duckdb.DuckDBPyConnection) -> None:
    assert priority_queue(store_with_queue, limit=2).column("extraction_id").to_pylist() == [
        "b-conflict",
        "b-unclear",
    ]
    scoped = priority_queue(store_with_queue, Scope(doc_types=("invoice",)))
    assert scoped.column("extraction_id").to_pylist() == ["a-low"]
    with pytest.raises(ValueError, match="limit must be between 1 and 100,000"):
        priority_queue(store_with_queue, limit=0)


BRUTE_FORCE = """
WITH policy AS (
    SELECT * FROM decisions QUALIFY row_number() OVER (
        PARTITION BY doc_type, field ORDER BY decided_at DESC, decision_id DESC) = 1
)
SELECT e.extraction_id
FROM extractions e
LEFT JOIN policy p USING (doc_type, field)
LEFT JOIN calibrated_confidence c USING (extraction_id)
WHERE NOT (coalesce(p.action = 'approve', false) AND e.confidence >= p.threshold)
  AND e.extraction_id NOT IN (SELECT extraction_id FROM labels)
ORDER BY CASE WHEN e.conflict THEN 0 WHEN e.value_status = 'unclear' THEN 1 ELSE 2 END,
         coalesce(c.calibrated_confidence, e.confidence), e.confidence, e.extraction_id
LIMIT ?
"""


@pytest.mark.parametrize("limit", [1, 7, 40])
def test_shortcut_matches_ordering_everything(
    con: duckdb.DuckDBPyConnection, world, limit: int
) -> None:
    frame = world.frame("2026-W48", 1500, seed=limit, doc_types=("invoice", "receipt", "w2"))
    frame["confidence"] = (frame["confidence"] * 20).round() / 20  # many ties
    frame.loc[frame.index % 37 == 0, "conflict"] = True
    frame.loc[frame.index % 41 == 0, "value_status"] = "unclear"
    world.insert(con, frame)
    # A flat-topped isotonic map, and a map that goes down (no shortcut allowed there).
    add_map(con, "invoice", "total", [(0.0, 0.1), (0.5, 0.3), (0.8, 0.3), (1.0, 0.9)])
    con.execute(
        "INSERT INTO recalibration_maps VALUES ('m2', 'receipt', 'date', 'platt', 500,"
        " NULL, NULL, NULL, TIMESTAMP '2026-12-01')"
    )
    for x, y in [(0.0, 0.9), (1.0, 0.2)]:
        con.execute("INSERT INTO recalibration_knots VALUES ('m2', ?, ?)", [x, y])
    decide(con, "d1", "w2", "date", "approve", 0.9, 1)
    world.label(
        con,
        draw_sample(con, "2026-W48", Design(base_rate=0.05), seed=1, actor=world.qa_lead).sample_id,
    )
    expected = [row[0] for row in con.sql(BRUTE_FORCE, params=[limit]).fetchall()]
    assert priority_queue(con, limit=limit).column("extraction_id").to_pylist() == expected


def test_empty_queue(con: duckdb.DuckDBPyConnection) -> None:
    assert priority_queue(con).num_rows == 0
