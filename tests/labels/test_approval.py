"""Approving a calibration candidate: only current candidates, only at the certified threshold."""

from __future__ import annotations

import datetime as dt
from typing import Any

import duckdb
import numpy as np
import pytest
from fieldtrust.labels.approval import approve_candidate
from fieldtrust.labels.decisions import current_policy
from fieldtrust.labels.errors import DecisionError, PermissionDenied
from fieldtrust.labels.evidence import evidence_payload
from fieldtrust.store.weeks import week_bounds

WEEKS = ("2026-W07", "2026-W08", "2026-W09", "2026-W10")


@pytest.fixture
def certified_store(con: duckdb.DuckDBPyConnection, builder: Any) -> duckdb.DuckDBPyConnection:
    """invoice/total: 4 weeks x 120 labels, all correct; invoice/tax: a third wrong."""
    builder.users()
    rng = np.random.default_rng(5)
    extractions, labels = [], []
    for week in WEEKS:
        start, _ = week_bounds(week)
        for field in ("tax", "total"):
            for i in range(120):
                extraction_id = f"{week}-{field}-{i}"
                extractions.append({"extraction_id": extraction_id, "field": field,
                                    "confidence": float(rng.uniform(0.9, 1.0)),
                                    "extracted_at": start + dt.timedelta(hours=2)})
                wrong = field == "tax" and i % 3 == 0
                labels.append({"extraction_id": extraction_id, "reviewer": "alice",
                               "review_round": "import", "import_batch_id": "random-batch",
                               "verdict": "incorrect" if wrong else "correct",
                               "corrected_status": "null" if wrong else None,
                               "error_type": "total_copied_into_tax" if wrong else None})
    builder.extractions(extractions)
    builder.labels(labels)
    # A file declared a simple random sample (labels import --random-sample).
    con.execute("INSERT INTO label_import_designs VALUES ('random-batch', 'random_sample',"
                " 'carol', now()::TIMESTAMP)")
    return con


def test_a_candidate_is_approved_at_its_certified_threshold_with_its_evidence(
    certified_store: duckdb.DuckDBPyConnection,
) -> None:
    from fieldtrust.calibration.candidates import automation_candidates

    (candidate,) = [a for a in automation_candidates(certified_store, n_min=50)
                    if a.field == "total"]
    assert candidate.candidate and candidate.threshold is not None
    decision = approve_candidate(certified_store, "mona", "invoice", "total",
                                 "four stable weeks", n_min=50)
    assert (decision.action, decision.threshold) == ("approve", candidate.threshold)
    payload = evidence_payload(certified_store, decision.evidence_id or "")
    assert payload["evidence"]["threshold"] == candidate.threshold
    assert payload["evidence"]["labels_above"] == candidate.evidence["labels_above"]
    assert [(e.field, e.status) for e in current_policy(certified_store)] == [("total", "active")]


def test_non_candidates_and_other_thresholds_are_refused(
    certified_store: duckdb.DuckDBPyConnection,
) -> None:
    with pytest.raises(DecisionError, match=r"invoice/tax is not an automation candidate \("):
        approve_candidate(certified_store, "mona", "invoice", "tax", "please", n_min=50)
    with pytest.raises(DecisionError, match=r"is certified at .*, not 0\.5"):
        approve_candidate(certified_store, "mona", "invoice", "total", "x", n_min=50,
                          threshold=0.5)
    with pytest.raises(PermissionDenied, match=r"alice \(role reviewer\) may not approve"):
        approve_candidate(certified_store, "alice", "invoice", "total", "x", n_min=50)
    assert current_policy(certified_store) == []
