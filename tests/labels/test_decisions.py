"""Decisions: roles, frozen evidence, current policy, no way to edit history."""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import inspect
import json
import pkgutil
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest
from fieldtrust.labels.decisions import current_policy, decide, decision_history
from fieldtrust.labels.errors import DecisionError, PermissionDenied
from fieldtrust.labels.evidence import canonical_json, evidence_json, evidence_payload
from fieldtrust.labels.verdicts import record_verdict

import fieldtrust
from fieldtrust import labels
from tests.conftest import table_fingerprint

EVIDENCE = {
    "threshold": 0.95,
    "labels": 412,
    "accuracy": 0.987,
    "lower_bound": 0.962,
    "weeks": ["2026-W10"],
    "form_versions": {"v1": 412},
}


def _approve(con: duckdb.DuckDBPyConnection, actor: str = "mona", **kwargs: object) -> object:
    arguments: dict[str, object] = {
        "action": "approve", "doc_type": "invoice", "field": "total", "threshold": 0.95,
        "comment": "certified 4 weeks running", "evidence": EVIDENCE,
    }
    arguments.update(kwargs)
    return decide(con, actor, **arguments)  # type: ignore[arg-type]


def test_approval_freezes_evidence_that_reads_back_unchanged(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    decision = _approve(review_store)
    text = evidence_json(review_store, decision.evidence_id)  # type: ignore[attr-defined]
    assert hashlib.sha256(text.encode()).hexdigest() == decision.evidence_id  # type: ignore[attr-defined]
    payload = json.loads(text)
    assert canonical_json(payload) == text  # canonical: sorted keys, compact
    assert payload["evidence"] == EVIDENCE
    assert payload["stratum"] == {"doc_type": "invoice", "field": "total"}
    assert payload["code_version"] == fieldtrust.__version__
    assert payload["schema_version"].startswith("00")
    sample = review_store.execute(
        "SELECT sample_id, design_sha256, design_json FROM audit_samples").fetchone()
    assert sample is not None
    assert payload["designs"] == [{
        "sample_id": sample[0], "week": "2026-W10", "version": 1, "seed": 7,
        "design_sha256": sample[1], "design": json.loads(sample[2]),
    }]
    assert evidence_payload(review_store, decision.evidence_id) == payload  # type: ignore[attr-defined]


def test_tampered_evidence_is_detected(review_store: duckdb.DuckDBPyConnection) -> None:
    decision = _approve(review_store)
    evidence_id = decision.evidence_id  # type: ignore[attr-defined]
    # Someone edits the file behind fieldtrust's back (the library has no way to).
    review_store.execute(
        "UPDATE evidence_snapshots SET payload_json = replace(payload_json, '0.987', '0.999')"
    )
    with pytest.raises(DecisionError, match="does not hash to its id"):
        evidence_payload(review_store, evidence_id)


def test_canonical_json_is_stable_and_plain() -> None:
    a = {"b": np.float64(0.5), "a": [np.int64(3), (1, 2)], "c": float("nan"),
         "d": dt.date(2026, 3, 2), "e": {"z", "y"}}
    assert canonical_json(a) == canonical_json(dict(reversed(list(a.items()))))
    assert canonical_json(a) == '{"a":[3,[1,2]],"b":0.5,"c":null,"d":"2026-03-02","e":["y","z"]}'
    with pytest.raises(DecisionError, match="cannot be frozen as JSON"):
        canonical_json({"x": object()})


def test_current_policy_is_the_latest_decision(review_store: duckdb.DuckDBPyConnection) -> None:
    con = review_store
    first = _approve(con)
    (entry,) = current_policy(con)
    assert (entry.status, entry.threshold, entry.decision) == ("active", 0.95, first)
    revoked = decide(con, "root", action="revoke", doc_type="invoice", field="total",
                     threshold=None, comment="new form v2 fails", evidence={})
    assert revoked.threshold == 0.95 and revoked.role == "admin"
    (entry,) = current_policy(con)
    assert (entry.status, entry.threshold, entry.decision.action) == ("none", None, "revoke")
    again = _approve(con, threshold=0.95)
    rejected = decide(con, "mona", action="reject", doc_type="invoice", field="tax",
                      threshold=None, comment="too few labels", evidence={})
    assert [(e.field, e.status) for e in current_policy(con)] == [("tax", "none"),
                                                                  ("total", "active")]
    assert decision_history(con) == [first, revoked, again, rejected]
    assert decision_history(con, "invoice", "tax") == [rejected]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"comment": "  "}, DecisionError, "needs a comment"),
        ({"threshold": None}, DecisionError, "needs a threshold"),
        ({"threshold": 1.5}, DecisionError, "outside"),
        ({"evidence": {}}, DecisionError, "needs evidence"),
        ({"threshold": 0.9}, DecisionError, "evidence certifies 0.95"),
        ({"action": "pause"}, DecisionError, "action 'pause' is not one of"),
        ({"field": "iban"}, DecisionError, "no extractions of doc_type 'invoice', field 'iban'"),
        ({"action": "revoke"}, DecisionError, "nothing to revoke"),
        ({"actor": "carol"}, PermissionDenied, r"carol \(role qa_lead\) may not approve"),
        ({"actor": "alice"}, PermissionDenied, r"alice \(role reviewer\) may not approve"),
    ],
)
def test_bad_decisions_are_refused_and_write_nothing(
    review_store: duckdb.DuckDBPyConnection,
    kwargs: dict[str, object],
    error: type[Exception],
    message: str,
) -> None:
    before = table_fingerprint(review_store)
    with pytest.raises(error, match=message):
        _approve(review_store, **kwargs)
    assert table_fingerprint(review_store) == before  # type: ignore[operator]


_MUTATING = re.compile(r"\b(update|delete|remove|edit|modify|drop|truncate|erase|replace)",
                       re.IGNORECASE)


def test_the_library_offers_no_way_to_edit_or_delete_history() -> None:
    modules = [importlib.import_module(m.name)
               for m in pkgutil.walk_packages(labels.__path__, "fieldtrust.labels.")]
    for module in modules:
        public = [name for name, obj in inspect.getmembers(module, callable)
                  if not name.startswith("_") and getattr(obj, "__module__", "") == module.__name__]
        assert not [name for name in public if _MUTATING.match(name)], module.__name__
    source = "\n".join(Path(m.__file__).read_text() for m in modules if m.__file__)
    history = r"(labels|decisions|evidence_snapshots|user_roles|skips)"
    assert not re.search(rf"UPDATE\s+{history}\b", source, re.IGNORECASE)
    assert not re.search(rf"DELETE\s+FROM\s+{history}\b", source, re.IGNORECASE)
    # The only DELETE releases a work-queue assignment on a skip.
    assert re.findall(r"DELETE\s+FROM\s+(\w+)", source) == ["assignments"]


@pytest.mark.parametrize("evidence", [
    {"audit_weeks": ["2026-W09"], "weeks_checked": [{"week": "2026-W10", "accuracy": 0.99}]},
    {"weeks_checked": [{"week": "2026-W09", "accuracy": 0.99}]},
    {"weeks": ["2026-W09"]},
], ids=["candidate-evidence", "stability-records", "plain-weeks"])
def test_the_frozen_designs_are_those_of_the_weeks_the_evidence_names(
    review_store: duckdb.DuckDBPyConnection, evidence: dict[str, object]
) -> None:
    # The store's only sample is of 2026-W10: evidence resting on 2026-W09 names no design.
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    decision = _approve(review_store, evidence=evidence)
    payload = evidence_payload(review_store, decision.evidence_id)  # type: ignore[attr-defined]
    assert payload["designs"] == []
    everything = _approve(review_store, evidence={"note": "no weeks named"}, comment="again")
    all_designs = evidence_payload(review_store, everything.evidence_id)  # type: ignore[attr-defined]
    assert [d["week"] for d in all_designs["designs"]] == ["2026-W10"]
