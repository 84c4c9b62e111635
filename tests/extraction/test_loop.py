"""The per-document loop over the real client: stop reasons, retries, failures."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from claude_fake import (
    FIXTURES,
    KEY,
    MODEL,
    FakeClaude,
    ListSink,
    api_error,
    client_for,
    entry,
    invoice_input,
    line,
    message,
    receipt_input,
    text_reply,
    tool_reply,
)
from fieldtrust.extraction.conversation import Limits
from fieldtrust.extraction.documents import Document
from fieldtrust.extraction.loop import extract_document, extract_paths


def run(fake: FakeClaude, document: Document, doc_type: str = "invoice", **limits: int):
    return extract_document(
        client_for(fake), document, doc_type=doc_type, model=MODEL, limits=Limits(**limits)
    )


def mismatched_invoice() -> dict:
    """Lines 500 + 300 = 800, tax 80, stated total 1000: a real arithmetic conflict."""
    return invoice_input(total=entry("1000.00", 0.9))


# -- happy paths ----------------------------------------------------------------------


def test_invoice_happy_path_forces_the_invoice_tool(invoice_txt: Document) -> None:
    fake = FakeClaude([tool_reply("record_invoice", invoice_input())])

    result = run(fake, invoice_txt)

    assert result.ok and result.failure is None
    assert result.extraction is not None
    assert result.extraction.doc_type == "invoice"
    assert result.extraction.tool_input["total"]["value"] == "880.00"
    assert result.extraction.computed_total == "800.00"
    assert result.extraction.conflicts == {}
    [body] = fake.message_bodies()
    assert body["tool_choice"] == {
        "type": "tool", "name": "record_invoice", "disable_parallel_tool_use": True,
    }
    assert [t["name"] for t in body["tools"]] == ["record_invoice"]
    assert body["tools"][0]["strict"] is True
    assert body["model"] == MODEL
    assert "令和6年4月1日" in body["messages"][0]["content"][0]["text"]
    assert [a.outcome for a in result.attempts] == ["accepted"]


def test_receipt_happy_path_from_an_image(receipt_png: Document) -> None:
    fake = FakeClaude([tool_reply("record_receipt", receipt_input())])

    result = run(fake, receipt_png, doc_type="receipt")

    assert result.extraction is not None
    assert result.extraction.doc_type == "receipt"
    assert result.extraction.tool_input["payment_method"]["value"] == "card"
    [body] = fake.message_bodies()
    image = body["messages"][0]["content"][0]
    assert image["type"] == "image"
    assert image["source"]["media_type"] == "image/png"
    assert base64.b64decode(image["source"]["data"]) == (FIXTURES / "receipt.png").read_bytes()
    assert body["tool_choice"]["name"] == "record_receipt"


def test_pdf_goes_as_a_base64_document_block(invoice_pdf: Document) -> None:
    tool_input = invoice_input(
        line_items={"items": [line("Services", "100.00")], "confidence": 0.9},
        tax=entry(None, 0.9), total=entry("100.00", 0.95),
    )
    fake = FakeClaude([tool_reply("record_invoice", tool_input)])

    result = run(fake, invoice_pdf)

    assert result.ok
    block = fake.message_bodies()[0]["messages"][0]["content"][0]
    assert block["type"] == "document"
    assert block["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(block["source"]["data"]) == (FIXTURES / "invoice.pdf").read_bytes()


def test_auto_offers_every_tool_and_the_tool_called_gives_the_type(receipt_txt: Document) -> None:
    fake = FakeClaude([tool_reply("record_receipt", receipt_input())])

    result = run(fake, receipt_txt, doc_type="auto")

    [body] = fake.message_bodies()
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert sorted(t["name"] for t in body["tools"]) == ["record_invoice", "record_receipt"]
    assert result.extraction is not None and result.extraction.doc_type == "receipt"


def test_document_without_tax_line_gives_null_tax_and_no_retry(receipt_txt: Document) -> None:
    fake = FakeClaude([tool_reply("record_receipt", receipt_input())])

    result = run(fake, receipt_txt, doc_type="receipt")

    assert result.extraction is not None
    assert result.extraction.tool_input["tax"]["value"] is None
    assert result.extraction.conflicts == {}
    assert len(fake.message_bodies()) == 1  # an absent value is never retried


# -- semantic validation: conflicts -----------------------------------------------------


def test_total_mismatch_retries_once_with_document_failed_call_and_message(
    invoice_txt: Document,
) -> None:
    fake = FakeClaude([
        tool_reply("record_invoice", mismatched_invoice(), tool_id="toolu_bad"),
        tool_reply("record_invoice", invoice_input(), tool_id="toolu_good"),
    ])

    result = run(fake, invoice_txt)

    first, retry = fake.message_bodies()
    assert len(first["messages"]) == 1
    document, assistant, feedback = retry["messages"]
    # the original document, unchanged
    assert document == first["messages"][0]
    assert "INV-2024-0042" in document["content"][0]["text"]
    # the failed extraction, as the assistant's tool call
    assert assistant["role"] == "assistant"
    [call] = [b for b in assistant["content"] if b["type"] == "tool_use"]
    assert call["id"] == "toolu_bad" and call["input"] == mismatched_invoice()
    # the validator's specific message, as an error result for that call
    [tool_result] = feedback["content"]
    assert feedback["role"] == "user"
    assert tool_result["type"] == "tool_result"
    assert tool_result["tool_use_id"] == "toolu_bad"
    assert tool_result["is_error"] is True
    assert "line items sum to 800.00 (880.00 with tax 80.00), stated total is 1000.00" in (
        tool_result["content"]
    )
    assert result.extraction is not None and result.extraction.conflicts == {}
    assert [a.outcome for a in result.attempts] == ["conflict", "accepted"]


def test_persistent_mismatch_is_stored_flagged_after_the_retry_limit(
    invoice_txt: Document,
) -> None:
    # The document prints a wrong total: the model keeps it, the code flags it.
    fake = FakeClaude([tool_reply("record_invoice", mismatched_invoice())] * 5)

    result = run(fake, invoice_txt)

    assert len(fake.message_bodies()) == 2  # one retry, no loop
    assert result.extraction is not None
    assert result.extraction.conflicts == {"total": "800.00", "line_items": "800.00"}
    assert result.extraction.conflict_messages == (
        "line items sum to 800.00 (880.00 with tax 80.00), stated total is 1000.00",
    )
    assert [a.outcome for a in result.attempts] == ["conflict", "conflict_kept"]


def test_conflict_retries_zero_stores_the_first_answer_flagged(invoice_txt: Document) -> None:
    fake = FakeClaude([tool_reply("record_invoice", mismatched_invoice())])

    result = run(fake, invoice_txt, conflict_retries=0)

    assert len(fake.message_bodies()) == 1
    assert result.extraction is not None and result.extraction.has_conflict


# -- format errors ----------------------------------------------------------------------


@pytest.mark.parametrize("retries", [0, 1, 2])
def test_format_errors_retry_up_to_the_limit_then_fail_as_validation(
    invoice_txt: Document, retries: int,
) -> None:
    bad = invoice_input(date=entry("2024/04/01", 0.9))
    fake = FakeClaude([tool_reply("record_invoice", bad)] * 10)

    result = run(fake, invoice_txt, format_retries=retries)

    assert len(fake.message_bodies()) == retries + 1
    assert result.failure is not None and result.failure.kind == "validation"
    assert "date.value: '2024/04/01' is not an ISO date yyyy-mm-dd" in result.failure.message
    assert result.failure.partial == bad
    assert result.failure.hint


def test_a_format_error_then_a_fix_succeeds(invoice_txt: Document) -> None:
    bad = invoice_input(tax=entry("80.00", 1.7))
    fake = FakeClaude([tool_reply("record_invoice", bad), tool_reply("record_invoice",
                                                                      invoice_input())])

    result = run(fake, invoice_txt)

    assert result.ok
    feedback = fake.message_bodies()[1]["messages"][2]["content"][0]
    assert feedback["is_error"] is True
    assert "tax.confidence: 1.7 is outside [0, 1]" in feedback["content"]


# -- stop reasons ----------------------------------------------------------------------


def test_max_tokens_cut_off_call_is_never_used_and_retried_with_a_larger_budget(
    invoice_txt: Document,
) -> None:
    cut = tool_reply("record_invoice", {"invoice_number": entry("INV-1")},
                     stop_reason="max_tokens")
    fake = FakeClaude([cut, tool_reply("record_invoice", invoice_input())])

    result = run(fake, invoice_txt, max_tokens=1000, max_tokens_retry=8000)

    first, second = fake.message_bodies()
    assert (first["max_tokens"], second["max_tokens"]) == (1000, 8000)
    assert second["messages"] == first["messages"]  # the cut-off turn is not sent back
    assert result.extraction is not None
    assert result.extraction.tool_input["invoice_number"]["value"] == "INV-2024-0042"
    assert result.attempts[0].outcome == "truncated"
    assert result.attempts[0].tool_input is None


def test_max_tokens_twice_fails_as_truncated_without_using_the_partial_call(
    invoice_txt: Document,
) -> None:
    # A complete-looking input that still arrived with stop_reason max_tokens.
    cut = tool_reply("record_invoice", invoice_input(), stop_reason="max_tokens")
    fake = FakeClaude([cut, cut, cut])

    result = run(fake, invoice_txt)

    assert len(fake.message_bodies()) == 2
    assert result.extraction is None
    assert result.failure is not None and result.failure.kind == "truncated"
    assert result.failure.partial is None


def test_end_turn_without_the_tool_is_not_success(invoice_txt: Document) -> None:
    fake = FakeClaude([text_reply("I have extracted the invoice."), text_reply("Done.")])

    result = run(fake, invoice_txt)

    assert len(fake.message_bodies()) == 2
    assert result.extraction is None
    assert result.failure is not None and result.failure.kind == "validation"
    nudge = fake.message_bodies()[1]["messages"][-1]
    assert nudge["role"] == "user"
    assert "record_invoice" in nudge["content"][0]["text"]


def test_end_turn_then_a_tool_call_succeeds(invoice_txt: Document) -> None:
    fake = FakeClaude([text_reply("Here it is."), tool_reply("record_invoice", invoice_input())])

    result = run(fake, invoice_txt)

    assert result.ok
    assert [a.outcome for a in result.attempts] == ["no_tool", "accepted"]


def test_text_saying_done_with_stop_reason_tool_use_is_taken_as_the_call(
    invoice_txt: Document,
) -> None:
    fake = FakeClaude([tool_reply("record_invoice", invoice_input(), text="done")])

    result = run(fake, invoice_txt)

    assert result.extraction is not None
    assert result.extraction.tool_input == invoice_input()
    assert len(fake.message_bodies()) == 1


def test_refusal_fails_as_refused_without_retry(invoice_txt: Document) -> None:
    refusal = message([], "refusal", stop_details={"type": "refusal", "category": "cyber",
                                                    "explanation": None})
    fake = FakeClaude([refusal])

    result = run(fake, invoice_txt)

    assert len(fake.message_bodies()) == 1
    assert result.failure is not None and result.failure.kind == "refused"
    assert "cyber" in result.failure.message


# -- transport errors ----------------------------------------------------------------


def test_429_and_529_are_retried_by_the_client_then_succeed(invoice_txt: Document) -> None:
    fake = FakeClaude([
        api_error(429, "rate_limit_error", "Number of request tokens has exceeded your limit"),
        api_error(529, "overloaded_error", "Overloaded"),
        tool_reply("record_invoice", invoice_input()),
    ])

    result = run(fake, invoice_txt)

    assert result.ok
    assert len(fake.message_bodies()) == 3  # the SDK's retries
    assert len(result.attempts) == 1  # one model call as far as the loop is concerned


def test_transient_errors_beyond_the_client_retries_fail_as_transient(
    invoice_txt: Document,
) -> None:
    fake = FakeClaude([api_error(529, "overloaded_error", "Overloaded")] * 3)

    result = run(fake, invoice_txt)

    assert len(fake.message_bodies()) == 3  # first try + max_retries=2
    assert result.failure is not None and result.failure.kind == "transient"
    assert "HTTP 529" in result.failure.message


def test_permanent_400_fails_one_document_while_the_others_land(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text((FIXTURES / "invoice.txt").read_text() + name)

    def respond(body: dict):
        text = body["messages"][0]["content"][0]["text"]
        if "b.txt" in text:
            return api_error(400, "invalid_request_error", "messages.0.content.0: bad document")
        from claude_fake import ok
        return ok(tool_reply("record_invoice", invoice_input()))

    fake = FakeClaude(respond)
    sink = ListSink()

    summary = extract_paths(client_for(fake), [tmp_path], doc_type="invoice", model=MODEL,
                            sink=sink)

    assert [Path(r.source_path).name for r in sink.results] == ["a.txt", "b.txt", "c.txt"]
    assert [r.ok for r in sink.results] == [True, False, True]
    failed = sink.results[1].failure
    assert failed is not None and failed.kind == "input"
    assert "HTTP 400" in failed.message and "bad document" in failed.message
    assert len(fake.message_bodies()) == 3  # a 400 is not retried
    assert (summary.ok, summary.failed) == (2, 1)
    [gap] = summary.gaps
    assert gap.kind == "input" and gap.source_path.endswith("b.txt")


def test_a_refused_key_stops_sending_and_records_the_rest_as_not_sent(tmp_path: Path) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text(f"invoice {name}")
    fake = FakeClaude([api_error(401, "authentication_error", "invalid x-api-key")])
    sink = ListSink()

    summary = extract_paths(client_for(fake), [tmp_path], doc_type="invoice", model=MODEL,
                            sink=sink)

    assert len(fake.message_bodies()) == 1
    assert summary.failed == 3
    assert all(r.failure is not None and r.failure.kind == "input" for r in sink.results)
    assert "not sent" in sink.results[2].failure.message  # type: ignore[union-attr]


def test_unreadable_file_is_an_input_failure_not_an_exception(tmp_path: Path) -> None:
    (tmp_path / "blob.pdf").write_bytes(b"\x00\x01\x02 not a pdf \xff\xfe")
    (tmp_path / "ok.txt").write_text("Invoice INV-2024-0042")
    fake = FakeClaude([tool_reply("record_invoice", invoice_input())])
    sink = ListSink()

    summary = extract_paths(client_for(fake), [tmp_path], doc_type="invoice", model=MODEL,
                            sink=sink)

    assert (summary.ok, summary.failed) == (1, 1)
    bad = next(r for r in sink.results if not r.ok)
    assert bad.failure is not None and bad.failure.kind == "input"
    assert "not a PDF" in bad.failure.message


def test_a_document_named_twice_is_extracted_once(tmp_path: Path) -> None:
    copy = tmp_path / "copy-of-invoice.txt"
    copy.write_bytes((FIXTURES / "invoice.txt").read_bytes())
    fake = FakeClaude([tool_reply("record_invoice", invoice_input())])

    summary = extract_paths(client_for(fake), [FIXTURES / "invoice.txt", copy, FIXTURES /
                            "invoice.txt"], doc_type="invoice", model=MODEL)

    assert (summary.documents, summary.ok, len(fake.message_bodies())) == (1, 1, 1)


def test_documents_already_stored_are_skipped_unless_redo(invoice_txt: Document) -> None:
    fake = FakeClaude([tool_reply("record_invoice", invoice_input())])
    sink = ListSink(stored=[invoice_txt.doc_id])

    summary = extract_paths(client_for(fake), [FIXTURES / "invoice.txt"], doc_type="invoice",
                            model=MODEL, sink=sink)
    assert (summary.skipped, summary.documents, len(fake.message_bodies())) == (1, 1, 0)

    summary = extract_paths(client_for(fake), [FIXTURES / "invoice.txt"], doc_type="invoice",
                            model=MODEL, sink=sink, redo=True)
    assert (summary.skipped, summary.ok, len(fake.message_bodies())) == (0, 1, 1)


def test_error_messages_never_carry_the_key(invoice_txt: Document) -> None:
    # An (unlikely) error body echoing the key must not reach our messages.
    fake = FakeClaude([api_error(400, "invalid_request_error", f"bad header {KEY}")])

    result = run(fake, invoice_txt)

    assert result.failure is not None
    assert KEY not in result.failure.message
    assert "[redacted]" in result.failure.message
    assert all(KEY not in json.dumps(a.__dict__) for a in result.attempts)
