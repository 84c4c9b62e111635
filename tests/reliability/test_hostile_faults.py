"""The faults a hostile or unlucky user found (issue "trust under hostile conditions"), one by one.

Each test fails on the code before its fix. The numbers are the issue's:
1 demo --force, 2 absurd timestamps, 3 the dashboard without sign-in,
4 insert_label, 5 file names as globs, 6 the hash apart from the read,
7 future label times, 8 exports that do not import, 9 tracebacks, 10 read
commands writing to foreign files, 11 outbound lookups, 12 messages,
13 lookalike keys and float32 confidences.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from fieldtrust.ingest.extractions import ingest_files, ingest_table
from fieldtrust.ingest.rules import TimeWindow
from fieldtrust.labels.export import export_labels
from fieldtrust.labels.label_import import import_labels
from fieldtrust.labels.verdicts import insert_label, record_verdict, verdict_fields
from fieldtrust.store.access import bootstrap_admin, grant_role
from rel_store import ADMIN, QA_LEAD, extraction_rows

from fieldtrust import store
from fieldtrust.cli.main import cli
from fieldtrust.errors import (
    InputError,
    NotAStoreError,
    PermissionDenied,
    StoreError,
    StoreLockedError,
    ValidationError,
)
from tests.conftest import file_fingerprint, table_fingerprint
from tests.served import free_port, wait_healthy

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
HEADER = "extraction_id,doc_id,doc_type,field,confidence,extracted_at\n"


def _run(db: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner(env=env).invoke(cli, ["--db", str(db), *args])


def _csv(path: Path, *rows: str) -> Path:
    path.write_text(HEADER + "".join(r + "\n" for r in rows), encoding="utf-8")
    return path


def _holder(path: Path) -> subprocess.Popen[bytes]:
    """Another process holding ``path`` open read-write (DuckDB's lock), until killed."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time, duckdb; con = duckdb.connect(sys.argv[1]); print('held', flush=True);"
         " time.sleep(120)", str(path)],
        stdout=subprocess.PIPE,
    )
    assert holder.stdout is not None and holder.stdout.readline() == b"held\n"
    return holder


# --- 1. demo --force ---------------------------------------------------------------------------


def test_demo_force_refuses_a_real_store_and_changes_nothing(populated: Path) -> None:
    before, inode = file_fingerprint(populated), populated.stat().st_ino
    result = _run(populated, "demo", "--rows", "600", "--force", "--no-labels")
    assert result.exit_code == 2, result.output
    assert "is not a demo store (240 extractions without demo truth; 1 ingested files)" \
        in result.stderr
    assert populated.stat().st_ino == inode
    assert file_fingerprint(populated) == before


def test_demo_force_rebuilds_a_demo_store_in_place_and_waits_for_its_lock(tmp_path: Path) -> None:
    db = tmp_path / "demo.duckdb"
    assert _run(db, "demo", "--rows", "600", "--no-labels").exit_code == 0
    inode = db.stat().st_ino
    from fieldtrust.demo import build_demo_store

    holder = _holder(db)
    try:
        with pytest.raises(StoreLockedError):
            build_demo_store(db, rows=600, force=True, labelled=False, lock_timeout=0.5)
    finally:
        holder.kill()
        holder.wait()
    assert db.exists() and db.stat().st_ino == inode
    rebuilt = _run(db, "demo", "--rows", "900", "--seed", "3", "--force", "--no-labels")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert db.stat().st_ino == inode  # emptied in place, never unlinked
    con = store.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM extractions").fetchall() == [(900,)]
    finally:
        con.close()


# --- 2. timestamps outside a sane window -------------------------------------------------------


@pytest.mark.parametrize("stamp", ["9999-12-31T00:00:00Z", "0001-01-01T00:00:00Z",
                                   "1999-12-31T23:59:59Z"])
def test_absurd_extraction_times_are_refused_with_row_column_and_value(
    db_path: Path, tmp_path: Path, stamp: str
) -> None:
    path = _csv(tmp_path / "t.csv", "a,d,invoice,total,0.5,2026-11-24T10:00:00Z",
                f"b,d,invoice,total,0.5,{stamp}")
    result = _run(db_path, "ingest", str(path))
    assert result.exit_code == 2
    assert f"row 2, column extracted_at: '{stamp}' is outside the accepted times, 2000-01-01" \
        in result.stderr
    assert file_fingerprint(db_path)["extractions"][0] == 0


def test_a_typed_year_9999_parquet_time_is_refused_too(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = extraction_rows(3).to_pylist()
    rows[2]["extracted_at"] = dt.datetime(9999, 12, 31)
    path = tmp_path / "far.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    with pytest.raises(ValidationError, match="row 3, column extracted_at: '9999-12-31"):
        ingest_files(con, [path])


def test_the_window_is_a_setting(db_path: Path, tmp_path: Path) -> None:
    path = _csv(tmp_path / "old.csv", "a,d,invoice,total,0.5,1995-06-01T10:00:00Z")
    assert _run(db_path, "ingest", str(path)).exit_code == 2
    widened = _run(db_path, "ingest", str(path), env={"FIELDTRUST_EARLIEST_TIME": "1990-01-01"})
    assert widened.exit_code == 0, widened.stderr
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(days=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    ahead = _csv(tmp_path / "ahead.csv", f"b,d,invoice,total,0.5,{soon}")
    assert _run(db_path, "ingest", str(ahead)).exit_code == 2
    assert _run(db_path, "ingest", str(ahead), env={"FIELDTRUST_FUTURE_DAYS": "5"}).exit_code == 0


def test_a_local_time_in_a_daylight_saving_gap_is_refused(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = _csv(tmp_path / "gap.csv", "a,d,invoice,total,0.5,2026-03-29T01:30:00 Europe/Paris",
                "b,d,invoice,total,0.5,2026-03-29T02:30:00 Europe/Paris")
    with pytest.raises(ValidationError, match="row 2, column extracted_at: '2026-03-29T02:30:00"
                       " Europe/Paris' does not exist") as caught:
        ingest_files(con, [path])
    assert caught.value.total == 1


# --- 3. the dashboard without sign-in ----------------------------------------------------------


def _app(populated: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> Any:
    from streamlit.testing.v1 import AppTest

    monkeypatch.setattr(sys, "argv", [APP, "--db", str(populated), *argv])
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception
    return at


def test_without_auth_or_demo_the_dashboard_lets_nobody_in(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.dashboard import state

    at = _app(populated, monkeypatch)
    assert not at.selectbox  # no role picker, no filters
    assert next(e.value for e in at.error).startswith("Sign-in is not configured")
    at.session_state[state.AUTH_DEMO_USER] = ADMIN  # a forged pick changes nothing
    at.run()
    assert not at.selectbox
    assert state.AUTH_IDENTITY not in at.session_state


def test_serve_as_a_named_user_acts_as_them_without_a_picker(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.dashboard import state

    at = _app(populated, monkeypatch, "--as", QA_LEAD)
    assert not [s for s in at.selectbox if s.key == state.AUTH_DEMO_USER]
    identity = at.session_state[state.AUTH_IDENTITY]
    assert (identity.user, identity.role, identity.demo) == (QA_LEAD, "qa_lead", False)


def test_serve_refuses_demo_off_this_machine_and_unknown_local_users(populated: Path) -> None:
    shared = _run(populated, "serve", "--demo", "--address", "0.0.0.0")
    assert shared.exit_code == 2
    assert "--demo lets anyone act as any user" in shared.stderr
    stranger = _run(populated, "serve", "--as", "mallory")
    assert stranger.exit_code == 2
    assert "mallory holds no role" in stranger.stderr
    from fieldtrust.cli.serve_cmds import streamlit_command

    assert streamlit_command("s.duckdb", 1, user="quinn")[-4:] == ["--db", "s.duckdb", "--as",
                                                                   "quinn"]
    assert streamlit_command("s.duckdb", 1)[-3:] == ["--", "--db", "s.duckdb"]


# --- 4. insert_label ---------------------------------------------------------------------------


@pytest.mark.parametrize(("reviewer", "review_round", "error"), [
    ("mallory", "primary", PermissionDenied),  # no role at all
    ("maya", "primary", PermissionDenied),  # a manager does not label
    ("ana", "adjudication", PermissionDenied),  # a reviewer does not adjudicate
    ("ana", "import", InputError),  # imports go through labels import
])
def test_insert_label_holds_its_caller_to_the_roles(
    pcon: duckdb.DuckDBPyConnection, reviewer: str, review_round: str, error: type[Exception]
) -> None:
    before = table_fingerprint(pcon)
    fields = verdict_fields("correct", None, None, None, None)
    with pytest.raises(error), store.transaction(pcon):
        insert_label(pcon, "x000001", None, review_round, reviewer, fields, supersedes=None)
    assert table_fingerprint(pcon) == before


# --- 5, 6. literal names, the hash of the bytes read -------------------------------------------


def test_a_file_name_is_never_a_glob_pattern(con: duckdb.DuckDBPyConnection,
                                            tmp_path: Path) -> None:
    _csv(tmp_path / "wk1.csv", "from-wk1,d,invoice,total,0.5,2026-11-24T10:00:00Z")
    literal = _csv(tmp_path / "wk[1].csv", "from-brackets,d,invoice,total,0.5,2026-11-24T10:00:00Z")
    [result] = ingest_files(con, [literal])
    assert result.source == "wk[1].csv"
    assert con.execute("SELECT extraction_id FROM extractions").fetchall() == [("from-brackets",)]
    assert con.execute("SELECT source_sha256 FROM ingest_batches").fetchall() == [
        (hashlib.sha256(literal.read_bytes()).hexdigest(),)]


def test_a_pipe_is_read_once_and_stored_under_the_hash_of_what_came_through(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    content = (HEADER + "p1,d,invoice,total,0.5,2026-11-24T10:00:00Z\n").encode()
    fifo = tmp_path / "stream.csv"
    os.mkfifo(fifo)

    def feed() -> None:
        with fifo.open("wb") as handle:
            handle.write(content)

    writer = threading.Thread(target=feed)
    writer.start()
    [result] = ingest_files(con, [fifo])
    writer.join(timeout=10)
    assert result.rows_added == 1
    assert con.execute("SELECT source_sha256 FROM ingest_batches").fetchall() == [
        (hashlib.sha256(content).hexdigest(),)]


def test_a_file_deleted_before_it_is_read_is_an_error_line(db_path: Path, tmp_path: Path) -> None:
    with pytest.raises(ValidationError,
                       match=r"(?s)gone.csv: rejected.*cannot read the file: no such"):
        con = store.connect(db_path)
        try:
            ingest_files(con, [tmp_path / "gone.csv"])
        finally:
            con.close()


# --- 7, 8. label times, exports that import ----------------------------------------------------


def test_label_times_in_the_future_are_refused(
    pcon: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    before = table_fingerprint(pcon)
    path = tmp_path / "future.csv"
    soon = (dt.datetime.now(dt.UTC) + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    path.write_text("extraction_id,verdict,reviewer,labeled_at\n"
                    "x000001,correct,ana,2099-01-01T00:00:00Z\n"
                    f"x000002,correct,ana,{soon}\n", encoding="utf-8")
    with pytest.raises(ValidationError, match="row 1, column labeled_at: '2099-01-01T00:00:00Z'"
                       " is outside the accepted times") as caught:
        import_labels(pcon, path, actor=QA_LEAD)
    assert caught.value.total == 1  # a minute ahead is clock skew, not refused
    assert table_fingerprint(pcon) == before


def test_a_labels_export_imports_as_written_into_another_store(tmp_path: Path) -> None:
    rows = extraction_rows(4).to_pylist()
    for row, key in zip(rows, ["=X1", "'=X1", "-12", "plain"], strict=True):
        row["extraction_id"] = key
    table = pa.Table.from_pylist(rows)
    first, second = (store.connect(tmp_path / f"{n}.duckdb") for n in ("a", "b"))
    try:
        for con in (first, second):
            ingest_table(con, table, source="rows")
            bootstrap_admin(con, ADMIN)
            grant_role(con, ADMIN, QA_LEAD, "qa_lead")
        for key, value in [("=X1", "-12.50"), ("'=X1", "'quoted"), ("-12", "@home")]:
            record_verdict(first, actor=QA_LEAD, extraction_id=key, verdict="incorrect",
                           corrected_value=value, error_type="misread_characters")
        record_verdict(first, actor=QA_LEAD, extraction_id="plain", verdict="correct")
        out = tmp_path / "labels.csv"
        assert export_labels(first, out) == 4
        text = out.read_text(encoding="utf-8")
        assert "'=X1" in text and "''=X1" in text and "'-12.50" in text  # escaped, unambiguous
        result = import_labels(second, out, actor=QA_LEAD)
        assert result.rows_added == 4
        query = ("SELECT extraction_id, verdict, corrected_value, reviewer, labeled_at"
                 " FROM labels ORDER BY extraction_id")
        assert second.execute(query).fetchall() == first.execute(query).fetchall()
        # Importing the export into the store it came from adds nothing.
        assert import_labels(first, out, actor=QA_LEAD).rows_added == 0
    finally:
        first.close()
        second.close()


# --- 9, 10. stores that are not stores ---------------------------------------------------------


def test_a_truncated_store_file_is_an_error_line(populated: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.duckdb"
    broken.write_bytes(populated.read_bytes()[: populated.stat().st_size // 3])
    result = _run(broken, "info")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: cannot open store")
    assert "Traceback" not in result.output


def test_an_export_to_an_unwritable_path_is_an_error_line(populated: Path,
                                                         tmp_path: Path) -> None:
    before = file_fingerprint(populated)
    missing = tmp_path / "no" / "such" / "dir"
    exported = _run(populated, "labels", "export", "--out", str(missing / "l.csv"))
    assert exported.exit_code == 2 and exported.stderr.startswith("error: cannot write")
    sampled = _run(populated, "sample", "--week", "2026-W48", "--redraw", "--out",
                   str(missing / "s.csv"), "--as", QA_LEAD)
    assert sampled.exit_code == 2 and "nothing was drawn" in sampled.stderr
    assert file_fingerprint(populated) == before


def test_read_commands_leave_a_foreign_duckdb_file_alone_and_init_asks_for_adopt(
    tmp_path: Path
) -> None:
    mine = tmp_path / "mine.duckdb"
    con = duckdb.connect(str(mine))
    con.execute("CREATE TABLE orders AS SELECT range AS id FROM range(5)")
    con.close()
    before = mine.read_bytes()
    for command in (["info"], ["verify"], ["calibrate"], ["labels", "export", "--out",
                                                          str(tmp_path / "x.csv")]):
        result = _run(mine, *command)
        assert result.exit_code == 2, (command, result.output)
        assert "not a fieldtrust store (run `fieldtrust init` to make it one)" in result.stderr
    assert _run(mine, "ingest", str(_csv(tmp_path / "a.csv",
                "a,d,invoice,total,0.5,2026-11-24T10:00:00Z"))).exit_code == 2
    refused = _run(mine, "init")
    assert refused.exit_code == 2 and "pass --adopt" in refused.stderr
    assert mine.read_bytes() == before
    adopted = _run(mine, "init", "--adopt")
    assert adopted.exit_code == 0, adopted.stderr
    con = store.connect(mine, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM orders").fetchall() == [(5,)]
    finally:
        con.close()
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    with pytest.raises(NotAStoreError, match="it is empty, left unchanged"):
        store.connect(tmp_path / "empty.duckdb", read_only=True)


# --- 11. no outbound lookups -------------------------------------------------------------------


def test_every_connection_has_extension_autoinstall_and_autoload_off(populated: Path,
                                                                     tmp_path: Path) -> None:
    query = ("SELECT current_setting('autoinstall_known_extensions'),"
             " current_setting('autoload_known_extensions')")
    for read_only in (False, True):
        con = store.connect(populated, read_only=read_only)
        try:
            assert con.execute(query).fetchall() == [(False, False)]
            assert store.cursor(con).execute(query).fetchall() == [(False, False)]
        finally:
            con.close()
    import sqlite3

    other = sqlite3.connect(tmp_path / "other.sqlite")
    other.execute("CREATE TABLE t (a)")
    other.commit()
    other.close()
    with pytest.raises(StoreError, match="another kind of database file, not DuckDB"):
        store.connect(tmp_path / "other.sqlite", read_only=True)


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.seen.append(self.path)
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"203.0.113.7")

    do_CONNECT = do_GET

    def log_message(self, *args: object) -> None:
        return


@pytest.mark.slow
def test_serve_on_every_interface_asks_no_outside_service_for_its_address(
    populated: Path, tmp_path: Path
) -> None:
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=proxy.serve_forever, daemon=True).start()
    proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
    port = free_port()
    log = tmp_path / "serve.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HTTP_PROXY": proxy_url,
           "HTTPS_PROXY": proxy_url, "http_proxy": proxy_url, "https_proxy": proxy_url,
           "NO_PROXY": "", "no_proxy": ""}
    with log.open("wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "fieldtrust.cli.main", "--db", str(populated), "serve",
             "--as", QA_LEAD, "--address", "0.0.0.0", "--port", str(port)],
            stdout=out, stderr=subprocess.STDOUT, cwd=tmp_path, env=env,
        )
    try:
        wait_healthy(f"http://127.0.0.1:{port}", server)
        time.sleep(2)  # the lookup runs as the server prints its addresses
    finally:
        server.terminate()
        server.wait(timeout=30)
        proxy.shutdown()
    assert _Recorder.seen == [], _Recorder.seen
    assert "External URL" not in log.read_text(errors="replace")


# --- 12. messages ------------------------------------------------------------------------------


def test_a_csv_line_over_the_limit_is_named(db_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    path.write_text(HEADER + "a,d,invoice,total,0.5,2026-11-24T10:00:00Z\n"
                    + 'b,d,"' + "x" * (3 * 1024 * 1024) + '",total,0.5,2026-11-24T10:00:00Z\n',
                    encoding="utf-8")
    result = _run(db_path, "ingest", str(path))
    assert result.exit_code == 2
    assert "line 3 is longer than 2 MB, the longest line this format may have" in result.stderr
    assert len(result.stderr) < 1_000


def test_messages_are_capped(db_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "wide.csv"
    for size in (100_000, 1_000_000):  # under and over the CSV module's field limit
        path.write_text(HEADER.strip() + ",z" + "y" * size + "\n"
                        "a,d,invoice,total,0.5,2026-11-24T10:00:00Z,1\n", encoding="utf-8")
        result = _run(db_path, "ingest", str(path))
        assert result.exit_code == 2
        assert "unknown column zyyyy" in result.stderr or "header line cannot be read" \
            in result.stderr
        assert len(result.stderr) < 1_000


def test_a_broken_json_line_is_named_by_its_own_number(
    con: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    good = json.dumps({"doc_id": "d", "doc_type": "invoice", "field": "total",
                       "confidence": 0.5, "extracted_at": "2026-11-24T10:00:00Z"})
    path = tmp_path / "broken.jsonl"
    path.write_text(f"{good}\n{good}\n{{\"doc_id\": 3\n{good}\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"line 3 is not valid JSON"):
        ingest_files(con, [path])


def test_the_lock_wait_is_said_once_at_once_and_the_end_guesses_no_holder(
    populated: Path
) -> None:
    holder = _holder(populated)
    told: list[tuple[float, str]] = []
    started = time.monotonic()
    try:
        with pytest.raises(StoreLockedError) as caught:
            store.connect(populated, lock_timeout=2.5,
                          on_wait=lambda m: told.append((time.monotonic() - started, m)))
    finally:
        holder.kill()
        holder.wait()
    assert len(told) == 1
    assert told[0][0] < 1.0
    assert told[0][1].startswith(f"waiting for the store {populated}: another process holds")
    assert "fieldtrust process" not in str(caught.value)
    assert "still locked by another process after 3 s" in str(caught.value) or \
        "still locked by another process after 2 s" in str(caught.value)


# --- 13. keys and confidences ------------------------------------------------------------------


@pytest.mark.parametrize(("doc_type", "point"), [
    ("invoice\u0000", "U+0000"), ("invoice\u200b", "U+200B"), ("invo\u202eice", "U+202E"),
])
def test_lookalike_keys_are_refused_with_row_and_code_point(
    db_path: Path, tmp_path: Path, doc_type: str, point: str
) -> None:
    path = _csv(tmp_path / "keys.csv", "a,d,invoice,total,0.5,2026-11-24T10:00:00Z",
                f"b,d,{doc_type},total,0.5,2026-11-24T10:00:00Z")
    result = _run(db_path, "ingest", str(path))
    assert result.exit_code == 2
    assert f"row 2, column doc_type: '{doc_type[:4]}" in result.stderr
    assert f"holds the invisible character {point}" in result.stderr
    assert doc_type not in result.stderr  # shown with the code point, never raw
    assert file_fingerprint(db_path)["extractions"][0] == 0


def test_keys_have_a_length_limit(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = _csv(tmp_path / "long.csv", f"a,d,invoice,{'f' * 257},0.5,2026-11-24T10:00:00Z")
    with pytest.raises(ValidationError, match=r"row 1, column field: 'fff.*' is 257 characters"
                       " long; keys may have at most 256"):
        ingest_files(con, [path])


def test_a_float32_confidence_keeps_its_decimal(con: duckdb.DuckDBPyConnection,
                                                tmp_path: Path) -> None:
    rows = extraction_rows(3)
    typed = rows.set_column(rows.schema.get_field_index("confidence"), "confidence",
                            pa.array([0.9, 0.7, 0.95], type=pa.float32()))
    path = tmp_path / "f32.parquet"
    pq.write_table(typed, path)
    ingest_files(con, [path])
    assert con.execute("SELECT confidence FROM extractions ORDER BY extraction_id").fetchall() \
        == [(0.9,), (0.7,), (0.95,)]
    ingest_table(con, typed.set_column(0, "extraction_id", pa.array(["t1", "t2", "t3"])),
                 source="arrow", window=TimeWindow())
    assert con.execute("SELECT count(*) FROM extractions WHERE confidence >= 0.9").fetchall() \
        == [(4,)]
