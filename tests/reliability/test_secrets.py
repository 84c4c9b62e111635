"""Secrets: the Anthropic API key never reaches the store, logs, output, exports or errors.

``fieldtrust extract`` runs with a distinctive fake key over the real
``anthropic`` client and ``httpx2.MockTransport`` (tests/extraction's fake
API), through every failure path we know: errors that echo the key, a
refused key, overload beyond the retries, a connection error, and HTTP 200
replies that are not messages (a proxy's page, garbage, a wrong shape).
Then everything fieldtrust wrote or printed is scanned: every text column of
every table, the raw database files, stdout and stderr, every log record at
DEBUG (tracebacks included) and the CSV / Parquet / JSON exports.

Not covered: an exception whose own text holds the key (a transport error
quoting a header) would appear in the SDK's DEBUG traceback; fieldtrust never
turns DEBUG on (docs/reliability.md).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner
from rel_store import find_text

from fieldtrust import store
from fieldtrust.cli import extract_cmds
from fieldtrust.cli.main import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "extraction"))
from claude_fake import (
    MODEL,
    FakeClaude,
    api_error,
    client_for,
    invoice_input,
    ok,
    tool_reply,
)

#: A key nobody would write by accident; any hit in a scan is a leak.
KEY = "sk-ant-api03-REL1ABILITY-canary-7c3f9e-DoNotLeak-0123456789abcdef"
#: Its tail alone must not show up either (a truncated echo is still a leak).
KEY_TAIL = KEY[-24:]

#: Documents by file name (sorted = the order extract sends them) and how the API answers.
CASES = {
    "a_ok.txt": "ok",
    "b_garbage.txt": "garbage",
    "c_html.txt": "html",
    "d_shape.txt": "shape",
    "e_echo400.txt": "echo400",
    "f_overloaded.txt": "overloaded",
    "g_connection.txt": "connection",
    "h_ok_again.txt": "ok",
    "y_refused_key.txt": "refused",
    "z_not_sent.txt": "ok",
}


def _answer(body: dict[str, Any]) -> httpx2.Response:
    case = next(c for c in set(CASES.values()) if f"case: {c}." in json.dumps(body))
    if case == "ok":
        return ok(tool_reply("record_invoice", invoice_input()))
    if case == "garbage":
        return httpx2.Response(200, content=b"\x00not json",
                               headers={"content-type": "application/json"})
    if case == "html":
        return httpx2.Response(200, content=f"<html>proxy login for {KEY}</html>".encode(),
                               headers={"content-type": "text/html"})
    if case == "shape":
        return httpx2.Response(200, json={"echo": KEY})
    if case == "echo400":
        return api_error(400, "invalid_request_error", f"bad header x-api-key: {KEY}")
    if case == "overloaded":
        return api_error(529, "overloaded_error", f"overloaded (key {KEY})")
    if case == "connection":
        raise httpx2.ConnectError("proxy refused CONNECT to api.test:443")
    return api_error(401, "authentication_error", f"invalid x-api-key: {KEY}")


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    api = FakeClaude(_answer)
    monkeypatch.setattr(extract_cmds, "make_client",
                        lambda key: client_for(api, api_key=key, max_retries=1))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    return api


@pytest.fixture
def documents(tmp_path: Path) -> Path:
    folder = tmp_path / "inbox"
    folder.mkdir()
    for name, case in CASES.items():
        (folder / name).write_text(
            f"INVOICE {name}\ncase: {case}.\nACME Office Supplies GmbH\nTotal EUR 880.00\n",
            encoding="utf-8",
        )
    return folder


def _leaks(text: str) -> bool:
    return KEY in text or KEY_TAIL in text


def test_the_key_never_leaks_through_any_failure_path(
    fake: FakeClaude, documents: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    db = tmp_path / "store.duckdb"
    caplog.set_level(logging.DEBUG)
    for name in ("anthropic", "httpx2", "httpcore", "httpx"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    runner = CliRunner()

    result = runner.invoke(cli, ["--db", str(db), "extract", str(documents), "--doc-type",
                                 "invoice", "--model", MODEL, "--json"])

    # It was used (every request carried it), and the run finished with a summary.
    assert fake.requests
    assert all(KEY in r.headers.get("x-api-key", "") + r.headers.get("authorization", "")
               for r in fake.requests)
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    assert (summary["documents"], summary["ok"], summary["failed"]) == (10, 2, 8)
    kinds = {Path(g["source_path"]).name: g["kind"] for g in summary["gaps"]}
    assert kinds["b_garbage.txt"] == kinds["c_html.txt"] == kinds["d_shape.txt"] == "transient"
    assert kinds["z_not_sent.txt"] == "input"  # after the refused key nothing more is sent
    assert "[redacted]" in result.stdout  # echoes were cut out, not dropped silently

    # Output, logs and error messages.
    assert not _leaks(result.output)
    assert len(caplog.records) > 10, "the SDK's debug logging was captured"
    assert "Request options" in caplog.text  # what the SDK logs about each request
    assert not _leaks(caplog.text)  # messages, arguments and tracebacks

    # The store: every text column, and the raw files.
    con = store.connect(db)
    try:
        assert con.execute("SELECT count(*) FROM extraction_log").fetchall()[0][0] >= 9
        assert find_text(con, KEY) == [] and find_text(con, KEY_TAIL) == []
    finally:
        con.close()
    for path in tmp_path.glob("store.duckdb*"):
        raw = path.read_bytes()
        assert KEY.encode() not in raw and KEY_TAIL.encode() not in raw, path.name

    # Exports and reports.
    out = tmp_path / "exports"
    out.mkdir()
    commands = [
        ["labels", "export", "--out", str(out / "labels.csv")],
        ["labels", "export", "--out", str(out / "labels.parquet")],
        ["policy", "export", "--out", str(out / "policy.json")],
        ["info"], ["settings"], ["errors", "--json"],
        ["users", "grant", "root", "admin", "--as", "root"],
        ["users", "grant", "quinn", "qa_lead", "--as", "root"],
        ["sample", "--week", _week(db), "--out", str(out / "sample.csv"), "--as", "quinn"],
    ]
    for command in commands:
        shown = runner.invoke(cli, ["--db", str(db), *command])
        assert shown.exit_code == 0, (command, shown.output)
        assert not _leaks(shown.output), command
    for path in out.iterdir():
        raw = path.read_bytes()
        assert KEY.encode() not in raw and KEY_TAIL.encode() not in raw, path.name


def _week(db: Path) -> str:
    con = store.connect(db, read_only=True)
    try:
        return str(con.execute("SELECT strftime(max(extracted_at), '%G-W%V') FROM extractions")
                   .fetchall()[0][0])
    finally:
        con.close()


def test_a_missing_or_blank_key_names_the_variable_not_a_value(
    tmp_path: Path, documents: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "   ")
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "s.duckdb"), "extract",
                                      str(documents), "--doc-type", "invoice"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ANTHROPIC_API_KEY is not set")


def test_the_key_is_not_a_setting_and_settings_never_print_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.settings import Settings

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    config = tmp_path / "fieldtrust.toml"
    config.write_text(f'anthropic_api_key = "{KEY}"\n', encoding="utf-8")
    # Key files' paths are settings (signing_key_file); a key itself never is.
    assert not [f for f in Settings.__dataclass_fields__
                if "key" in f.lower() and not f.endswith(("_file", "_files"))]
    result = CliRunner().invoke(cli, ["--db", str(tmp_path / "s.duckdb"), "--config",
                                      str(config), "settings"])
    assert not _leaks(result.output)
