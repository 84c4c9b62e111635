"""Extract documents one request at a time (the Messages API, synchronously).

:func:`extract_document` drives one :class:`~fieldtrust.extraction.conversation.Conversation`
until it finishes; :func:`extract_paths` runs it over many files, hands each
result to a sink as soon as it is known (so a crash loses at most the
document in flight), and never lets one document's failure stop the others.
The one exception is an API key the API refuses: every further request would
fail the same way, so the rest are recorded as not sent.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import Protocol

import anthropic
from anthropic.types import Message
from fieldtrust.extraction.client import redact
from fieldtrust.extraction.conversation import DEFAULT_LIMITS, Conversation, Limits, kind_for_status
from fieldtrust.extraction.documents import (
    Document,
    doc_id_for,
    expand_paths,
    identify,
    load_document,
)
from fieldtrust.extraction.results import (
    DocumentResult,
    Failure,
    FailureKind,
    RunSummary,
    summarise,
)

from fieldtrust.errors import DocumentError

#: Called after each document: (position, count, result).
Progress = Callable[[int, int, DocumentResult], None]


class Sink(Protocol):
    """Where results go: the store (:class:`~.sink.StoreSink`) or a test's list."""

    def stored(self, doc_ids: Collection[str]) -> set[str]:
        """Which of ``doc_ids`` already have an extraction stored."""
        ...

    def put(self, result: DocumentResult, run_id: str) -> None:
        """Keep one document's result (its rows and its attempts)."""
        ...


def new_run_id() -> str:
    """A fresh id for one `fieldtrust extract` run."""
    return f"run-{uuid.uuid4().hex[:12]}"


def extract_document(
    client: anthropic.Anthropic,
    document: Document,
    *,
    doc_type: str,
    model: str,
    limits: Limits = DEFAULT_LIMITS,
) -> DocumentResult:
    """Extract one document, retrying as :class:`Conversation` decides.

    Parameters
    ----------
    client
        An Anthropic client; its own ``max_retries`` covers transient HTTP
        errors (429, 529, 5xx) with backoff.
    document
        From :func:`fieldtrust.extraction.documents.load_document`.
    doc_type
        ``invoice``, ``receipt`` or ``auto`` (the model picks the tool).
    model
        Model id sent with every request.
    limits
        Token budgets and retry limits.

    Returns
    -------
    DocumentResult
        Never raises for a per-document problem: API errors, refusals and
        replies that keep failing validation come back as a failure.
    """
    conversation = Conversation(document, doc_type=doc_type, model=model, limits=limits)
    while True:
        request = conversation.request()
        try:
            message = client.messages.create(**request)
        except anthropic.APIStatusError as exc:
            kind, text, stops_run = api_failure(exc, client)
            return conversation.fail_api(kind, text, stops_run=stops_run)
        except anthropic.APIConnectionError as exc:
            text = redact(f"could not reach the API at {client.base_url}: {exc}", client)
            return conversation.fail_api("transient", text)
        except (anthropic.APIResponseValidationError, ValueError) as exc:
            # HTTP 200 with a body that is not a message (a proxy's page, a cut-off
            # reply, bytes that do not even decode: JSONDecodeError, UnicodeDecodeError):
            # the server's problem, so this document fails as transient and the run
            # goes on instead of dying with a traceback. The request was built above,
            # outside this try, so a ValueError here comes from reading the reply.
            text = redact(f"the API's reply could not be read: {exc}", client)
            return conversation.fail_api("transient", text)
        if not _is_message(message):
            return conversation.fail_api(
                "transient", "the API's reply was not a message with content; rerun later"
            )
        result = conversation.take(message)
        if result is not None:
            return result


def _is_message(reply: object) -> bool:
    """Whether the SDK gave a message we can judge (it builds one from any JSON, unchecked)."""
    return isinstance(reply, Message) and isinstance(reply.content, list)


def api_failure(
    exc: anthropic.APIStatusError, client: anthropic.Anthropic
) -> tuple[FailureKind, str, bool]:
    """Kind, readable message and whether the run must stop, for an API error."""
    detail = exc.message
    body = exc.body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        detail = f"{error.get('type', 'error')}: {error.get('message', '')}"
    text = redact(f"the API answered HTTP {exc.status_code} ({detail})", client)
    return kind_for_status(exc.status_code), text, exc.status_code in (401, 403)


def unreadable(path: str | os.PathLike[str], doc_id: str, exc: DocumentError) -> DocumentResult:
    """The failed result of a file that could not be turned into a request."""
    hint = "convert the file to PDF, PNG, JPEG or UTF-8 text within the size limits"
    return DocumentResult(doc_id, str(path), None, Failure("input", str(exc), hint), ())


def not_sent(document: Document, reason: str) -> DocumentResult:
    """The failed result of a document skipped because the run had to stop."""
    hint = "fix the API key (ANTHROPIC_API_KEY) and run again"
    return DocumentResult(
        document.doc_id, document.path, None, Failure("input", reason, hint), ()
    )


def identify_files(
    paths: Sequence[str | os.PathLike[str]],
) -> list[tuple[Path, str, DocumentError | None]]:
    """Every file under ``paths`` with its doc_id, or the error reading it.

    Content named twice (a file inside a directory also given, or a copy
    under another name) is kept once, at its first path.
    """
    entries: list[tuple[Path, str, DocumentError | None]] = []
    seen: set[str] = set()  # content hashes (the doc_id's suffix)
    for file in expand_paths(list(paths)):
        try:
            doc_id = identify(file)
        except DocumentError as exc:
            # No content to hash: the path stands in, so two unreadable files stay apart.
            path_hash = hashlib.sha256(str(file.resolve()).encode()).hexdigest()
            entries.append((file, doc_id_for(file, path_hash), exc))
            continue
        content = doc_id.rsplit("-", 1)[-1]
        if content not in seen:
            seen.add(content)
            entries.append((file, doc_id, None))
    return entries


def extract_paths(
    client: anthropic.Anthropic,
    paths: Sequence[str | os.PathLike[str]],
    *,
    doc_type: str,
    model: str,
    limits: Limits = DEFAULT_LIMITS,
    sink: Sink | None = None,
    redo: bool = False,
    run_id: str | None = None,
    progress: Progress | None = None,
) -> RunSummary:
    """Extract every file in ``paths`` (directories expanded), one request at a time.

    Each result goes to ``sink`` as soon as it is known. Documents whose
    content already has an extraction in the sink are skipped unless
    ``redo``. The summary lists every document that failed or was stored
    with a conflict.
    """
    run_id = run_id or new_run_id()
    entries = identify_files(paths)
    readable = [doc_id for _, doc_id, error in entries if error is None]
    done = set() if redo or sink is None else sink.stored(readable)
    todo = [e for e in entries if not (e[2] is None and e[1] in done)]
    results: list[DocumentResult] = []
    stop_reason: str | None = None
    for position, (file, doc_id, error) in enumerate(todo, start=1):
        result = _one(client, file, doc_id, error, stop_reason,
                      doc_type=doc_type, model=model, limits=limits)
        if stop_reason is None and result.failure is not None and result.failure.stops_run:
            stop_reason = f"not sent: the API refused the key ({result.failure.message})"
        if sink is not None:
            sink.put(result, run_id)
        results.append(result)
        if progress is not None:
            progress(position, len(todo), result)
    return summarise(run_id, results, skipped=len(entries) - len(todo))


def _one(
    client: anthropic.Anthropic, file: Path, doc_id: str, error: DocumentError | None,
    stop_reason: str | None, *, doc_type: str, model: str, limits: Limits,
) -> DocumentResult:
    """One document's result: unreadable, not sent, or extracted."""
    if error is not None:
        return unreadable(file, doc_id, error)
    try:
        document = load_document(file)
    except DocumentError as exc:
        return unreadable(file, doc_id, exc)
    if stop_reason is not None:
        return not_sent(document, stop_reason)
    return extract_document(client, document, doc_type=doc_type, model=model, limits=limits)
