"""History is append-only: no library call changes or removes a label, a decision or evidence.

Three kinds of check: the library's public API offers nothing that updates or
deletes history, and its source holds no such SQL; every public writer, run
against a populated store, leaves every earlier history row byte-identical;
and what happens on a direct attempt from outside the library (a read-only
connection refuses it; altered evidence is detected when read back; a direct
UPDATE, DELETE or INSERT on a read-write file is named by the history chain's
check, tests/store/test_chain.py). Every writer also keeps that chain valid.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from decided import approve_as_stated, certification
from fieldtrust.governance import acts
from fieldtrust.governance.acts import _record as record_decision
from fieldtrust.governance.decisions import decision_history
from fieldtrust.governance.evidence import (
    canonical_json,
    evidence_id_of,
    evidence_json,
    evidence_payload,
)
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.assignment import next_items, skip
from fieldtrust.labels.export import export_labels
from fieldtrust.labels.verdicts import label_history, record_verdict, supersede
from fieldtrust.store.access import grant_role, revoke_role
from fieldtrust.store.chain import CHAINED, chain_head
from fieldtrust.store.verify import verify_history
from rel_store import ADMIN, MANAGER, QA_LEAD, rows_of

from fieldtrust import labels, store
from fieldtrust.errors import FieldtrustError, Refused
from tests.conftest import table_fingerprint

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ("store", "labels", "sampling", "calibration", "extraction", "fieldtrust", "dashboard")
#: Tables that hold history: rows are added, never changed or removed.
HISTORY = ("labels", "decisions", "evidence_snapshots", "user_roles", "label_imports",
           "ingest_batches", "audit_samples", "extraction_log", "skips", "history_chain")
_MUTATING_NAME = re.compile(r"(^|_)(update|delete|edit|remove|drop|purge|erase|overwrite|"
                            r"replace|modify|amend|rewrite)(_|$)")
_MUTATING_SQL = re.compile(
    r"\b(UPDATE\s+\"?(?P<u>\w+)|DELETE\s+FROM\s+\"?(?P<d>\w+)|TRUNCATE\s+(TABLE\s+)?\"?(?P<t>\w+)"
    r"|DROP\s+TABLE\s+(IF\s+EXISTS\s+)?\"?(?P<dr>\w+)|INSERT\s+OR\s+REPLACE\s+INTO\s+\"?(?P<r>\w+))",
    re.IGNORECASE,
)


def _labels_modules() -> list[Any]:
    return [
        importlib.import_module(f"fieldtrust.labels.{info.name}")
        for info in pkgutil.iter_modules(labels.__path__)
    ]


def test_the_labels_api_has_no_function_that_edits_or_deletes() -> None:
    public = [
        f"{module.__name__}.{name}"
        for module in _labels_modules()
        for name, obj in vars(module).items()
        if not name.startswith("_") and callable(obj)
        and getattr(obj, "__module__", "") == module.__name__
    ]
    assert len(public) > 30  # the scan saw the package
    offending = [name for name in public if _MUTATING_NAME.search(name.rsplit(".", 1)[1].lower())]
    assert offending == []


def test_no_library_source_updates_or_deletes_history_rows() -> None:
    """A static scan of every library module: no UPDATE / DELETE / DROP of a history table."""
    offending = []
    scanned = 0
    for package in LIBRARY:
        for path in sorted((ROOT / package).rglob("*.py")):
            scanned += 1
            text = path.read_text(encoding="utf-8")
            for match in _MUTATING_SQL.finditer(text):
                table = next(v for k, v in match.groupdict().items() if v)
                if table.lower() in HISTORY:
                    offending.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert scanned > 50
    assert offending == []


def test_the_scan_would_catch_an_update() -> None:
    assert _MUTATING_SQL.search('con.execute("UPDATE labels SET verdict = ?")')
    assert _MUTATING_SQL.search("DELETE FROM decisions WHERE 1")
    assert _MUTATING_NAME.search("delete_label")


# --- every writer, run: earlier rows stay byte-identical ---------------------------------------


def _record(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    item = next_items(con, "ben", sample_id, count=1)[0]
    return record_verdict(con, actor="ben", extraction_id=item.extraction_id, verdict="correct")


def _live_primary_of_ana(con: duckdb.DuckDBPyConnection) -> list[str]:
    """ana's primary labels that nothing supersedes, by label id."""
    return [label_id for (label_id,) in con.execute(
        "SELECT label_id FROM labels l WHERE reviewer = 'ana' AND review_round = 'primary'"
        " AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)"
        " ORDER BY label_id"
    ).fetchall()]


def _supersede_own(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    # Not the adjudicated item: an adjudication settles it, its reviewers' labels with it.
    settled = {label_id for (label_id,) in con.execute(
        "SELECT l.label_id FROM labels l JOIN labels a USING (extraction_id)"
        " WHERE a.review_round = 'adjudication'").fetchall()}
    live = next(label for label in _live_primary_of_ana(con) if label not in settled)
    return supersede(con, actor="ana", label_id=live, verdict="correct")


def _supersede_as_lead(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    live = _live_primary_of_ana(con)[-1]
    return supersede(con, actor=QA_LEAD, label_id=live, verdict="unclear")


def _adjudicate_again(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    extraction = con.execute(
        "SELECT extraction_id FROM labels WHERE review_round = 'adjudication' LIMIT 1"
    ).fetchall()[0][0]
    return adjudicate(con, QA_LEAD, extraction, "incorrect", corrected_status="null",
                      error_type="value_not_in_document")


def _skip(con: duckdb.DuckDBPyConnection, sample_id: str) -> None:
    item = next_items(con, "chloe", sample_id, count=1)[0]
    skip(con, "chloe", sample_id, item.extraction_id, "scan unreadable")


def _grant(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    return grant_role(con, ADMIN, "ben", "qa_lead")


def _revoke_role(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    return grant_role(con, ADMIN, "chloe", "none")


def _approve(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    return approve_as_stated(con, MANAGER, "receipt", "total", 0.97, "ok")


def _revoke(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    return acts.revoke(con, MANAGER, "invoice", "total", "audit failed")


def _approve_again(con: duckdb.DuckDBPyConnection, sample_id: str) -> object:
    # Same stratum, new threshold: a new row, the old approval stays as it was.
    return approve_as_stated(con, ADMIN, "invoice", "total", 0.95, "stricter")


def _import(con: duckdb.DuckDBPyConnection, sample_id: str, tmp_path: Path) -> object:
    from fieldtrust.labels.label_import import import_labels

    path = tmp_path / "more labels.csv"
    path.write_text("extraction_id,verdict,reviewer,labeled_at\n"
                    "x000001,correct,rev8,2026-11-30T10:00:00Z\n", encoding="utf-8")
    return import_labels(con, path, actor=QA_LEAD)


def _export(con: duckdb.DuckDBPyConnection, sample_id: str, tmp_path: Path) -> object:
    return export_labels(con, tmp_path / "labels.csv")


WRITERS: dict[str, Callable[..., object]] = {
    "record_verdict": _record,
    "supersede_own": _supersede_own,
    "supersede_as_qa_lead": _supersede_as_lead,
    "adjudicate_again": _adjudicate_again,
    "skip": _skip,
    "grant_role": _grant,
    "revoke_role": _revoke_role,
    "decide_approve": _approve,
    "decide_revoke": _revoke,
    "decide_approve_again": _approve_again,
    "import_labels": _import,
    "export_labels": _export,
}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_only_appends_to_history(
    pcon: duckdb.DuckDBPyConnection, sample_id: str, tmp_path: Path, writer: str
) -> None:
    before = {table: rows_of(pcon, table) for table in HISTORY}
    function = WRITERS[writer]
    params = inspect.signature(function).parameters
    function(pcon, sample_id, *([tmp_path] if "tmp_path" in params else []))
    after = {table: rows_of(pcon, table) for table in HISTORY}
    for table in HISTORY:
        lost = before[table] - after[table]
        assert not lost, f"{writer} changed or removed {len(lost)} row(s) of {table}: {lost}"
    grew = {t for t in HISTORY if len(after[t]) > len(before[t])}
    if writer != "export_labels":
        assert grew, f"{writer} wrote nothing the test could see"


@pytest.mark.parametrize("writer", list(WRITERS))
def test_every_writer_keeps_the_history_chain_valid(
    pcon: duckdb.DuckDBPyConnection, sample_id: str, tmp_path: Path, writer: str
) -> None:
    """Each writer chains exactly the history rows it adds (store.chain, store.verify)."""
    assert verify_history(pcon).intact
    before = {table: len(rows_of(pcon, table)) for table in CHAINED}
    head = chain_head(pcon)
    function = WRITERS[writer]
    params = inspect.signature(function).parameters
    function(pcon, sample_id, *([tmp_path] if "tmp_path" in params else []))
    check = verify_history(pcon)
    assert check.intact, check.summary()
    added = sum(len(rows_of(pcon, table)) - before[table] for table in CHAINED)
    assert check.head.seq - head.seq == added
    assert (added == 0) == (writer == "export_labels")


def test_a_correction_is_a_new_row_and_the_old_one_reads_back(pcon: duckdb.DuckDBPyConnection,
                                                              sample_id: str) -> None:
    item = next_items(pcon, "ben", sample_id, count=1)[0]
    first = record_verdict(pcon, actor="ben", extraction_id=item.extraction_id,
                           verdict="incorrect", corrected_value="=1+1",
                           error_type="misread_characters")
    second = supersede(pcon, actor="ben", label_id=first.label_id, verdict="correct")
    history = [h for h in label_history(pcon, item.extraction_id) if h.reviewer == "ben"]
    assert [h.label_id for h in history] == [first.label_id, second.label_id]
    assert history[0] == first  # the superseded row, exactly as written
    assert history[1].supersedes == first.label_id


@pytest.mark.parametrize(
    "attempt",
    [
        lambda con: record_verdict(con, actor="maya", extraction_id="x000001", verdict="correct"),
        lambda con: supersede(con, actor="ben", label_id="no-such-label", verdict="correct"),
        lambda con: acts.approve(con, "ana", "invoice", "total", "x", threshold=0.9),
        lambda con: approve_as_stated(con, MANAGER, "invoice", "total", 0.8, "x",
                                      certified=0.9),
        lambda con: grant_role(con, "ana", "ana", "admin"),
        lambda con: revoke_role(con, ADMIN, ADMIN, "admin"),  # the last admin
    ],
    ids=["label-as-manager", "supersede-missing", "approve-as-reviewer", "approve-off-evidence",
         "self-promotion", "demote-last-admin"],
)
def test_refused_writes_leave_the_store_byte_identical(
    pcon: duckdb.DuckDBPyConnection, attempt: Callable[[duckdb.DuckDBPyConnection], object]
) -> None:
    before = table_fingerprint(pcon)
    with pytest.raises(FieldtrustError):
        attempt(pcon)
    assert table_fingerprint(pcon) == before


# --- direct attempts and evidence ----------------------------------------------------------------


@pytest.mark.parametrize(
    "statement",
    [
        "UPDATE labels SET verdict = 'correct'",
        "DELETE FROM labels",
        "UPDATE decisions SET threshold = 0.5",
        "DELETE FROM decisions",
        "UPDATE evidence_snapshots SET payload_json = '{}'",
        "DROP TABLE labels",
    ],
)
def test_a_read_only_connection_refuses_direct_changes(populated: Path, statement: str) -> None:
    con = store.connect(populated, read_only=True)
    try:
        before = table_fingerprint(con)
        with pytest.raises(duckdb.Error, match="read-only"):
            con.execute(statement)
        assert table_fingerprint(con) == before
    finally:
        con.close()


def test_evidence_reads_back_byte_identical_after_later_writes(
    pcon: duckdb.DuckDBPyConnection, sample_id: str
) -> None:
    evidence = certification(0.97, accuracy=0.981, accuracy_low=0.962, weeks=("2026-W48",),
                             method="Ünïcødé ' \"; DROP TABLE decisions; --")
    decision = record_decision(pcon, MANAGER, "approve", "receipt", "total", 0.97, "frozen",
                               certification=evidence)
    assert decision.evidence_id is not None
    frozen = evidence_json(pcon, decision.evidence_id)
    # More history on top: another decision, labels, a grant.
    _record(pcon, sample_id)
    _revoke(pcon, sample_id)
    grant_role(pcon, ADMIN, "ben", "qa_lead")
    assert evidence_json(pcon, decision.evidence_id) == frozen
    assert evidence_id_of(frozen) == decision.evidence_id
    payload = evidence_payload(pcon, decision.evidence_id)
    assert payload["certification"] == evidence.to_dict()
    assert canonical_json(payload) == frozen
    assert decision_history(pcon, "receipt", "total")[-1] == decision


def test_a_direct_edit_of_evidence_is_detected_when_read(pcon: duckdb.DuckDBPyConnection) -> None:
    (evidence_id, text), *_ = pcon.execute(
        "SELECT evidence_id, payload_json FROM evidence_snapshots ORDER BY evidence_id"
    ).fetchall()
    payload = json.loads(text)
    payload["code_version"] = "0.0.0"
    pcon.execute("UPDATE evidence_snapshots SET payload_json = ? WHERE evidence_id = ?",
                 [canonical_json(payload), evidence_id])
    with pytest.raises(Refused, match="does not hash to its id: the store was altered"):
        evidence_payload(pcon, evidence_id)
