"""Decisions: roles, frozen evidence, current policy, no way to edit history."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import importlib
import inspect
import json
import math
import pkgutil
import re
from pathlib import Path

import duckdb
import numpy as np
import pytest
from decided import certification
from fieldtrust.governance import acts
from fieldtrust.governance.acts import _record
from fieldtrust.governance.decisions import current_policy, decision_history
from fieldtrust.governance.evidence import (
    Evidence,
    canonical_json,
    evidence_json,
    evidence_payload,
    load_evidence,
)
from fieldtrust.labels.verdicts import record_verdict

import fieldtrust
from fieldtrust import governance, labels
from fieldtrust.errors import PermissionDenied, Refused
from tests.conftest import table_fingerprint

CERTIFIED = certification(0.95, audit_weeks=("2026-W10",))


def _approve(con: duckdb.DuckDBPyConnection, actor: str = "mona", **kwargs: object) -> object:
    """The private writer, as ``acts.approve`` calls it after certifying (the fixture store
    is too small to certify anything)."""
    arguments: dict[str, object] = {
        "action": "approve", "doc_type": "invoice", "field": "total", "threshold": 0.95,
        "comment": "certified 4 weeks running", "certification": CERTIFIED,
    }
    arguments.update(kwargs)
    return _record(
        con, actor, arguments.pop("action"), arguments.pop("doc_type"),  # type: ignore[arg-type]
        arguments.pop("field"), arguments.pop("threshold"),  # type: ignore[arg-type]
        arguments.pop("comment"), **arguments,  # type: ignore[arg-type]
    )


def test_approval_freezes_evidence_that_reads_back_unchanged(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    decision = _approve(review_store)
    text = evidence_json(review_store, decision.evidence_id)  # type: ignore[attr-defined]
    assert hashlib.sha256(text.encode()).hexdigest() == decision.evidence_id  # type: ignore[attr-defined]
    payload = json.loads(text)
    assert canonical_json(payload) == text  # canonical: sorted keys, compact
    assert payload["certification"] == CERTIFIED.to_dict()
    assert payload["revocation"] is None
    assert payload["format"] == 2
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
    evidence = load_evidence(review_store, decision.evidence_id)  # type: ignore[attr-defined]
    assert evidence.certification == CERTIFIED
    assert (evidence.doc_type, evidence.field) == ("invoice", "total")
    assert evidence.provenance.code_version == fieldtrust.__version__
    assert evidence.to_json() == text


def test_evidence_round_trips_through_its_json_form() -> None:
    from fieldtrust.calibration.stability import VersionCheck, WeekCheck
    from fieldtrust.governance.evidence import AuditDesign
    from fieldtrust.governance.revocation import RevocationRecommendation
    from fieldtrust.governance.revocation import WeekCheck as AuditWeek
    from fieldtrust.store.provenance import Provenance

    checked = certification(
        0.9, window=("2026-W09", "2026-W10"), weeks_checked=(
            WeekCheck("2026-W10", 120, 0.99, 0.004, False),
            WeekCheck("2026-W09", 0, float("nan"), float("nan"), False)),
        form_versions=(VersionCheck("v2", 40, 0.12, True, 30, 1.0, 0.905, False),),
    )
    flagged = RevocationRecommendation(
        "invoice", "total", 0.9, "mona", dt.datetime(2026, 3, 6, 15, 12, 9, 123456), "d-1",
        [AuditWeek("2026-W11", 30, 0.8, 0.9, True)], "revocation recommended: week 2026-W11")
    evidence = Evidence(
        doc_type="invoice", field="total", certification=checked, revocation=flagged,
        designs=(AuditDesign("2026-W10/v1", "2026-W10", 1, 7, "ab" * 32, {"cells": ["x"]}),),
        provenance=Provenance("0.1.0", "0013_store_history_chain"),
    )
    text = evidence.to_json()
    back = Evidence.from_dict(json.loads(text))
    assert back.to_json() == text  # NaN (no labels) travels as null and comes back as NaN
    assert back.revocation == flagged and back.designs == evidence.designs
    assert back.provenance == evidence.provenance
    assert back.certification is not None
    assert back.certification.weeks_checked[0] == checked.weeks_checked[0]
    assert math.isnan(back.certification.weeks_checked[1].accuracy)
    assert dataclasses.replace(back, certification=None) == dataclasses.replace(
        evidence, certification=None)
    with pytest.raises(Refused, match="format 1 is not format 2"):
        Evidence.from_dict({**json.loads(text), "format": 1})


def test_tampered_evidence_is_detected(review_store: duckdb.DuckDBPyConnection) -> None:
    decision = _approve(review_store)
    evidence_id = decision.evidence_id  # type: ignore[attr-defined]
    # Someone edits the file behind fieldtrust's back (the library has no way to).
    review_store.execute(
        "UPDATE evidence_snapshots SET payload_json = replace(payload_json, '0.987', '0.999')"
    )
    with pytest.raises(Refused, match="does not hash to its id"):
        evidence_payload(review_store, evidence_id)


def test_canonical_json_is_stable_and_plain() -> None:
    a = {"b": np.float64(0.5), "a": [np.int64(3), (1, 2)], "c": float("nan"),
         "d": dt.date(2026, 3, 2), "e": {"z", "y"}}
    assert canonical_json(a) == canonical_json(dict(reversed(list(a.items()))))
    assert canonical_json(a) == '{"a":[3,[1,2]],"b":0.5,"c":null,"d":"2026-03-02","e":["y","z"]}'
    with pytest.raises(Refused, match="cannot be frozen as JSON"):
        canonical_json({"x": object()})


def test_current_policy_is_the_latest_decision(review_store: duckdb.DuckDBPyConnection) -> None:
    con = review_store
    first = _approve(con)
    (entry,) = current_policy(con)
    assert (entry.status, entry.threshold, entry.decision) == ("active", 0.95, first)
    revoked = acts.revoke(con, "root", "invoice", "total", "new form v2 fails")
    assert revoked.threshold == 0.95 and revoked.role == "admin"
    (entry,) = current_policy(con)
    assert (entry.status, entry.threshold, entry.decision.action) == ("none", None, "revoke")
    again = _approve(con, threshold=0.95)
    rejected = acts.reject(con, "mona", "invoice", "tax", "too few labels")
    assert [(e.field, e.status) for e in current_policy(con)] == [("tax", "none"),
                                                                  ("total", "active")]
    assert decision_history(con) == [first, revoked, again, rejected]
    assert decision_history(con, "invoice", "tax") == [rejected]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"comment": "  "}, Refused, "needs a comment"),
        ({"threshold": None}, Refused, "needs a threshold"),
        ({"threshold": 1.5}, Refused, "outside"),
        ({"certification": None}, Refused, "needs its certification"),
        ({"threshold": 0.9}, Refused, "evidence certifies 0.95"),
        ({"action": "pause"}, Refused, "action 'pause' is not one of"),
        ({"field": "iban"}, Refused, "no extractions of doc_type 'invoice', field 'iban'"),
        ({"action": "revoke"}, Refused, "nothing to revoke"),
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
               for package in (labels, governance)
               for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    modules.append(importlib.import_module("fieldtrust.store.access"))  # the grants
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


def test_the_frozen_designs_are_those_of_the_weeks_the_evidence_names(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    # The store's only sample is of 2026-W10: evidence resting on 2026-W09 names no design.
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="correct")
    elsewhere = certification(0.95, audit_weeks=("2026-W09",))
    decision = _approve(review_store, certification=elsewhere)
    payload = evidence_payload(review_store, decision.evidence_id)  # type: ignore[attr-defined]
    assert payload["designs"] == []
    # A revocation without a recommendation rests on every audit of the stratum.
    revoked = acts.revoke(review_store, "mona", "invoice", "total", "on other grounds")
    every = evidence_payload(review_store, revoked.evidence_id or "")
    assert [d["week"] for d in every["designs"]] == ["2026-W10"]
    assert (every["certification"], every["revocation"]) == (None, None)


def test_decisions_are_made_only_by_the_acts() -> None:
    """No public writer takes evidence from its caller: each act computes its own."""
    public = [name for name, obj in inspect.getmembers(acts, inspect.isfunction)
              if not name.startswith("_") and obj.__module__ == acts.__name__]
    assert public == ["approve", "reject", "resume", "revoke"]
    for name in public:
        parameters = inspect.signature(getattr(acts, name)).parameters
        assert "evidence" not in parameters and "certification" not in parameters, name
