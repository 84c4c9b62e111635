"""One document's exchange with the model, as a state machine.

:meth:`Conversation.request` gives the next Messages API request;
:meth:`Conversation.take` reads the reply and either finishes the document
(a :class:`DocumentResult`) or extends the conversation for another try. The
synchronous loop and the batch runner both drive this one class, so a
document is judged the same way whichever path it took.

The reply is judged by its ``stop_reason``, never by its text:

========================  ==================================================
``tool_use``              take the tool input (whatever any text block says)
``max_tokens``            the cut-off tool call is never used; retry once
                          with a larger budget, else fail ``truncated``
``end_turn`` and others   no tool call is not success: nudge once, else fail
``refusal``               fail ``refused``; not retried
========================  ==================================================

After a rejected tool call the next user turn carries a ``tool_result`` with
``is_error: true`` for that ``tool_use_id`` (the API requires a result for
every tool call before anything else), holding the validator's message; the
first user turn still holds the document, and the assistant turn holds the
failed extraction, so the model sees all three.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anthropic.types import Message
from fieldtrust.extraction import prompts
from fieldtrust.extraction.documents import Document
from fieldtrust.extraction.results import (
    Attempt,
    DocumentResult,
    Extraction,
    Failure,
    FailureKind,
    Outcome,
)
from fieldtrust.extraction.schemas import (
    MAX_STRICT_UNIONS,
    DocSchema,
    schema_for_tool,
    schemas_for,
    union_count,
)
from fieldtrust.extraction.validate import conflicts, format_problems, line_items_sum
from fieldtrust.store.connection import utc_now

from fieldtrust.errors import InputError


@dataclass(frozen=True)
class Limits:
    """How far the loop goes before it gives up on a document."""

    max_tokens: int = 4096
    #: budget of the one retry after a reply was cut off at ``max_tokens``
    max_tokens_retry: int = 16384
    #: extra attempts after a format problem
    format_retries: int = 2
    #: extra attempts after a conflict; then the conflict is stored, flagged
    conflict_retries: int = 1
    #: extra attempts after a reply without the tool call
    nudges: int = 1
    #: send the tools with ``strict: true`` (guaranteed schema conformance)
    strict: bool = True

    def __post_init__(self) -> None:
        for name in ("max_tokens", "max_tokens_retry"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("format_retries", "conflict_retries", "nudges"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must be 0 or more, got {getattr(self, name)}")


#: The limits used when none are given.
DEFAULT_LIMITS = Limits()

_API_ERROR_KINDS: dict[str, FailureKind] = {
    "invalid_request_error": "input",
    "request_too_large": "input",
    "authentication_error": "input",
    "permission_error": "input",
    "not_found_error": "input",
    "billing_error": "input",
}

_HINTS: dict[FailureKind, str] = {
    "transient": "rerun later: the API stayed busy after the client's retries",
    "input": "check the file opens and is within the size limits, the model id and"
    " ANTHROPIC_API_KEY; the API's message says which",
    "validation": "review the document by hand; the model's replies kept failing the checks"
    " (extraction_log has every attempt)",
    "truncated": "the reply did not fit even the larger budget; split the document or"
    " raise max_tokens",
    "refused": "review this document by hand; the model declined to read it",
}


def kind_for_status(status: int | None) -> FailureKind:
    """The failure kind of an API error: the server's problem or ours."""
    if status is None or status in (408, 409, 429) or status >= 500:
        return "transient"
    return "input"


def kind_for_error_type(error_type: str) -> FailureKind:
    """The failure kind of a batch result's error type."""
    return _API_ERROR_KINDS.get(error_type, "transient")


class Conversation:
    """The state of one document's extraction across attempts."""

    def __init__(
        self,
        document: Document,
        *,
        doc_type: str,
        model: str,
        limits: Limits = DEFAULT_LIMITS,
        state: Mapping[str, Any] | None = None,
    ) -> None:
        self.document = document
        self.doc_type = doc_type
        self.model = model
        self.limits = limits
        self.schemas: tuple[DocSchema, ...] = schemas_for(doc_type)
        state = state or {}
        self.history: list[dict[str, Any]] = list(state.get("history", []))
        self.budget: int = int(state.get("budget", limits.max_tokens))
        self.counts: dict[str, int] = dict(state.get("counts", {}))
        self.attempts: list[Attempt] = [Attempt(**a) for a in state.get("attempts", [])]

    # -- requests -----------------------------------------------------------

    def request(self) -> dict[str, Any]:
        """Keyword arguments of the next ``client.messages.create`` call."""
        first = {
            "role": "user",
            "content": [
                *self.document.blocks,
                {"type": "text", "text": prompts.instruction(self.schemas)},
            ],
        }
        if len(self.schemas) == 1:
            choice = {"type": "tool", "name": self.schemas[0].tool_name}
        else:
            choice = {"type": "any"}
        tools = [s.tool(strict=self.limits.strict) for s in self.schemas]
        if self.limits.strict and union_count(tools) > MAX_STRICT_UNIONS:
            # The API would refuse the request; the validator checks the shape instead.
            tools = [s.tool(strict=False) for s in self.schemas]
        return {
            "model": self.model,
            "max_tokens": self.budget,
            "system": prompts.SYSTEM_PROMPT,
            "tools": tools,
            "tool_choice": {**choice, "disable_parallel_tool_use": True},
            "messages": [first, *self.history],
        }

    def to_state(self) -> dict[str, Any]:
        """JSON-ready state, so a batch run can resume this conversation later."""
        return {
            "history": self.history,
            "budget": self.budget,
            "counts": self.counts,
            "attempts": [dataclasses.asdict(a) for a in self.attempts],
        }

    # -- replies ------------------------------------------------------------

    def take(self, message: Message) -> DocumentResult | None:
        """Judge a reply: the finished result, or None to send :meth:`request` again."""
        stop = message.stop_reason
        if stop == "tool_use":
            return self._take_tool_use(message)
        if stop == "max_tokens":
            return self._take_truncated(message)
        if stop == "refusal":
            details = message.stop_details
            category = f" (category {details.category})" if details and details.category else ""
            self._record(message, None, None, f"refused{category}", "refused")
            return self._fail("refused", f"the model declined to extract this document{category}")
        if stop == "model_context_window_exceeded":
            self._record(message, None, None, "document too long for the context", "failed")
            return self._fail("input", "the document does not fit the model's context window")
        return self._take_no_tool(message)

    def fail_api(
        self, kind: FailureKind, message: str, *, stops_run: bool = False
    ) -> DocumentResult:
        """Finish with a failed request (after the SDK's own retries)."""
        self.attempts.append(
            Attempt(len(self.attempts) + 1, self.model, None, None, None, message, "api_error",
                    created_at=utc_now().isoformat())
        )
        result = self._fail(kind, message)
        if stops_run and result.failure is not None:
            failure = dataclasses.replace(result.failure, stops_run=True)
            return dataclasses.replace(result, failure=failure)
        return result

    def _take_tool_use(self, message: Message) -> DocumentResult | None:
        offered = {s.tool_name for s in self.schemas}
        calls = [b for b in message.content if b.type == "tool_use"]
        call = next((b for b in calls if b.name in offered), None)
        if call is None:
            names = ", ".join(b.name for b in calls) or "none"
            return self._format_failure(message, None, {}, [f"called {names}, not a record tool"])
        schema = schema_for_tool(call.name)
        assert schema is not None  # offered tools all have a schema
        tool_input = dict(call.input) if isinstance(call.input, Mapping) else {}
        problems = format_problems(schema, tool_input)
        if problems:
            return self._format_failure(message, call.name, tool_input, problems)
        found = conflicts(tool_input)
        text = "; ".join(c.message for c in found) or None
        if found and self._bump("conflict") <= self.limits.conflict_retries:
            self._record(message, call.name, tool_input, text, "conflict")
            self._ask_again(message, prompts.conflict_retry([c.message for c in found]))
            return None
        self._record(message, call.name, tool_input, text, "conflict_kept" if found else "accepted")
        flagged: dict[str, str | None] = {}
        for conflict in found:
            for name in conflict.fields:
                flagged[name] = flagged.get(name) or conflict.computed_value
        computed = line_items_sum(tool_input)
        extraction = Extraction(
            doc_type=schema.doc_type,
            model=message.model or self.model,
            tool_input=tool_input,
            computed_total=None if computed is None else format(computed, "f"),
            conflicts=flagged,
            conflict_messages=tuple(c.message for c in found),
        )
        return self._result(extraction, None)

    def _format_failure(
        self, message: Message, tool_name: str | None, tool_input: dict[str, Any],
        problems: list[str],
    ) -> DocumentResult | None:
        text = "; ".join(problems)
        if self._bump("format") > self.limits.format_retries:
            self._record(message, tool_name, tool_input, text, "failed")
            return self._fail(
                "validation",
                f"format problems after {self.limits.format_retries} retries: {text}",
                partial=tool_input or None,
            )
        self._record(message, tool_name, tool_input, text, "format_error")
        self._ask_again(message, prompts.format_retry(problems))
        return None

    def _take_truncated(self, message: Message) -> DocumentResult | None:
        note = f"cut off at max_tokens={self.budget}; the incomplete tool call was discarded"
        if self._bump("truncated") > 1:
            self._record(message, None, None, note, "failed")
            return self._fail("truncated", f"the reply was {note}, twice")
        self._record(message, None, None, note, "truncated")
        # The cut-off turn is not added to the history: its tool call is incomplete.
        self.budget = max(self.limits.max_tokens_retry, self.budget * 2)
        return None

    def _take_no_tool(self, message: Message) -> DocumentResult | None:
        note = f"stop_reason {message.stop_reason} without a tool call"
        if self._bump("no_tool") > self.limits.nudges:
            self._record(message, None, None, note, "failed")
            return self._fail("validation", f"the model answered without calling the tool: {note}")
        self._record(message, None, None, note, "no_tool")
        content = _assistant_content(message)
        if content:
            self.history.append({"role": "assistant", "content": content})
        self.history.append(
            {"role": "user", "content": [{"type": "text", "text": prompts.nudge(self.schemas)}]}
        )
        return None

    # -- helpers ------------------------------------------------------------

    def _ask_again(self, message: Message, feedback: str) -> None:
        """Append the rejected turn and a user turn answering every tool call with an error."""
        content = _assistant_content(message)
        self.history.append({"role": "assistant", "content": content})
        results = [
            {"type": "tool_result", "tool_use_id": block["id"], "is_error": True,
             "content": feedback}
            for block in content
            if block["type"] == "tool_use"
        ]
        self.history.append({"role": "user", "content": results})

    def _bump(self, counter: str) -> int:
        self.counts[counter] = self.counts.get(counter, 0) + 1
        return self.counts[counter]

    def _record(
        self, message: Message, tool_name: str | None, tool_input: dict[str, Any] | None,
        validator_message: str | None, outcome: Outcome,
    ) -> None:
        usage = message.usage
        self.attempts.append(
            Attempt(
                number=len(self.attempts) + 1,
                model=message.model or self.model,
                stop_reason=message.stop_reason,
                tool_name=tool_name,
                tool_input=tool_input,
                validator_message=validator_message,
                outcome=outcome,
                input_tokens=usage.input_tokens if usage else 0,
                output_tokens=usage.output_tokens if usage else 0,
                created_at=utc_now().isoformat(),
            )
        )

    def _fail(
        self, kind: FailureKind, message: str, *, partial: dict[str, Any] | None = None
    ) -> DocumentResult:
        if partial is None:
            partial = next(
                (a.tool_input for a in reversed(self.attempts) if a.tool_input), None
            )
        return self._result(None, Failure(kind, message, _HINTS[kind], partial))

    def _result(self, extraction: Extraction | None, failure: Failure | None) -> DocumentResult:
        return DocumentResult(
            self.document.doc_id, self.document.path, extraction, failure, tuple(self.attempts)
        )


def _assistant_content(message: Message) -> list[dict[str, Any]]:
    """The reply's text and tool_use blocks as request params (other blocks dropped)."""
    content: list[dict[str, Any]] = []
    for block in message.content:
        if block.type == "text" and block.text.strip():
            content.append({"type": "text", "text": block.text})
        elif block.type == "tool_use":
            content.append(
                {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
            )
    return content
