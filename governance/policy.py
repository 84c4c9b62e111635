"""The policy file production pipelines read: approved thresholds as JSON.

Only strata whose current decision is an approval appear. A pipeline
automates an extraction of (doc_type, field) when its stated confidence is
at or above ``threshold`` and its (form version, extractor version) is one
of the approval's ``segments`` (the segments its certification covers, each
on its own labels) whose status is not ``suspended``, and sends everything
else to a human: any other segment has no evidence of its own, and a
suspended one was flagged by its monitoring chart.
"""

from __future__ import annotations

import json
from typing import Any

import duckdb
from fieldtrust.governance.decisions import current_policy
from fieldtrust.governance.monitoring import (
    SegmentMonitor,
    covered_form_versions,
    monitor_approvals,
)
from fieldtrust.store.chain import chain_head
from fieldtrust.store.connection import utc_now
from fieldtrust.store.provenance import code_version, schema_version

#: Bumped when the layout of the exported file changes.
POLICY_FORMAT = 3


def export_policy(
    con: duckdb.DuckDBPyConnection, *, monitors: list[SegmentMonitor] | None = None
) -> dict[str, Any]:
    """The current approved thresholds, ready for ``json.dump``.

    Keys: ``format``, ``generated_at`` (UTC, ISO), ``schema_version`` (the
    store's newest migration), ``fieldtrust_version``, ``history_head`` and
    ``thresholds``: one object per approved stratum with doc_type, field,
    threshold, form_versions (the versions covered; every other version goes
    to a human), extractor_versions (the extractor versions covered, ``*``
    for every one where the approval predates them), segments (each covered
    form version x extractor version with its ``status``: ``automated``,
    ``suspended`` by its monitoring chart until a person decides, or ``not
    monitored``, and the reason), approved_by, approved_at, evidence_id and
    decision_id, sorted by stratum. Production automates an extraction only
    when its (form_version, extractor_version) is a segment whose status is
    not ``suspended``.

    ``monitors``: the charts of :func:`fieldtrust.governance.monitoring.monitor_approvals`
    when the caller has them (default: charted now).

    ``history_head`` is the head of the history chain (:mod:`fieldtrust.store.chain`):
    ``{"seq": N, "hash": "..."}``, or None for a store that has no chain yet.
    A copy of the file kept outside the store proves the history up to that
    point: ``fieldtrust verify --policy FILE`` checks the store still holds it.
    """
    charted = monitor_approvals(con) if monitors is None else monitors
    by_decision: dict[str, list[SegmentMonitor]] = {}
    for m in charted:
        by_decision.setdefault(m.decision_id, []).append(m)
    thresholds = []
    for entry in current_policy(con):
        if entry.status != "active":
            continue
        segments = by_decision.get(entry.decision.decision_id, [])
        thresholds.append({
            "doc_type": entry.doc_type,
            "field": entry.field,
            "threshold": entry.threshold,
            "form_versions": covered_form_versions(con, entry.decision.evidence_id),
            "extractor_versions": sorted({m.extractor_version for m in segments}),
            "segments": [
                {"form_version": m.form_version, "extractor_version": m.extractor_version,
                 "status": m.status, "reason": m.reason}
                for m in segments
            ],
            "approved_by": entry.decision.decided_by,
            "approved_at": entry.decision.decided_at.isoformat(),
            "evidence_id": entry.decision.evidence_id,
            "decision_id": entry.decision.decision_id,
        })
    return {
        "history_head": _history_head(con),
        "format": POLICY_FORMAT,
        "generated_at": utc_now().isoformat(timespec="seconds") + "Z",
        "schema_version": schema_version(con),
        "fieldtrust_version": code_version(),
        "thresholds": thresholds,
    }


def _history_head(con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    try:
        head = chain_head(con)
    except duckdb.CatalogException:  # opened read-only before the chain's migration ran
        return None
    return {"seq": head.seq, "hash": head.row_hash}


def policy_json(policy: dict[str, Any]) -> str:
    """The policy as indented JSON text with sorted keys (stable diffs between exports)."""
    return json.dumps(policy, indent=2, sort_keys=True) + "\n"
