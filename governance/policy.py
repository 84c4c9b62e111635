"""The policy file production pipelines read: approved thresholds as JSON.

Only strata whose current decision is an approval appear. A pipeline
automates an extraction of (doc_type, field) when its stated confidence is
at or above ``threshold`` and its form version is one of ``form_versions``
(the versions the approval's certification covers), and sends everything
else to a human: any other form version has no evidence of its own.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
from fieldtrust.governance.decisions import current_policy
from fieldtrust.governance.evidence import evidence_payload
from fieldtrust.store.chain import chain_head
from fieldtrust.store.connection import utc_now
from fieldtrust.store.provenance import code_version, schema_version

#: Bumped when the layout of the exported file changes (added keys leave it).
POLICY_FORMAT = 2

#: How a pipeline compares an extraction's stated confidence with the threshold.
COMPARISON = ">="

#: What the file means, in one sentence at its top: read by people, not pipelines.
RULE = (
    "Automate an extraction of doc_type/field when its stated confidence is >= threshold"
    " and its form version is one of form_versions; send every other extraction to a"
    " human. Above the threshold, accuracy was certified to be at least target with the"
    " stated confidence (1 - delta) on the evidence named."
)


def export_policy(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The current approved thresholds, ready for ``json.dump``.

    Keys: ``format``, ``generated_at`` (UTC, ISO), ``schema_version`` (the
    store's newest migration), ``fieldtrust_version``, ``history_head`` and
    ``thresholds``: one object per approved stratum with doc_type, field,
    threshold, comparison (``">="``: a stated confidence at or above the
    threshold is automated), form_versions (the versions covered; every other
    version goes to a human), target and confidence (what the certificate
    states: accuracy above the threshold at least ``target``, with confidence
    ``confidence``), approved_by, approved_at, evidence_id and decision_id,
    sorted by stratum; and ``rule``, that sentence for people reading the file.

    ``history_head`` is the head of the history chain (:mod:`fieldtrust.store.chain`):
    ``{"seq": N, "hash": "..."}``, or None for a store that has no chain yet.
    A copy of the file kept outside the store proves the history up to that
    point: ``fieldtrust verify --policy FILE`` checks the store still holds it.
    """
    thresholds = []
    for entry in current_policy(con):
        if entry.status != "active":
            continue
        certification = _certification(con, entry.decision.evidence_id)
        thresholds.append({
            "doc_type": entry.doc_type,
            "field": entry.field,
            "threshold": entry.threshold,
            "comparison": COMPARISON,
            "form_versions": _covered_versions(certification),
            "target": certification.get("target"),
            "confidence": certification.get("confidence"),
            "approved_by": entry.decision.decided_by,
            "approved_at": entry.decision.decided_at.isoformat(),
            "evidence_id": entry.decision.evidence_id,
            "decision_id": entry.decision.decision_id,
        })
    return {
        "rule": RULE,
        "history_head": _history_head(con),
        "format": POLICY_FORMAT,
        "generated_at": utc_now().isoformat(timespec="seconds") + "Z",
        "schema_version": schema_version(con),
        "fieldtrust_version": code_version(),
        "thresholds": thresholds,
    }


def _certification(con: duckdb.DuckDBPyConnection, evidence_id: str | None) -> dict[str, Any]:
    """The certification an approval's evidence froze (empty when it has none)."""
    if evidence_id is None:
        return {}
    return evidence_payload(con, evidence_id).get("certification") or {}


def _covered_versions(certification: dict[str, Any]) -> list[str]:
    """The form versions the approval's evidence covers; none known means none covered."""
    if "covered_versions" in certification:
        return [str(v) for v in certification["covered_versions"]]
    # Evidence frozen before approvals named their versions: the checks that covered.
    return [str(v["form_version"]) for v in certification.get("form_versions") or []
            if isinstance(v, dict) and v.get("covered")]


def _history_head(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    try:
        head = chain_head(con)
    except duckdb.CatalogException:  # opened read-only before the chain's migration ran
        return None
    return {"seq": head.seq, "hash": head.row_hash}


def policy_json(policy: dict[str, Any]) -> str:
    """The policy as indented JSON text with sorted keys (stable diffs between exports)."""
    return json.dumps(policy, indent=2, sort_keys=True) + "\n"
