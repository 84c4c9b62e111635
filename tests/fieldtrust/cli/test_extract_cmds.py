"""`fieldtrust extract`: key handling, progress, summary, exit codes, batch mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner

from fieldtrust import store
from fieldtrust.cli import extract_cmds
from fieldtrust.cli.main import cli
from tests.extraction.claude_fake import (
    FIXTURES,
    KEY,
    MODEL,
    FakeClaude,
    api_error,
    client_for,
    entry,
    invoice_input,
    line,
    ok,
    receipt_input,
    tool_reply,
)


def by_content(body: dict[str, Any]) -> httpx2.Response:
    """Answer like a model reading the fixtures would."""
    block = body["messages"][0]["content"][0]
    if block["type"] == "document":
        pdf = invoice_input(line_items={"items": [line("Services", "100.00")], "confidence": 0.9},
                            tax=entry(None), total=entry("100.00"))
        return ok(tool_reply("record_invoice", pdf))
    if block["type"] == "image":
        return api_error(400, "invalid_request_error", "Could not process image")
    if "ACME" in block["text"]:
        return ok(tool_reply("record_invoice", invoice_input()))
    return ok(tool_reply("record_receipt", receipt_input()))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakeClaude:
    """The API the command talks to; the key comes from the environment as in real use."""
    api = FakeClaude(by_content)
    monkeypatch.setattr(extract_cmds, "make_client", lambda key: client_for(api, api_key=key))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    return api


def invoke(db_path: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--db", str(db_path), "extract", *args], catch_exceptions=False)


def test_missing_key_is_a_clear_error_with_exit_2(
    db_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    called: list[str] = []
    monkeypatch.setattr(extract_cmds, "make_client", lambda key: called.append(key))

    result = invoke(db_path, str(FIXTURES / "invoice.txt"), "--doc-type", "invoice")

    assert result.exit_code == 2
    assert "error: ANTHROPIC_API_KEY is not set" in result.stderr
    assert called == []


def test_extract_a_folder_reports_progress_and_lists_the_gaps(
    fake: FakeClaude, db_path: Path,
) -> None:
    result = invoke(db_path, str(FIXTURES), "--doc-type", "auto", "--model", MODEL,
                    "--form-version", "v3")

    assert result.exit_code == 1  # one document failed
    assert result.stderr.splitlines() == [
        "[1/4] invoice.pdf: ok (1 attempt)",
        "[2/4] invoice.txt: ok (1 attempt)",
        "[3/4] receipt.png: failed (input) (1 attempt)",
        "[4/4] receipt_no_tax.txt: ok (1 attempt)",
    ]
    assert "4 documents, 3 stored (0 flagged), 1 failed" in result.stdout
    assert "receipt.png" in result.stdout and "Could not process image" in result.stdout
    assert KEY not in result.output
    with store.open_store(db_path) as con:
        stored = con.sql(
            "SELECT doc_type, count(*), min(form_version) FROM extractions GROUP BY ALL ORDER BY 1"
        ).fetchall()
    assert stored == [("invoice", 16, "v3"), ("receipt", 9, "v3")]


def test_running_again_skips_what_is_stored(fake: FakeClaude, db_path: Path) -> None:
    invoke(db_path, str(FIXTURES / "invoice.txt"), "--doc-type", "invoice", "--model", MODEL)

    again = invoke(db_path, str(FIXTURES / "invoice.txt"), "--doc-type", "invoice",
                   "--model", MODEL, "--json")

    assert again.exit_code == 0
    summary = json.loads(again.stdout)
    assert (summary["skipped"], summary["ok"], summary["gaps"]) == (1, 0, [])
    assert len(fake.message_bodies()) == 1


def test_batch_mode_writes_a_manifest_and_resumes(
    fake: FakeClaude, db_path: Path, tmp_path: Path,
) -> None:
    manifest = tmp_path / "batches.json"
    fake.polls_before_end = 5
    args = [str(FIXTURES / "invoice.txt"), str(FIXTURES / "receipt_no_tax.txt"),
            "--doc-type", "auto", "--model", MODEL, "--batch", "--manifest", str(manifest),
            "--poll-interval", "0", "--json"]

    first = invoke(db_path, *args, "--wait", "0")

    assert first.exit_code == 3  # work is pending: not a success yet
    assert json.loads(first.stdout)["pending"] == 2
    assert f"2 documents are still in a batch: run the same command again (--manifest {manifest})" \
        in first.stderr
    assert "submitted batch msgbatch_01 with 2 documents" in first.stderr
    fake.polls_before_end = 0

    second = invoke(db_path, *args)

    summary = json.loads(second.stdout)
    assert (summary["ok"], summary["pending"], summary["failed"]) == (2, 0, 0)
    assert len(fake.batch_creates()) == 1
    assert KEY not in manifest.read_text()
    assert KEY not in first.output + second.output


def test_help_has_an_example() -> None:
    result = CliRunner().invoke(cli, ["extract", "--help"])

    assert "Example: ANTHROPIC_API_KEY=... fieldtrust" in result.output
    for option in ("--doc-type", "--model", "--batch", "--manifest", "--form-version"):
        assert option in result.output


@pytest.mark.parametrize("options", [["--manifest", "run.json"], ["--wait", "5"],
                                     ["--poll-interval", "1"]])
def test_batch_options_without_batch_are_refused(
    fake: FakeClaude, db_path: Path, options: list[str],
) -> None:
    result = CliRunner().invoke(cli, ["--db", str(db_path), "extract",
                                      str(FIXTURES / "invoice.txt"), "--doc-type", "invoice",
                                      *options])
    assert result.exit_code == 2
    assert f"{options[0]} only apply with --batch" in result.output
    assert fake.requests == []


def test_a_folder_without_documents_is_an_error(
    fake: FakeClaude, db_path: Path, tmp_path: Path,
) -> None:
    empty = tmp_path / "inbox"
    empty.mkdir()
    (empty / "notes.docx").write_text("not a format fieldtrust reads")
    result = invoke(db_path, str(empty), "--doc-type", "invoice")
    assert result.exit_code == 2
    assert f"error: no documents in {empty}: fieldtrust reads .pdf .png" in result.stderr
    assert fake.requests == []


def test_an_unreachable_api_is_named_by_its_url(
    db_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import socket

    import anthropic

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    monkeypatch.setattr(extract_cmds, "make_client", lambda key: anthropic.Anthropic(
        api_key=key, base_url=url, max_retries=0, timeout=5))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    result = invoke(db_path, str(FIXTURES / "invoice.txt"), "--doc-type", "invoice", "--json")
    assert result.exit_code == 1
    [gap] = json.loads(result.stdout)["gaps"]
    assert f"could not reach the API at {url}" in gap["message"]


def test_help_shows_the_default_model() -> None:
    from fieldtrust.settings import Settings

    result = CliRunner().invoke(cli, ["extract", "--help"])
    assert f"default {Settings().model}" in " ".join(result.output.split())


def test_redo_says_it_adds_a_second_set_of_rows(fake: FakeClaude, db_path: Path) -> None:
    invoke(db_path, str(FIXTURES / "invoice.txt"), "--doc-type", "invoice", "--model", MODEL)
    again = invoke(db_path, str(FIXTURES / "invoice.txt"), "--doc-type", "invoice",
                   "--model", MODEL, "--redo")
    assert again.exit_code == 0
    assert ("--redo: 1 of 1 documents are already in the store; their earlier rows stay and"
            " this run adds a second set beside them") in again.stderr
    con = store.connect(db_path, read_only=True)
    try:
        runs = con.execute("SELECT count(DISTINCT batch_id) FROM extractions").fetchall()[0][0]
    finally:
        con.close()
    assert runs == 2


def test_the_prompt_uses_the_right_article(fake: FakeClaude, db_path: Path) -> None:
    invoke(db_path, str(FIXTURES / "invoice.txt"), "--doc-type", "invoice", "--model", MODEL)
    texts = [block.get("text", "") for body in fake.message_bodies()
             for block in body["messages"][0]["content"]]
    assert any("The document above is an invoice." in t for t in texts)
    assert not any(" a invoice" in t for t in texts)
