"""The policy file production pipelines read: approved thresholds as JSON, signed.

Only strata whose current decision is an approval appear. A pipeline
automates an extraction of (doc_type, field) when its stated confidence is
at or above ``threshold`` and its (form version, extractor version) is one
of the approval's ``segments`` (the segments its certification covers, each
on its own labels) that ``monitoring`` does not list as ``suspended``, and
sends everything else to a human: any other segment has no evidence of its
own, and a suspended one was flagged by its monitoring chart.

A policy is exported only from a store whose history verifies, signatures
included (:func:`fieldtrust.store.verify.verify_history`): a decision written
with SQL or a script, without the signing key, stops the export. The file is
signed with that key (``signature``), so production checks it with the public
key alone (:func:`read_policy_file`), and ``fieldtrust verify --policy FILE``
checks its whole content against the store (:func:`policy_file_problems`),
not only the history head it names.

The thresholds (segments included) are the decisions and their frozen
evidence as they stood at the file's history head, which verify rebuilds and
compares key by key. Each segment's monitoring status is kept apart, in
``monitoring``: it is a reading of the charts on the day of export (labels
that arrived since the approval, and resumptions), which the history head
does not fix, so verify cannot rebuild it; the signature still covers it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import duckdb
from fieldtrust.governance.decisions import current_policy
from fieldtrust.governance.evidence import evidence_payload
from fieldtrust.governance.monitoring import (
    SegmentMonitor,
    covered_form_versions,
    covered_segments,
    monitor_approvals,
)
from fieldtrust.store.chain import ChainHead
from fieldtrust.store.connection import utc_now
from fieldtrust.store.files import OutputKind, file_head, read_capped, store_files, write_output
from fieldtrust.store.provenance import code_version, schema_version
from fieldtrust.store.signing import (
    TrustedKeys,
    current_signer,
    policy_signature_problem,
    sign_policy,
    trusted_keys,
)
from fieldtrust.store.verify import verify_history

from fieldtrust.errors import InputError, Refused, SigningError

#: Bumped when the layout of the exported file changes (3: signed, exported
#: from a verified store; 4: each threshold lists its segments, and
#: ``monitoring`` gives each segment's status).
POLICY_FORMAT = 4
#: Largest policy file read back (one stratum is a few hundred bytes).
MAX_POLICY_BYTES = 16 * 1024 * 1024
#: The keys of one threshold, as the file holds them.
THRESHOLD_KEYS = ("doc_type", "field", "threshold", "comparison", "form_versions",
                  "extractor_versions", "segments", "target", "confidence", "approved_by",
                  "approved_at", "evidence_id", "decision_id")

#: How a pipeline compares an extraction's stated confidence with the threshold.
COMPARISON = ">="

#: What the file means, in one sentence at its top: read by people, not pipelines.
RULE = (
    "Automate an extraction of doc_type/field when its stated confidence is >= threshold"
    " and its (form version, extractor version) is one of segments, unless monitoring"
    " lists that segment as suspended; send every other extraction to a human. Above the"
    " threshold, accuracy was certified to be at least target with the stated confidence"
    " (1 - delta) on the evidence named."
)


def export_policy(
    con: duckdb.DuckDBPyConnection, *, trusted: TrustedKeys | None = None,
    monitors: list[SegmentMonitor] | None = None,
) -> dict[str, Any]:
    """The current approved thresholds, signed, ready for ``json.dump``.

    Keys: ``format``, ``generated_at`` (UTC, ISO), ``schema_version`` (the
    store's newest migration), ``fieldtrust_version``, ``history_head``,
    ``rule``, ``thresholds``, ``monitoring`` and ``signature``. ``thresholds``
    holds one object per approved stratum with doc_type, field, threshold,
    comparison (``">="``: a stated confidence at or above the threshold is
    automated), form_versions (the versions covered; every other version goes
    to a human), extractor_versions (the extractor versions covered, ``*`` for
    every one where the approval predates them), segments (each covered form
    version x extractor version), target and confidence (what the certificate
    states: accuracy above the threshold at least ``target``, with confidence
    ``confidence``), approved_by, approved_at, evidence_id and decision_id,
    sorted by stratum: the policy as it stood at ``history_head`` (``{"seq":
    N, "hash": "..."}``, the head of the history chain,
    :mod:`fieldtrust.store.chain`); ``rule`` is that sentence for people
    reading the file. A copy of the file kept outside the store proves the
    history up to that point: ``fieldtrust verify --policy FILE`` checks the
    store still holds it.

    ``monitoring`` lists every covered segment with doc_type, field,
    decision_id, form_version, extractor_version and its ``status``:
    ``automated``, ``suspended`` by its monitoring chart until a person
    decides, or ``not monitored``, and the reason. Production automates an
    extraction only when its segment is listed and not ``suspended``.
    ``monitors``: the charts of :func:`fieldtrust.governance.monitoring.monitor_approvals`
    when the caller has them (default: charted now).

    ``signature`` is ``{"algorithm": "ed25519", "key_id", "value"}`` over
    every other key (:func:`fieldtrust.store.signing.policy_message`).

    Raises
    ------
    Refused
        The store's history does not verify (a row changed, or a decision not
        signed by a trusted key): nothing is exported.
    SigningError
        No signing key is configured.
    """
    signer = current_signer()  # before the check's cost: without a key there is no file
    check = verify_history(con, trusted=trusted)
    if not check.intact:
        raise Refused(f"the policy is not exported: {check.summary()}")
    charted = monitor_approvals(con) if monitors is None else monitors
    payload = {
        "rule": RULE,
        "history_head": {"seq": check.head.seq, "hash": check.head.row_hash},
        "monitoring": [_monitoring_entry(m) for m in charted],
        "format": POLICY_FORMAT,
        "generated_at": utc_now().isoformat(timespec="seconds") + "Z",
        "schema_version": schema_version(con),
        "fieldtrust_version": code_version(),
        "thresholds": policy_thresholds(con, check.head.seq),
    }
    return sign_policy(payload, signer)


def policy_thresholds(con: duckdb.DuckDBPyConnection, up_to_seq: int) -> list[dict[str, Any]]:
    """The approved thresholds as they stood at history chain entry ``up_to_seq``."""
    thresholds = []
    for entry in current_policy(con, up_to_seq=up_to_seq):
        if entry.status != "active":
            continue
        certification = _certification(con, entry.decision.evidence_id)
        segments = covered_segments(con, entry.decision.evidence_id)
        thresholds.append({
            "doc_type": entry.doc_type,
            "field": entry.field,
            "threshold": entry.threshold,
            "comparison": COMPARISON,
            "form_versions": covered_form_versions(con, entry.decision.evidence_id),
            "extractor_versions": sorted({extractor for _, extractor in segments}),
            "segments": [{"form_version": form, "extractor_version": extractor}
                         for form, extractor in segments],
            "target": certification.get("target"),
            "confidence": certification.get("confidence"),
            "approved_by": entry.decision.decided_by,
            "approved_at": entry.decision.decided_at.isoformat(),
            "evidence_id": entry.decision.evidence_id,
            "decision_id": entry.decision.decision_id,
        })
    return thresholds


def _certification(con: duckdb.DuckDBPyConnection, evidence_id: str | None) -> dict[str, Any]:
    """The certification an approval's evidence froze (empty when it has none)."""
    if evidence_id is None:
        return {}
    return evidence_payload(con, evidence_id).get("certification") or {}


def _monitoring_entry(monitor: SegmentMonitor) -> dict[str, Any]:
    """One segment's status in the file, named by its stratum and approval."""
    return {"doc_type": monitor.doc_type, "field": monitor.field,
            "decision_id": monitor.decision_id, "form_version": monitor.form_version,
            "extractor_version": monitor.extractor_version, "status": monitor.status,
            "reason": monitor.reason}


def policy_json(policy: dict[str, Any]) -> str:
    """The policy as indented JSON text with sorted keys (stable diffs between exports)."""
    return json.dumps(policy, indent=2, sort_keys=True) + "\n"


def _is_policy_file(path: Path) -> bool:
    """Whether ``path`` starts as a policy export does (a JSON object naming its keys)."""
    head = file_head(path)
    return head.lstrip().startswith(b"{") and b'"fieldtrust_version"' in head \
        and b'"thresholds"' in file_head(path, 1 << 20)


#: A policy export, as :func:`write_policy` writes it.
POLICY_FILE = OutputKind("policy file", _is_policy_file)


def write_policy(
    con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], *, force: bool = False
) -> Path:
    """Write :func:`export_policy` to ``path`` (``store.files.write_output``); the file.

    Raises
    ------
    InputError
        ``path`` is a store, its log, a folder or a device, or a file that is
        not a policy export (unless ``force``), or cannot be written.
    """
    return write_output(path, policy_json(export_policy(con)), POLICY_FILE, force=force,
                        protect=store_files(con))


# --- reading a policy file back ----------------------------------------------------------------


def load_policy_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The JSON object in the policy file ``path``, read with a size cap; not yet checked.

    Raises
    ------
    InputError
        The file cannot be read, is over :data:`MAX_POLICY_BYTES`, or is not a JSON object.
    """
    data = read_capped(path, what="policy file", limit=MAX_POLICY_BYTES)
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise InputError(f"policy file {path}: not JSON text ({str(exc)[:80]})") from exc
    if not isinstance(payload, dict):
        raise InputError(f"policy file {path}: not a policy (a JSON object) fieldtrust exported")
    return payload


def read_policy_file(
    path: str | os.PathLike[str], *, trusted: TrustedKeys | None = None
) -> dict[str, Any]:
    """The policy in ``path``, once its signature holds: what a production pipeline reads.

    Needs no store, only the public key (``trusted``, default
    :func:`fieldtrust.store.signing.trusted_keys`).

    Raises
    ------
    InputError
        The file is not a policy file.
    SigningError
        It is not signed, or not by a trusted key, or was changed after signing.
    """
    payload = load_policy_file(path)
    problem = policy_signature_problem(payload, trusted_keys() if trusted is None else trusted)
    if problem is not None:
        raise SigningError(f"policy file {path} {problem}; do not automate on it")
    return payload


def policy_head(payload: dict[str, Any]) -> ChainHead | None:
    """The ``history_head`` a policy file names, or None when it names none usable."""
    head = payload.get("history_head")
    if not isinstance(head, dict) or not isinstance(head.get("hash"), str):
        return None
    seq = head.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        return None
    return ChainHead(seq, head["hash"])


def policy_file_problems(
    con: duckdb.DuckDBPyConnection, payload: dict[str, Any], *,
    trusted: TrustedKeys | None = None,
) -> list[str]:
    """What in a policy file does not hold: its signature, and every threshold against the
    store's decisions as they stood at the file's ``history_head`` (none: it matches).

    A lowered threshold, an added or dropped stratum, another form version or
    approver is named by stratum, with the file's and the store's value.
    """
    problems = []
    signature = policy_signature_problem(payload, trusted_keys() if trusted is None else trusted)
    if signature is not None:
        problems.append(f"the file {signature}")
    if payload.get("format") != POLICY_FORMAT:
        problems.append(f"the file is format {str(payload.get('format'))[:20]}, not"
                        f" {POLICY_FORMAT}: export it again with this fieldtrust")
        return problems
    head = policy_head(payload)
    if head is None:
        problems.append("the file names no usable history_head")
        return problems
    listed = payload.get("thresholds")
    if not isinstance(listed, list) or not all(isinstance(t, dict) for t in listed):
        problems.append("the file's thresholds are not a list of objects")
        return problems
    problems += _threshold_differences(listed, policy_thresholds(con, head.seq))
    return problems


def _threshold_differences(
    in_file: list[dict[str, Any]], in_store: list[dict[str, Any]]
) -> list[str]:
    def by_stratum(rows: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
        return {(str(r.get("doc_type")), str(r.get("field"))): r for r in rows}

    file_rows, store_rows = by_stratum(in_file), by_stratum(in_store)
    problems = []
    if len(file_rows) != len(in_file):
        problems.append("the file lists a stratum more than once")
    for stratum in sorted(file_rows.keys() | store_rows.keys()):
        name = "/".join(stratum)
        ours, theirs = store_rows.get(stratum), file_rows.get(stratum)
        if ours is None:
            problems.append(f"{name} is in the file but the store has no approval of it")
        elif theirs is None:
            problems.append(f"{name} is approved in the store but missing from the file")
        else:
            for key in THRESHOLD_KEYS:
                if not _same(theirs.get(key), ours[key]):
                    problems.append(f"{name}: {key} is {_shown(theirs.get(key))} in the file,"
                                    f" {_shown(ours[key])} in the store")
            extra = sorted(set(theirs) - set(THRESHOLD_KEYS))
            if extra:
                problems.append(f"{name}: the file adds {', '.join(map(str, extra))[:80]}")
    return problems


def _same(given: Any, stored: Any) -> bool:
    """Equal as JSON writes them: a float read back from the file is the float written."""
    return json.dumps(given, sort_keys=True) == json.dumps(stored, sort_keys=True)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True)
    return text if len(text) <= 60 else text[:57] + "..."
