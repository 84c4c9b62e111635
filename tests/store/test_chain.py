"""The history chain: writers keep it, verify names what was changed outside fieldtrust.

The populated store is a small demo (simulated reviewers' labels, role grants)
plus a decision with evidence, a skip and a labels import, so every chained
table has rows. Tampering is done the way an outsider would: plain SQL on a
read-write connection.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from decided import approve_as_stated
from fieldtrust.calibration.segments import SegmentCheck
from fieldtrust.governance import acts
from fieldtrust.governance.acts import reject, resume
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.governance.monitoring_plan import plan_monitoring
from fieldtrust.governance.policy import export_policy
from fieldtrust.labels.assignment import next_items, skip
from fieldtrust.labels.label_import import import_labels
from fieldtrust.labels.rekey import record_rekey
from fieldtrust.labels.verdicts import record_verdict
from fieldtrust.store.access import grant_role, revoke_role
from fieldtrust.store.chain import CHAINED, GENESIS, ChainHead, chain_existing_rows, chain_head
from fieldtrust.store.migrations import MIGRATIONS
from fieldtrust.store.verify import HistoryCheck, verify_history
from fieldtrust.store.weeks import Week

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.demo.build import build_demo
from fieldtrust.demo.profiles import MODEL_NAME  # the demo's one extractor version
from fieldtrust.errors import StoreError
from tests.conftest import copy_store

ROOT = Path(__file__).resolve().parents[2]
ADMIN, QA_LEAD, MANAGER = "root", "quinn", "maya"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo store with a row in every chained table, built once per module."""
    path = tmp_path_factory.mktemp("chain") / "template.duckdb"
    con = store.connect(path)
    try:
        build_demo(con, seed=7, rows=3_000)
        approve_as_stated(con, MANAGER, "invoice", "total", 1, "all right")
        # The demo labels every sampled item: add one more item to the newest sample
        # (audit_items is not history) so that ana has something to skip.
        sample_id, cell = con.execute("SELECT sample_id, cell FROM audit_items"
                                      " ORDER BY sample_id DESC LIMIT 1").fetchall()[0]
        con.execute("INSERT INTO audit_items SELECT ?, min(extraction_id), ?, 0.5, 0.5, false"
                    " FROM extractions e WHERE NOT EXISTS (SELECT 1 FROM audit_items i"
                    " WHERE i.extraction_id = e.extraction_id)", [sample_id, cell])
        [item] = next_items(con, "ana", sample_id, count=1)
        skip(con, "ana", sample_id, item.extraction_id, "scan unreadable")
        extraction = con.execute("SELECT min(extraction_id) FROM extractions WHERE extraction_id"
                                 " NOT IN (SELECT extraction_id FROM labels)").fetchall()[0][0]
        labels_file = path.with_name("offline.csv")
        labels_file.write_text(f"extraction_id,verdict,reviewer\n{extraction},correct,ana\n",
                               encoding="utf-8")
        grant_role(con, ADMIN, "temp-lead", "qa_lead")
        revoke_role(con, ADMIN, "temp-lead", "qa_lead")
        import_labels(con, labels_file, actor=QA_LEAD, random_sample=True)
        # A second look at that label (declared), and a seed judged: the two newer tables.
        again = path.with_name("again.csv")
        again.write_text(f"extraction_id,verdict,reviewer\n{extraction},unclear,ben\n",
                         encoding="utf-8")
        import_labels(con, again, actor=QA_LEAD, second_look="verdict_dependent")
        host = con.execute("SELECT min(extraction_id) FROM extractions WHERE value_status ="
                           " 'present' AND extraction_id NOT IN (SELECT extraction_id"
                           " FROM audit_items)").fetchall()[0][0]
        con.execute("INSERT INTO seed_items SELECT 'i-seed', ?, extraction_id, doc_type, field,"
                    " ?, value || '9', value, 'digit_swap', NULL, 0.5, confidence,"
                    " now()::TIMESTAMP"
                    " FROM extractions WHERE extraction_id = ?", [sample_id, cell, host])
        record_verdict(con, actor="ana", extraction_id="i-seed", verdict="correct")
        keyed = con.execute("SELECT min(extraction_id) FROM extractions WHERE extraction_id"
                            " NOT IN (SELECT extraction_id FROM labels)").fetchall()[0][0]
        record_rekey(con, actor="ana", extraction_id=keyed, typed_value="typed blind")
        _resumed_alarm(con)
        admin = con.execute("SELECT user_name FROM user_roles WHERE role = 'admin'"
                            " ORDER BY granted_at LIMIT 1").fetchall()[0][0]
        set_policy_settings(con, admin, n_min=150)
    finally:
        con.close()
    return path


def _resumed_alarm(con: duckdb.DuckDBPyConnection) -> None:
    """invoice/date approved in the demo's first week on a stated chart its labels alarm
    (form version v2 in control at 99.5%), then resumed by the manager: a row of
    monitoring_resumptions."""
    week = Week(con.execute("SELECT min(week) FROM audit_samples").fetchall()[0][0])
    check = SegmentCheck("v2", MODEL_NAME, 1_000, 1.0, 100, 0.995, 0.99, True)
    plan = plan_monitoring([check], [check.key], target=0.95, weeks=10)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(acts, "utc_now", lambda: week.start + dt.timedelta(hours=1))
        approve_as_stated(con, MANAGER, "invoice", "date", 0.0, "watched", monitoring=plan)
    resume(con, MANAGER, "invoice", "date", "v2", MODEL_NAME, "the alarm was reviewed")


@pytest.fixture
def path(template: Path, tmp_path: Path) -> Path:
    return copy_store(template, tmp_path / "store.duckdb")


@pytest.fixture
def db_path(path: Path) -> Path:
    """The shared ``con`` fixture opens this module's copy of the template."""
    return path


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> object:
    return con.execute(sql).fetchall()[0][0]


def _verify_cli(path: Path, *args: str) -> object:
    return CliRunner().invoke(cli, ["--db", str(path), "verify", *args])


# --- an intact store -----------------------------------------------------------------------


def test_a_populated_store_verifies_with_every_row_chained(
    con: duckdb.DuckDBPyConnection,
) -> None:
    check = verify_history(con)
    assert check.intact, check.summary()
    counts = {t: _one(con, f"SELECT count(*) FROM {t}") for t in CHAINED}
    assert check.rows == counts
    assert all(counts[t] > 0 for t in CHAINED), counts  # the fixture reaches every table
    assert check.head == chain_head(con)
    assert check.head.seq == sum(counts.values())


def test_verify_on_the_cli_prints_the_head_and_counts(path: Path) -> None:
    result = _verify_cli(path)
    assert result.exit_code == 0, result.output
    con = store.connect(path, read_only=True)
    head = chain_head(con)
    con.close()
    assert result.stdout.startswith(f"history intact: {head.seq:,} chained rows (")
    assert f"head {head.seq}:{head.row_hash}" in result.stdout
    as_json = json.loads(_verify_cli(path, "--json").stdout)
    assert as_json["intact"] is True
    assert as_json["head"] == {"seq": head.seq, "hash": head.row_hash}
    assert as_json["problems"] == []


def test_the_policy_export_carries_the_head(con: duckdb.DuckDBPyConnection) -> None:
    head = chain_head(con)
    assert export_policy(con)["history_head"] == {"seq": head.seq, "hash": head.row_hash}
    assert len(head.row_hash) == 64 and head.row_hash != GENESIS


# --- tampering from outside fieldtrust ---------------------------------------------------------

TAMPERING = {
    "label verdict": (
        "UPDATE labels SET verdict = 'correct', corrected_value = NULL, corrected_status = NULL,"
        " error_type = NULL, error_detail = NULL WHERE label_id = (SELECT min(label_id)"
        " FROM labels WHERE verdict = 'incorrect' AND review_round = 'primary')",
        "altered", "labels", "verdict was 'incorrect', now 'correct'",
    ),
    "decision comment": (
        "UPDATE decisions SET comment = 'approved after a full audit' WHERE field = 'total'",
        "altered", "decisions", "comment was 'all right', now 'approved after a full audit'",
    ),
    "self-promotion": (
        "UPDATE user_roles SET role = 'admin' WHERE user_name = 'ana'",
        "altered", "user_roles", "role was 'reviewer', now 'admin'",
    ),
    "evidence": (
        "UPDATE evidence_snapshots"
        " SET payload_json = replace(payload_json, '\"labels_above\":412', '\"labels_above\":800')"
        " WHERE payload_json LIKE '%\"field\":\"total\"%'",
        "altered", "evidence_snapshots", "payload_json was",
    ),
    "label deleted": (
        "DELETE FROM labels WHERE label_id = (SELECT max(label_id) FROM labels"
        " WHERE review_round = 'second')",
        "deleted", "labels", "was deleted",
    ),
    "skip deleted": ("DELETE FROM skips", "deleted", "skips", "was deleted"),
    "forged label": (
        "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round, labeled_at)"
        " SELECT 'forged-1', min(extraction_id), 'correct', 'ana', 'import',"
        " TIMESTAMP '2026-11-01 09:00:00' FROM extractions",
        "inserted", "labels", "'forged-1' was inserted without fieldtrust",
    ),
    "forged grant": (
        "INSERT INTO user_roles VALUES ('mallory', 'admin', 'root', TIMESTAMP '2026-11-01')",
        "inserted", "user_roles", "('mallory', '2026-11-01T00:00:00.000000') was inserted",
    ),
}


@pytest.mark.parametrize("case", list(TAMPERING))
def test_a_direct_change_is_named_by_verify(con: duckdb.DuckDBPyConnection, path: Path,
                                            case: str) -> None:
    statement, kind, table, fragment = TAMPERING[case]
    con.execute(statement)
    check = verify_history(con)
    assert not check.intact
    assert check.total_problems == 1, [p.describe() for p in check.problems]
    problem = check.problems[0]
    assert (problem.kind, problem.table) == (kind, table)
    assert fragment in problem.describe(), problem.describe()
    if kind != "inserted":
        assert problem.seq is not None and 1 <= problem.seq <= check.head.seq
    con.close()
    result = _verify_cli(path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: history altered outside fieldtrust: {table} row ")
    assert fragment.replace("\n", " ") in result.stderr
    as_json = _verify_cli(path, "--json")
    assert as_json.exit_code == 2
    report = json.loads(as_json.stdout)
    assert report["intact"] is False and report["problems"][0]["kind"] == kind


def test_the_first_problem_reported_is_the_earliest_in_the_chain(
    con: duckdb.DuckDBPyConnection,
) -> None:
    # The earliest and the latest chained label, by chain position (not by key text:
    # label ids are random, so their order says nothing about the chain's).
    first, last = con.execute(
        "SELECT arg_min(row_key, seq), arg_max(row_key, seq) FROM history_chain"
        " WHERE table_name = 'labels'"
    ).fetchall()[0]
    for key in (last, first):
        con.execute("UPDATE labels SET reviewer = 'someone else' WHERE label_id = ?",
                    [json.loads(key)[0]])
    check = verify_history(con)
    assert check.total_problems == 2
    seqs = [p.seq or 0 for p in check.problems]
    assert seqs == sorted(seqs)
    assert check.summary().startswith(
        f"history altered outside fieldtrust: labels row {json.loads(first)[0]!r}")
    assert "; 1 more problem." in check.summary()


def test_an_edited_chain_entry_is_detected(con: duckdb.DuckDBPyConnection) -> None:
    seq = _one(con, "SELECT min(seq) + 5 FROM history_chain")
    con.execute("UPDATE history_chain SET row_hash = repeat('0', 64) WHERE seq = ?", [seq])
    # The edited hash fails its own check and the next entry's link to it; nothing later.
    kinds = [(p.kind, p.seq) for p in verify_history(con).problems]
    assert kinds == [("chain_altered", seq), ("chain_altered", seq + 1)]


def test_an_edited_chained_row_copy_is_detected(con: duckdb.DuckDBPyConnection) -> None:
    seq = _one(con, "SELECT max(seq) FROM history_chain WHERE table_name = 'labels'")
    con.execute("UPDATE history_chain SET row_json = replace(row_json, '\"verdict\":',"
                " '\"verdict\": ') WHERE seq = ?", [seq])
    kinds = [(p.kind, p.seq) for p in verify_history(con).problems]
    assert kinds == [("chain_altered", seq)]


def test_a_removed_chain_entry_leaves_a_gap(con: duckdb.DuckDBPyConnection) -> None:
    seq = _one(con, "SELECT min(seq) + 7 FROM history_chain")
    con.execute("DELETE FROM history_chain WHERE seq = ?", [seq])
    check = verify_history(con)
    assert check.problems[0].kind == "chain_gap" and check.problems[0].seq == seq
    assert {p.kind for p in check.problems} == {"chain_gap", "chain_altered", "inserted"}


def test_a_rewritten_chain_is_caught_by_its_signatures_and_the_head_kept_outside(
    con: duckdb.DuckDBPyConnection, path: Path, tmp_path: Path
) -> None:
    kept = tmp_path / "policy.json"
    kept.write_text(json.dumps(export_policy(con)), encoding="utf-8")
    kept_head = chain_head(con)
    # Someone who knows how the chain is made edits a label and chains everything again.
    con.execute("UPDATE labels SET verdict = 'unclear' WHERE label_id = (SELECT min(label_id)"
                " FROM labels WHERE verdict = 'correct')")
    con.execute("DELETE FROM history_chain")
    chain_existing_rows(con)
    # The signed entries (decisions, policy settings) sign hashes the rewrite changed.
    alone = verify_history(con)
    assert alone.problems and {p.kind for p in alone.problems} <= {"bad_signature", "unsigned"}
    check = verify_history(con, expected_head=kept_head)
    assert "rewritten" in [p.kind for p in check.problems]
    con.close()
    result = _verify_cli(path, "--policy", str(kept))
    assert result.exit_code == 2
    assert "does not match the head kept outside the store" in result.stderr
    by_head = _verify_cli(path, "--head", f"{kept_head.seq}:{kept_head.row_hash}")
    assert by_head.exit_code == 2


def test_removing_the_newest_rows_with_their_entries_needs_the_kept_head(
    con: duckdb.DuckDBPyConnection,
) -> None:
    kept = chain_head(con)
    key = _one(con, "SELECT row_key FROM history_chain ORDER BY seq DESC LIMIT 1")
    table = _one(con, "SELECT table_name FROM history_chain ORDER BY seq DESC LIMIT 1")
    assert table == "policy_settings"  # the fixture's last write
    con.execute("DELETE FROM policy_settings WHERE setting_id = ?", [json.loads(str(key))[0]])
    con.execute("DELETE FROM history_chain WHERE seq = ?", [kept.seq])
    assert verify_history(con).intact
    check = verify_history(con, expected_head=kept)
    assert [(p.kind, p.key) for p in check.problems] == [("rewritten", f"seq {kept.seq}")]


def test_an_intact_store_matches_its_own_kept_head(con: duckdb.DuckDBPyConnection) -> None:
    kept = chain_head(con)
    record_verdict(con, actor="ana", extraction_id=_unlabelled(con), verdict="correct")
    check = verify_history(con, expected_head=kept)
    assert check.intact and check.head.seq == kept.seq + 1


@pytest.mark.parametrize("head", ["12", "12:abc", "x:" + "0" * 64])
def test_a_malformed_head_is_a_usage_error(path: Path, head: str) -> None:
    result = _verify_cli(path, "--head", head)
    assert result.exit_code == 2
    assert "is not SEQ:HASH" in result.output


# --- writers and concurrency ---------------------------------------------------------------


def _unlabelled(con: duckdb.DuckDBPyConnection, offset: int = 0) -> str:
    rows = con.execute(
        "SELECT extraction_id FROM extractions e WHERE NOT EXISTS"
        " (SELECT 1 FROM labels l WHERE l.extraction_id = e.extraction_id)"
        " ORDER BY extraction_id LIMIT 1 OFFSET ?", [offset]
    ).fetchall()
    return str(rows[0][0])


def test_an_int_threshold_is_chained_as_it_reads_back(con: duckdb.DuckDBPyConnection) -> None:
    """Rows are chained as stored (1.0), not as the caller passed them (1)."""
    row = json.loads(str(_one(con, "SELECT row_json FROM history_chain"
                                   " WHERE table_name = 'decisions'")))
    assert row["threshold"] == 1.0 and isinstance(row["threshold"], float)
    assert row["decided_at"].count(".") == 1  # microseconds always written


def test_the_same_evidence_twice_is_chained_once(con: duckdb.DuckDBPyConnection) -> None:
    for _ in range(2):
        reject(con, MANAGER, "invoice", "date", "not yet")
    assert _one(con, "SELECT count(*) FROM history_chain WHERE table_name ="
                     " 'evidence_snapshots'") == _one(con, "SELECT count(*) FROM"
                                                            " evidence_snapshots")
    assert verify_history(con).intact


def test_threads_labelling_at_once_keep_one_chain(path: Path) -> None:
    setup = store.connect(path)
    ids = [_unlabelled(setup, i) for i in range(24)]
    setup.close()
    errors: list[BaseException] = []
    start = threading.Barrier(3)

    def work(reviewer: str, items: list[str]) -> None:
        con = store.connect(path)
        try:
            start.wait()
            for extraction_id in items:
                record_verdict(con, actor=reviewer, extraction_id=extraction_id,
                               verdict="correct")
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            con.close()

    threads = [threading.Thread(target=work, args=(name, ids[i::3]))
               for i, name in enumerate(("ana", "ben", "chloe"))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    con = store.connect(path, read_only=True)
    try:
        check = verify_history(con)
        assert check.intact, check.summary()
        stored = con.execute(
            "SELECT count(*) FROM labels WHERE extraction_id IN (SELECT unnest(?))", [ids]
        ).fetchall()[0][0]
        assert stored == len(ids)
    finally:
        con.close()


_WRITER = textwrap.dedent("""
    import sys
    from fieldtrust import store
    from fieldtrust.labels.verdicts import record_verdict
    path, reviewer, *items = sys.argv[1:]
    for extraction_id in items:
        # Short-lived connections, like the dashboard: the file lock passes between processes.
        con = store.connect(path, lock_timeout=60)
        try:
            record_verdict(con, actor=reviewer, extraction_id=extraction_id, verdict="correct")
        finally:
            con.close()
    print("done", len(items))
""")


def test_two_processes_writing_at_once_keep_one_chain(path: Path) -> None:
    setup = store.connect(path)
    ids = [_unlabelled(setup, i) for i in range(16)]
    before = chain_head(setup)
    setup.close()
    processes = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), reviewer, *ids[i::2]],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for i, reviewer in enumerate(("ana", "ben"))
    ]
    for process in processes:
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, err[-2000:]
        assert out.strip() == "done 8"
    con = store.connect(path, read_only=True)
    try:
        check = verify_history(con)
        assert check.intact, check.summary()
        assert check.head.seq == before.seq + len(ids)
        writers = con.execute(
            "SELECT json_extract_string(row_json, '$.reviewer'), count(*) FROM history_chain"
            " WHERE seq > ? GROUP BY ALL ORDER BY 1", [before.seq]).fetchall()
        assert writers == [("ana", 8), ("ben", 8)]
    finally:
        con.close()


# --- the migration chains an existing store once -------------------------------------------


def _store_before_migrations(path: Path) -> duckdb.DuckDBPyConnection:
    """A plain connection to a new file holding only the (empty) table of applied migrations."""
    old = duckdb.connect(str(path))
    old.execute("CREATE TABLE schema_migrations (name VARCHAR PRIMARY KEY,"
                " applied_at TIMESTAMP NOT NULL)")
    return old


def test_the_migration_chains_existing_rows_in_insertion_order(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    old = _store_before_migrations(path)
    for migration in MIGRATIONS[: [m.name for m in MIGRATIONS].index("0013_store_history_chain")]:
        old.execute(migration.sql)
        old.execute("INSERT INTO schema_migrations VALUES (?, now()::TIMESTAMP)",
                    [migration.name])
    old.execute("INSERT INTO user_roles VALUES ('root', 'admin', 'root', '2026-01-05 09:00'),"
                " ('ana', 'reviewer', 'root', '2026-01-05 09:01')")
    old.execute("INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round,"
                " labeled_at) VALUES ('l2', 'x2', 'correct', 'ana', 'primary', '2026-01-06'),"
                " ('l1', 'x1', 'unclear', 'ana', 'primary', '2026-01-05 12:00')")
    old.execute("INSERT INTO skips VALUES ('s', 'x3', 'ana', 'blurred', '2026-01-05 12:00')")
    old.close()

    con = store.connect(path)
    try:
        order = con.execute("SELECT seq, table_name, row_key FROM history_chain ORDER BY seq"
                            ).fetchall()
        assert [(t, json.loads(k)[0]) for _, t, k in order] == [
            ("user_roles", "root"), ("user_roles", "ana"), ("labels", "l1"), ("skips", "s"),
            ("labels", "l2"),
        ]
        assert verify_history(con).intact
    finally:
        con.close()
    again = store.connect(path)  # reopening chains nothing twice
    try:
        assert _one(again, "SELECT count(*) FROM history_chain") == 5
    finally:
        again.close()


def test_a_store_opened_only_read_only_has_no_chain_yet(tmp_path: Path) -> None:
    path = tmp_path / "old.duckdb"
    _store_before_migrations(path).close()
    con = duckdb.connect(str(path), read_only=True)
    try:
        with pytest.raises(StoreError, match="has no history chain yet"):
            verify_history(con)
    finally:
        con.close()


def test_a_check_summarises_counts_when_intact() -> None:
    check = HistoryCheck(ChainHead(3, "ab" * 32), {"labels": 2, "decisions": 1})
    assert check.summary() == (
        "history intact: 3 chained rows (2 labels, 1 decisions); head 3:" + "ab" * 32
    )
