"""A scripted Anthropic API behind httpx2.MockTransport, with recorded-shape responses.

The real ``anthropic`` client talks to it over HTTP semantics (status codes,
retry headers, JSON and JSONL bodies); nothing of fieldtrust is replaced.
Every request is recorded with its parsed JSON body and headers so tests can
assert what was sent.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anthropic
import httpx2
from fieldtrust.extraction.results import DocumentResult

FIXTURES = Path(__file__).parent / "fixtures"
BASE_URL = "https://api.test"
MODEL = "claude-sonnet-4-6"
#: The API key tests use; it must never show up anywhere fieldtrust writes.
KEY = "sk-ant-test-S3CRET-key-0123456789"

Responder = Callable[[dict[str, Any]], httpx2.Response]


def message(
    content: list[dict[str, Any]], stop_reason: str, *, model: str = MODEL,
    stop_details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Messages API response body."""
    body: dict[str, Any] = {
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 1200, "output_tokens": 310},
    }
    if stop_details is not None:
        body["stop_details"] = stop_details
    return body


def tool_reply(
    name: str, tool_input: dict[str, Any], *, text: str | None = None,
    stop_reason: str = "tool_use", tool_id: str = "toolu_01",
) -> dict[str, Any]:
    """A reply calling ``name`` with ``tool_input`` (optionally after a text block)."""
    content: list[dict[str, Any]] = [] if text is None else [{"type": "text", "text": text}]
    content.append({"type": "tool_use", "id": tool_id, "name": name, "input": tool_input})
    return message(content, stop_reason)


def text_reply(text: str, stop_reason: str = "end_turn") -> dict[str, Any]:
    """A reply with text only."""
    return message([{"type": "text", "text": text}], stop_reason)


def ok(body: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json=body, headers={"request-id": "req_01"})


def api_error(status: int, error_type: str, text: str) -> httpx2.Response:
    """An error response as the API sends it; retry-after-ms keeps the SDK's backoff tiny."""
    return httpx2.Response(
        status,
        json={"type": "error", "error": {"type": error_type, "message": text}},
        headers={"retry-after-ms": "1", "request-id": "req_err"},
    )


def entry(value: Any, confidence: float = 0.95, source_text: str = "") -> dict[str, Any]:
    return {"value": value, "confidence": confidence, "source_text": source_text}


def line(description: str, amount: str) -> dict[str, Any]:
    return {"description": description, "amount": amount}


def invoice_input(**overrides: Any) -> dict[str, Any]:
    """A well-formed record_invoice input for fixtures/invoice.txt (880.00 with VAT)."""
    data = {
        "invoice_number": entry("INV-2024-0042", 0.98, "INV-2024-0042"),
        "date": entry("2024-04-01", 0.9, "令和6年4月1日"),
        "vendor": entry("ACME Office Supplies GmbH", 0.97),
        "currency": entry("EUR", 0.99, "EUR"),
        "line_items": {
            "items": [line("Paper A4, 10 boxes", "500.00"), line("Toner cartridge", "300.00")],
            "confidence": 0.93,
        },
        "tax": entry("80.00", 0.92, "80.00"),
        "total": entry("880.00", 0.96, "EUR 880.00"),
        "category": {"value": "office_supplies", "detail": "", "confidence": 0.8,
                     "source_text": ""},
    }
    data.update(overrides)
    return copy.deepcopy(data)


def receipt_input(**overrides: Any) -> dict[str, Any]:
    """A well-formed record_receipt input for fixtures/receipt_no_tax.txt (no tax line)."""
    data = {
        "receipt_number": entry("7781", 0.9),
        "date": entry("2024-05-03", 0.97),
        "vendor": entry("Café Blue", 0.95),
        "currency": entry("EUR", 0.99),
        "line_items": {
            "items": [line("Espresso", "3.20"), line("Croissant", "2.80")], "confidence": 0.9,
        },
        "tax": entry(None, 0.85),
        "total": entry("6.00", 0.97, "EUR  6.00"),
        "category": {"value": "meals", "detail": "", "confidence": 0.9, "source_text": ""},
        "payment_method": entry("card", 0.8, "Paid by card"),
    }
    data.update(overrides)
    return copy.deepcopy(data)


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class FakeClaude:
    """The scripted API.

    ``replies`` answers POST /v1/messages: either a list consumed in order
    (each a response body dict or an ``httpx2.Response``), or a callable
    given the request body. Batches: created batches stay ``in_progress``
    for ``polls_before_end`` retrieves, then end; their results come from
    ``batch_result(custom_id, params)`` (default: the same ``replies``).
    """

    replies: list[Any] | Responder = field(default_factory=list)
    polls_before_end: int = 0
    batch_result: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None
    requests: list[Recorded] = field(default_factory=list)
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)

    # -- transport ------------------------------------------------------------

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.requests.append(Recorded(request.method, path, dict(request.headers), body))
        if request.method == "POST" and path == "/v1/messages":
            return self._reply(body)
        if request.method == "POST" and path == "/v1/messages/batches":
            return self._create_batch(body)
        if request.method == "GET" and path.endswith("/results"):
            return self._results(path.split("/")[-2])
        if request.method == "GET" and path.startswith("/v1/messages/batches/"):
            return self._retrieve(path.split("/")[-1])
        return api_error(404, "not_found_error", f"no route {request.method} {path}")

    def _reply(self, body: dict[str, Any]) -> httpx2.Response:
        if callable(self.replies):
            return self.replies(body)
        if not self.replies:
            raise AssertionError("the test scripted no more replies, but another request came")
        reply = self.replies.pop(0)
        return reply if isinstance(reply, httpx2.Response) else ok(reply)

    # -- batches --------------------------------------------------------------

    def _create_batch(self, body: dict[str, Any]) -> httpx2.Response:
        batch_id = f"msgbatch_{len(self.batches) + 1:02d}"
        self.batches[batch_id] = {"requests": body["requests"], "polls": 0}
        return ok(self._batch_object(batch_id, "in_progress"))

    def _retrieve(self, batch_id: str) -> httpx2.Response:
        if batch_id not in self.batches:
            return api_error(404, "not_found_error", f"no batch {batch_id}")
        record = self.batches[batch_id]
        record["polls"] += 1
        ended = record["polls"] > self.polls_before_end
        return ok(self._batch_object(batch_id, "ended" if ended else "in_progress"))

    def _results(self, batch_id: str) -> httpx2.Response:
        lines = []
        for request in self.batches[batch_id]["requests"]:
            result = self._batch_result(request["custom_id"], request["params"])
            lines.append(json.dumps({"custom_id": request["custom_id"], "result": result}))
        return httpx2.Response(200, content=("\n".join(lines) + "\n").encode())

    def _batch_result(self, custom_id: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.batch_result is not None:
            return self.batch_result(custom_id, params)
        response = self._reply(params)
        if response.status_code != 200:
            return {"type": "errored", "error": json.loads(response.content)}
        return {"type": "succeeded", "message": json.loads(response.content)}

    def _batch_object(self, batch_id: str, status: str) -> dict[str, Any]:
        count = len(self.batches[batch_id]["requests"])
        ended = status == "ended"
        return {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": status,
            "request_counts": {"processing": 0 if ended else count, "succeeded": count if ended
                               else 0, "errored": 0, "canceled": 0, "expired": 0},
            "created_at": "2026-03-02T10:00:00Z",
            "expires_at": "2026-03-03T10:00:00Z",
            "ended_at": "2026-03-02T10:30:00Z" if ended else None,
            "results_url": f"{BASE_URL}/v1/messages/batches/{batch_id}/results" if ended else None,
        }

    # -- what was sent --------------------------------------------------------

    def message_bodies(self) -> list[dict[str, Any]]:
        """Bodies of every POST /v1/messages, in order (retries of the SDK included)."""
        return [r.body for r in self.requests if r.method == "POST" and r.path == "/v1/messages"]

    def batch_creates(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests
                if r.method == "POST" and r.path == "/v1/messages/batches"]


def client_for(
    fake: FakeClaude, *, max_retries: int = 2, api_key: str = KEY
) -> anthropic.Anthropic:
    """The real client, over the fake's transport."""
    return anthropic.Anthropic(
        api_key=api_key,
        base_url=BASE_URL,
        max_retries=max_retries,
        http_client=httpx2.Client(transport=httpx2.MockTransport(fake)),
    )


class ListSink:
    """A sink that keeps results in a list (for tests that do not need the store)."""

    def __init__(self, stored: Collection[str] = ()) -> None:
        self.results: list[DocumentResult] = []
        self.already = set(stored)

    def stored(self, doc_ids: Collection[str]) -> set[str]:
        return self.already & set(doc_ids)

    def put(self, result: DocumentResult, run_id: str) -> None:
        self.results.append(result)
