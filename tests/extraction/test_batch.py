"""The Message Batches path: create, poll, collect, retry rounds, and resuming from a manifest."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx2
import pytest
from claude_fake import (
    FIXTURES,
    MODEL,
    FakeClaude,
    ListSink,
    client_for,
    entry,
    invoice_input,
    ok,
    tool_reply,
)
from fieldtrust.extraction.batch import run_batch
from fieldtrust.extraction.documents import identify
from fieldtrust.extraction.manifest import load_manifest, save_manifest
from fieldtrust.extraction.sink import StoreSink

from fieldtrust import store
from fieldtrust.errors import InputError


@pytest.fixture
def docs(tmp_path: Path) -> list[Path]:
    """Two invoices: a.txt adds up; b.txt prints a total the lines do not reach."""
    folder = tmp_path / "inbox"
    folder.mkdir()
    shutil.copy(FIXTURES / "invoice.txt", folder / "a.txt")
    (folder / "b.txt").write_text("ACME invoice B\nPaper 500.00\nToner 300.00\nTotal 1000.00")
    return [folder / "a.txt", folder / "b.txt"]


def by_document(body: dict[str, Any]) -> httpx2.Response:
    """Reply by which document the request carries: b.txt gets a conflicting total."""
    text = body["messages"][0]["content"][0]["text"]
    if "invoice B" in text:
        return ok(tool_reply("record_invoice", invoice_input(total=entry("1000.00"))))
    return ok(tool_reply("record_invoice", invoice_input()))


def batch(fake: FakeClaude, paths: list[Path], manifest: Path, **options: Any):
    options.setdefault("sink", ListSink())
    return run_batch(
        client_for(fake), paths, manifest_path=manifest, doc_type="invoice", model=MODEL,
        poll_interval=0, sleep=lambda _: None, **options,
    )


def test_batch_flow_creates_polls_collects_and_sends_retries_in_a_second_round(
    docs: list[Path], tmp_path: Path, db_path: Path,
) -> None:
    fake = FakeClaude(by_document, polls_before_end=1)
    manifest = tmp_path / "run.json"

    summary = batch(fake, docs, manifest, sink=StoreSink(db_path))

    first, second = fake.batch_creates()
    assert [r["custom_id"] for r in first["requests"]] == ["doc0-a1", "doc1-a1"]
    assert [r["custom_id"] for r in second["requests"]] == ["doc1-a2"]
    retry = second["requests"][0]["params"]
    feedback = retry["messages"][2]["content"][0]
    assert feedback["type"] == "tool_result" and feedback["is_error"] is True
    assert "line items sum to 800.00" in feedback["content"]
    assert "stated total is 1000.00" in feedback["content"]
    assert retry["tool_choice"]["name"] == "record_invoice"
    assert (summary.ok, summary.flagged, summary.failed, summary.pending) == (2, 1, 0, 0)
    assert [g.kind for g in summary.gaps] == ["conflict"]
    saved = load_manifest(manifest)
    assert {d["state"] for d in saved["documents"].values()} == {"done"}
    assert {b["state"] for b in saved["batches"].values()} == {"collected"}
    with store.open_store(db_path) as con:
        flagged = con.sql(
            "SELECT doc_id, field FROM extractions WHERE conflict ORDER BY field").fetchall()
        logged = con.sql("SELECT count(*) FROM extraction_log").fetchall()
    assert flagged == [(identify(docs[1]), "line_items"), (identify(docs[1]), "total")]
    assert logged == [(3,)]  # a: 1 attempt; b: conflict, then kept


def test_interrupted_run_resumes_by_polling_without_resubmitting(
    docs: list[Path], tmp_path: Path,
) -> None:
    fake = FakeClaude(by_document, polls_before_end=3)
    manifest = tmp_path / "run.json"
    sink = ListSink()

    stopped = batch(fake, docs, manifest, sink=sink, wait=0)

    assert stopped.pending == 2 and stopped.ok == 0
    assert len(fake.batch_creates()) == 1
    saved = load_manifest(manifest)
    assert [b["state"] for b in saved["batches"].values()] == ["in_progress"]
    assert {d["state"] for d in saved["documents"].values()} == {"submitted"}

    fake.polls_before_end = 0
    resumed = batch(fake, docs, manifest, sink=sink)

    creates = fake.batch_creates()
    assert len(creates) == 2  # only b's conflict retry went out; the first batch was polled
    assert [r["custom_id"] for r in creates[1]["requests"]] == ["doc1-a2"]
    assert resumed.run_id == stopped.run_id
    assert (resumed.ok, resumed.pending) == (2, 0)
    assert sorted(Path(r.source_path).name for r in sink.results) == ["a.txt", "b.txt"]


def test_resume_from_a_manifest_with_a_finished_document_and_a_running_batch(
    docs: list[Path], tmp_path: Path,
) -> None:
    a_id, b_id = identify(docs[0]), identify(docs[1])
    manifest = tmp_path / "run.json"
    save_manifest(manifest, {
        "version": 1, "run_id": "run-old", "doc_type": "invoice", "model": MODEL,
        "created_at": "2026-03-01T09:00:00",
        "documents": {
            a_id: {"path": str(docs[0]), "index": 0, "state": "done", "batch_id": "msgbatch_01",
                   "custom_id": "doc0-a1", "resubmits": 0, "conversation": {},
                   "outcome": {"status": "ok"}},
            b_id: {"path": str(docs[1]), "index": 1, "state": "submitted",
                   "batch_id": "msgbatch_02", "custom_id": "doc1-a1", "resubmits": 0,
                   "conversation": {}, "outcome": None},
        },
        "batches": {
            "msgbatch_01": {"state": "collected", "created_at": "2026-03-01T09:00:00",
                            "custom_ids": {"doc0-a1": a_id}},
            "msgbatch_02": {"state": "in_progress", "created_at": "2026-03-01T09:05:00",
                            "custom_ids": {"doc1-a1": b_id}},
        },
    })
    fine = invoice_input(total=entry("800.00"), tax=entry(None))
    fake = FakeClaude([tool_reply("record_invoice", fine)])
    fake.batches["msgbatch_01"] = {"requests": [], "polls": 0}
    fake.batches["msgbatch_02"] = {
        "requests": [{"custom_id": "doc1-a1", "params": {"messages": []}}], "polls": 0,
    }
    sink = ListSink()

    summary = batch(fake, docs, manifest, sink=sink)

    assert fake.batch_creates() == []  # nothing resubmitted
    polled = [r.path for r in fake.requests if r.method == "GET"]
    path = "/v1/messages/batches/msgbatch_02"
    assert polled == [path, path, f"{path}/results"]
    assert [r.doc_id for r in sink.results] == [b_id]
    assert (summary.run_id, summary.ok, summary.documents) == ("run-old", 2, 2)


def test_transient_batch_errors_are_resubmitted_once_permanent_ones_fail(
    docs: list[Path], tmp_path: Path,
) -> None:
    seen: list[str] = []

    def result(custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
        seen.append(custom_id)
        if custom_id.startswith("doc0"):
            return {"type": "errored", "error": {"type": "error", "error": {
                "type": "invalid_request_error", "message": "Could not process document"}}}
        if custom_id == "doc1-a1" and seen.count("doc1-a1") == 1:
            return {"type": "expired"}
        message = tool_reply("record_invoice", invoice_input(total=entry("880.00")))
        return {"type": "succeeded", "message": message}

    fake = FakeClaude(batch_result=result)

    summary = batch(fake, docs, tmp_path / "run.json")

    assert seen == ["doc0-a1", "doc1-a1", "doc1-a1"]  # b resubmitted once, a not at all
    assert (summary.ok, summary.failed) == (1, 1)
    [gap] = summary.gaps
    assert gap.kind == "input" and "Could not process document" in gap.message


def test_a_manifest_for_another_model_is_refused(docs: list[Path], tmp_path: Path) -> None:
    manifest = tmp_path / "run.json"
    batch(FakeClaude(by_document), docs, manifest)

    with pytest.raises(InputError, match="used model 'claude-sonnet-4-6', not 'other-model'"):
        run_batch(client_for(FakeClaude()), docs, manifest_path=manifest, doc_type="invoice",
                  model="other-model")


def test_an_unreadable_manifest_is_a_clear_error(docs: list[Path], tmp_path: Path) -> None:
    manifest = tmp_path / "run.json"
    manifest.write_text(json.dumps({"version": 99}))

    with pytest.raises(InputError, match="not a version 1 extraction manifest"):
        batch(FakeClaude(), docs, manifest)


def test_a_document_that_failed_is_tried_again_on_a_rerun(
    docs: list[Path], tmp_path: Path,
) -> None:
    outage = {"on": True}

    def result(custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
        if custom_id.startswith("doc0") and outage["on"]:
            return {"type": "errored", "error": {"type": "error", "error": {
                "type": "invalid_request_error", "message": "Could not process document"}}}
        message = tool_reply("record_invoice", invoice_input(total=entry("880.00")))
        return {"type": "succeeded", "message": message}

    fake = FakeClaude(batch_result=result)
    manifest = tmp_path / "run.json"
    first = batch(fake, docs, manifest)
    assert (first.ok, first.failed) == (1, 1)
    outage["on"] = False
    said: list[str] = []
    second = batch(fake, docs, manifest, progress=said.append)
    assert (second.ok, second.failed, second.gaps) == (2, 0, ())
    assert "retrying 1 document that failed before" in said
    assert len(fake.batch_creates()) == 2
