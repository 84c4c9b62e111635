"""The acts: approving only current candidates at the certified threshold, certified afresh.

The store's policy asks for 50 labels (an admin set it): the acts take it from there.
"""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pytest
from fieldtrust.governance.acts import approve, reject, revoke
from fieldtrust.governance.certification import certify
from fieldtrust.governance.decisions import current_policy
from fieldtrust.governance.evidence import evidence_payload
from fieldtrust.store.weeks import Week

from fieldtrust.errors import PermissionDenied, Refused
from tests.governance.conftest import WEEKS, random_sample_item, write_random_sample


@pytest.fixture
def certified_store(con: duckdb.DuckDBPyConnection, builder: Any) -> duckdb.DuckDBPyConnection:
    """invoice/total: 4 weeks x 120 labels, all correct; invoice/tax: a third wrong."""
    rng = np.random.default_rng(5)
    write_random_sample(con, builder, [
        random_sample_item(f"{week}-{field}-{i}", week, float(rng.uniform(0.9, 1.0)),
                           field=field, wrong=field == "tax" and i % 3 == 0)
        for week in WEEKS for field in ("tax", "total") for i in range(120)])
    return con


def test_a_candidate_is_approved_at_its_certified_threshold_with_its_evidence(
    certified_store: duckdb.DuckDBPyConnection,
) -> None:
    from fieldtrust.calibration.candidates import automation_candidates

    # No bar given: the store's policy (n_min 50), the bar the approval is held to.
    (candidate,) = [a for a in automation_candidates(certified_store) if a.field == "total"]
    assert candidate.candidate and candidate.threshold is not None
    decision = approve(certified_store, "mona", "invoice", "total", "four stable weeks")
    assert (decision.action, decision.threshold) == ("approve", candidate.threshold)
    payload = evidence_payload(certified_store, decision.evidence_id or "")
    assert payload["certification"]["threshold"] == candidate.threshold
    assert payload["certification"]["labels_above"] == candidate.evidence["labels_above"]
    assert payload["certification"]["accuracy_low"] == candidate.evidence["accuracy_low"]
    assert payload["certification"]["candidate"] is True
    # The policy's window: the store's last 8 weeks.
    assert payload["certification"]["window"][-4:] == list(WEEKS)
    assert len(payload["certification"]["window"]) == 8
    assert "code_version" not in payload["certification"]  # the version is frozen once
    assert [(e.field, e.status) for e in current_policy(certified_store)] == [("total", "active")]


def test_non_candidates_and_other_thresholds_are_refused(
    certified_store: duckdb.DuckDBPyConnection,
) -> None:
    with pytest.raises(Refused, match=r"invoice/tax is not an automation candidate \("):
        approve(certified_store, "mona", "invoice", "tax", "please")
    with pytest.raises(Refused, match=r"certified at .* stratum; 0\.5 is below it"):
        approve(certified_store, "mona", "invoice", "total", "x", threshold=0.5)
    with pytest.raises(PermissionDenied, match=r"alice \(role reviewer\) may not approve"):
        approve(certified_store, "alice", "invoice", "total", "x")
    with pytest.raises(Refused, match=r"no extractions of doc_type 'invoice', field 'iban'"):
        approve(certified_store, "mona", "invoice", "iban", "x")
    assert current_policy(certified_store) == []


def test_approval_certifies_the_whole_stratum_whatever_a_caller_looked_at(
    certified_store: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    # A new form version, 200 extractions above the threshold with five queue labels
    # (non-random: no evidence of their own). A report filtered to v1 certifies
    # total; the whole stratum certifies too, but only for v1: v2 is material and
    # has no design-based labels, so the candidacy leaves it to humans.
    start, _ = Week(WEEKS[-1]).bounds()
    builder.extractions([{"extraction_id": f"v2-{i}", "field": "total", "form_version": "v2",
                          "confidence": 0.99, "extracted_at": start} for i in range(200)])
    builder.labels([{"extraction_id": f"v2-{i}", "reviewer": "alice", "review_round": "import",
                     "verdict": "correct"} for i in range(5)])
    from fieldtrust.calibration.candidates import automation_candidates
    from fieldtrust.store.scope import Scope

    filtered = automation_candidates(certified_store, Scope(form_versions=("v1",)))
    assert [a.field for a in filtered if a.candidate] == ["total"]  # what a v1 page shows
    whole = certify(certified_store, "invoice", "total")
    checked = {v.form_version: v for v in whole.form_versions}
    assert checked["v2"].material and not checked["v2"].covered
    assert checked["v2"].labels_above == 0  # the queue labels are not evidence
    assert [v for v, check in checked.items() if check.covered] == ["v1"]


def test_reject_and_revoke_freeze_what_the_store_says_now(
    certified_store: duckdb.DuckDBPyConnection,
) -> None:
    rejected = reject(certified_store, "mona", "invoice", "tax", "a third wrong")
    frozen = evidence_payload(certified_store, rejected.evidence_id or "")
    assert frozen["certification"] == certify(
        certified_store, "invoice", "tax").to_dict()
    assert frozen["certification"]["candidate"] is False
    assert rejected.threshold is None
    approve(certified_store, "mona", "invoice", "total", "ok")
    revoked = revoke(certified_store, "mona", "invoice", "total", "policy change")
    frozen = evidence_payload(certified_store, revoked.evidence_id or "")
    # No audit since the approval flags it: the evidence says so, with every design.
    assert (frozen["certification"], frozen["revocation"]) == (None, None)
    assert [e.status for e in current_policy(certified_store)] == ["none", "none"]
