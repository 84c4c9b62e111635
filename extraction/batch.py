"""Extract many documents through the Message Batches API (half the price, asynchronous).

The same :class:`~fieldtrust.extraction.conversation.Conversation` judges every reply
as in the synchronous loop; what differs is the transport. A round submits
every document that needs a request as one batch (split when large), polls
until the batch ends, collects its results, and stores the finished
documents. Documents that need another attempt (a format retry, a conflict
re-read, a larger budget) go into the next round's batch, carrying their
conversation from the manifest.

Every state change is written to the manifest (:mod:`fieldtrust.extraction.manifest`),
so an interrupted run resumes from it: finished documents are not
resubmitted, a batch still running is polled rather than sent again. The
one loss window is between creating a batch and saving the manifest: a
crash there sends those documents again on resume.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anthropic
from anthropic.types.messages import MessageBatchIndividualResponse
from fieldtrust.extraction.client import redact
from fieldtrust.extraction.conversation import (
    DEFAULT_LIMITS,
    Conversation,
    Limits,
    kind_for_error_type,
)
from fieldtrust.extraction.documents import Document, load_document
from fieldtrust.extraction.loop import Sink, api_failure, identify_files, new_run_id, unreadable
from fieldtrust.extraction.manifest import (
    batches_in_progress,
    check_matches,
    documents_in,
    load_manifest,
    new_manifest,
    save_manifest,
)
from fieldtrust.extraction.results import DocumentResult, FailureKind, Gap, RunSummary, summarise

from fieldtrust.errors import DocumentError

#: Called with one line describing what the run is doing.
BatchProgress = Callable[[str], None]

#: The API takes up to 100,000 requests or 256 MB per batch; stay well under both.
MAX_BATCH_REQUESTS = 10_000
MAX_BATCH_BYTES = 200 * 1024 * 1024

#: Times a document is sent again after its batch request expired or hit a server error.
MAX_RESUBMITS = 1


class _Run:
    """One invocation of :func:`run_batch`: the manifest and what it talks to."""

    def __init__(
        self, client: anthropic.Anthropic, manifest: dict[str, Any], path: str | os.PathLike[str],
        *, limits: Limits, sink: Sink | None, progress: BatchProgress,
    ) -> None:
        self.client = client
        self.manifest = manifest
        self.path = path
        self.limits = limits
        self.sink = sink
        self.say = progress
        self.finished: list[DocumentResult] = []

    @property
    def run_id(self) -> str:
        return str(self.manifest["run_id"])

    def save(self) -> None:
        save_manifest(self.path, self.manifest)

    # -- documents ----------------------------------------------------------

    def add(self, paths: Sequence[str | os.PathLike[str]], *, redo: bool) -> int:
        """Add files not yet in the manifest; return how many were skipped as stored."""
        docs = self.manifest["documents"]
        retried = 0
        for entry in docs.values():
            # A document that failed last time is tried again on a rerun (a
            # transient outage or a fixed file), with a fresh conversation.
            if entry["state"] == "done" and (entry["outcome"] or {}).get("status") == "failed":
                entry.update(state="pending", batch_id=None, custom_id=None, resubmits=0,
                             conversation={}, outcome=None)
                retried += 1
        if retried:
            self.say(f"retrying {retried} document{'s' if retried > 1 else ''} that failed before")
        new = [e for e in identify_files(paths) if e[1] not in docs]
        readable = [doc_id for _, doc_id, error in new if error is None]
        stored = set() if redo or self.sink is None else self.sink.stored(readable)
        for file, doc_id, error in new:
            if doc_id in stored:
                continue
            docs[doc_id] = {
                "path": str(file), "index": len(docs), "state": "pending", "batch_id": None,
                "custom_id": None, "resubmits": 0, "conversation": {}, "outcome": None,
            }
            if error is not None:
                self.finish(doc_id, unreadable(file, doc_id, error), {})
        self.save()
        return sum(1 for e in new if e[1] in stored)

    def conversation(self, doc_id: str, document: Document | None = None) -> Conversation:
        entry = self.manifest["documents"][doc_id]
        stub = document or Document(doc_id, entry["path"], "", "", ())
        return Conversation(
            stub, doc_type=self.manifest["doc_type"], model=self.manifest["model"],
            limits=self.limits, state=entry["conversation"],
        )

    def finish(self, doc_id: str, result: DocumentResult, state: dict[str, Any]) -> None:
        """Store a finished document and mark it done."""
        if self.sink is not None:
            self.sink.put(result, self.run_id)
        entry = self.manifest["documents"][doc_id]
        entry.update(state="done", conversation=state, outcome=_outcome(result))
        self.finished.append(result)
        self.say(f"{Path(entry['path']).name}: {result.status}")

    # -- submitting ---------------------------------------------------------

    def submit_pending(self) -> bool:
        """Send every pending document; False when the API could not take a batch."""
        requests: list[tuple[str, dict[str, Any]]] = []
        for doc_id in documents_in(self.manifest, "pending"):
            request = self._request(doc_id)
            if request is not None:
                requests.append((doc_id, request))
        return all(self._submit(chunk) for chunk in _chunks(requests))

    def _request(self, doc_id: str) -> dict[str, Any] | None:
        entry = self.manifest["documents"][doc_id]
        try:
            document = load_document(entry["path"])
            if document.doc_id != doc_id:
                raise DocumentError(f"{entry['path']}: the file changed since this run began")
        except DocumentError as exc:
            conversation = self.conversation(doc_id)
            self.finish(doc_id, unreadable(entry["path"], doc_id, exc), conversation.to_state())
            self.save()
            return None
        return self.conversation(doc_id, document).request()

    def _submit(self, chunk: list[tuple[str, dict[str, Any]]]) -> bool:
        docs = self.manifest["documents"]
        # custom_id must match ^[a-zA-Z0-9_-]{1,64}$; doc ids may hold dots, so use the index.
        custom = {
            doc_id: f"doc{docs[doc_id]['index']}-a{_attempts(docs[doc_id]) + 1}"
            for doc_id, _ in chunk
        }
        try:
            batch = self.client.messages.batches.create(
                requests=[
                    {"custom_id": custom[d], "params": r}  # type: ignore[typeddict-item]
                    for d, r in chunk
                ]
            )
        except anthropic.APIStatusError as exc:
            kind, text, _ = api_failure(exc, self.client)
            if kind == "transient":
                self.say(f"could not submit a batch ({text}); resume later with the same manifest")
                return False
            for doc_id, _ in chunk:
                conversation = self.conversation(doc_id)
                self.finish(doc_id, conversation.fail_api(kind, text), conversation.to_state())
            self.save()
            return True
        except anthropic.APIConnectionError as exc:
            self.say(redact(f"could not reach the API at {self.client.base_url} ({exc});"
                            " resume later", self.client))
            return False
        self.manifest["batches"][batch.id] = {
            "state": "in_progress",
            "created_at": batch.created_at.isoformat(),
            "custom_ids": {custom[d]: d for d, _ in chunk},
        }
        for doc_id, _ in chunk:
            docs[doc_id].update(state="submitted", batch_id=batch.id, custom_id=custom[doc_id])
        self.save()
        self.say(f"submitted batch {batch.id} with {len(chunk)} documents")
        return True

    # -- collecting ---------------------------------------------------------

    def poll(self, batch_id: str) -> None:
        """Check one batch; collect its results when it has ended."""
        try:
            batch = self.client.messages.batches.retrieve(batch_id)
        except (anthropic.APIStatusError, anthropic.APIConnectionError) as exc:
            self.say(redact(f"batch {batch_id}: could not check it at {self.client.base_url}"
                            f" ({exc}); will try again", self.client))
            return
        counts = batch.request_counts
        if batch.processing_status != "ended":
            self.say(
                f"batch {batch_id}: {batch.processing_status}, {counts.processing} processing,"
                f" {counts.succeeded} succeeded, {counts.errored} errored"
            )
            return
        record = self.manifest["batches"][batch_id]
        for response in self.client.messages.batches.results(batch_id):
            doc_id = record["custom_ids"].get(response.custom_id)
            entry = self.manifest["documents"].get(doc_id) if doc_id else None
            if entry is None or (entry["state"], entry["custom_id"]) != (
                "submitted", response.custom_id
            ):
                continue  # stale: this document was settled before an interruption
            self._take(str(doc_id), response)
        for doc_id in record["custom_ids"].values():
            entry = self.manifest["documents"][doc_id]
            if entry["state"] == "submitted" and entry["batch_id"] == batch_id:
                self._resubmit_or_fail(doc_id, "transient", "the batch returned no result for it")
        record["state"] = "collected"
        self.save()

    def _take(self, doc_id: str, response: MessageBatchIndividualResponse) -> None:
        result = response.result
        if result.type == "succeeded":
            conversation = self.conversation(doc_id)
            outcome = conversation.take(result.message)
            if outcome is None:
                self._pending(doc_id, conversation.to_state())
            else:
                self.finish(doc_id, outcome, conversation.to_state())
        elif result.type == "errored":
            error = result.error.error
            message = redact(f"batch request failed ({error.type}: {error.message})", self.client)
            self._resubmit_or_fail(doc_id, kind_for_error_type(error.type), message)
        else:
            self._resubmit_or_fail(doc_id, "transient", f"the batch request was {result.type}")

    def _resubmit_or_fail(self, doc_id: str, kind: FailureKind, message: str) -> None:
        entry = self.manifest["documents"][doc_id]
        if kind == "transient" and entry["resubmits"] < MAX_RESUBMITS:
            entry["resubmits"] += 1
            self._pending(doc_id, entry["conversation"])
            return
        conversation = self.conversation(doc_id)
        failed = conversation.fail_api(kind, message)
        self.finish(doc_id, failed, conversation.to_state())

    def _pending(self, doc_id: str, state: dict[str, Any]) -> None:
        self.manifest["documents"][doc_id].update(
            state="pending", batch_id=None, custom_id=None, conversation=state
        )

    # -- summary ------------------------------------------------------------

    def summary(self, skipped: int) -> RunSummary:
        """The run so far, from the manifest (documents finished in earlier sessions too)."""
        docs = self.manifest["documents"].values()
        done = [e for e in docs if e["state"] == "done"]
        gaps = [_gap(d, e) for d, e in self.manifest["documents"].items() if e["state"] == "done"]
        attempts = [a for e in docs for a in e["conversation"].get("attempts", [])]
        this_session = summarise(self.run_id, self.finished)
        return RunSummary(
            run_id=self.run_id,
            documents=len(self.manifest["documents"]) + skipped,
            ok=sum(1 for e in done if e["outcome"]["status"] in ("ok", "flagged")),
            flagged=sum(1 for e in done if e["outcome"]["status"] == "flagged"),
            failed=sum(1 for e in done if e["outcome"]["status"] == "failed"),
            pending=len(docs) - len(done),
            skipped=skipped,
            attempts=len(attempts),
            input_tokens=sum(a.get("input_tokens", 0) for a in attempts),
            output_tokens=sum(a.get("output_tokens", 0) for a in attempts),
            gaps=tuple(g for g in gaps if g is not None),
            results=this_session.results,
        )


def run_batch(
    client: anthropic.Anthropic,
    paths: Sequence[str | os.PathLike[str]],
    *,
    manifest_path: str | os.PathLike[str],
    doc_type: str,
    model: str,
    limits: Limits = DEFAULT_LIMITS,
    sink: Sink | None = None,
    redo: bool = False,
    poll_interval: float = 60.0,
    wait: float | None = None,
    progress: BatchProgress | None = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> RunSummary:
    """Extract ``paths`` with the Message Batches API, resuming from ``manifest_path``.

    Parameters
    ----------
    client
        An Anthropic client.
    paths
        Files and directories; files already in the manifest are not added
        again, and files whose content the sink already stored are skipped
        unless ``redo``.
    manifest_path
        The run's manifest; created when missing, resumed when present (it
        must be for the same ``doc_type`` and ``model``).
    poll_interval
        Seconds between checks of a running batch.
    wait
        Give up waiting after this many seconds (None: until every batch has
        ended). The manifest keeps the state; run again to resume.
    sleep, clock
        Injected so tests need not wait.

    Returns
    -------
    RunSummary
        For the whole manifest; ``pending`` counts documents still in a batch.

    Raises
    ------
    InputError
        The manifest is unreadable or was made for another type or model.
    """
    manifest_file = Path(manifest_path)
    if manifest_file.exists():
        manifest = load_manifest(manifest_file)
        check_matches(manifest, manifest_file, doc_type=doc_type, model=model)
    else:
        manifest = new_manifest(run_id=new_run_id(), doc_type=doc_type, model=model)
    run = _Run(client, manifest, manifest_file, limits=limits, sink=sink,
               progress=progress or _silent)
    skipped = run.add(paths, redo=redo)
    deadline = None if wait is None else clock() + wait
    while run.submit_pending():
        for batch_id in batches_in_progress(manifest):
            run.poll(batch_id)
        if documents_in(manifest, "pending"):
            continue  # retries found while collecting go out at once
        if not batches_in_progress(manifest):
            break
        if deadline is not None and clock() >= deadline:
            run.say(f"stopped waiting; resume with --manifest {manifest_file}")
            break
        sleep(poll_interval)
    return run.summary(skipped)


def _silent(line: str) -> None:
    """The default progress callback: report nothing."""


def _chunks(
    requests: list[tuple[str, dict[str, Any]]],
) -> list[list[tuple[str, dict[str, Any]]]]:
    """Split requests into batches under the API's count and size limits."""
    chunks: list[list[tuple[str, dict[str, Any]]]] = []
    size = 0
    for item in requests:
        item_size = len(json.dumps(item[1]))
        full = len(chunks[-1]) >= MAX_BATCH_REQUESTS if chunks else True
        if full or size + item_size > MAX_BATCH_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += item_size
    return chunks


def _attempts(entry: dict[str, Any]) -> int:
    return len(entry["conversation"].get("attempts", []))


def _outcome(result: DocumentResult) -> dict[str, Any]:
    if result.failure is not None:
        f = result.failure
        return {"status": "failed", "kind": f.kind, "message": f.message, "hint": f.hint}
    extraction = result.extraction
    if extraction is not None and extraction.has_conflict:
        return {"status": "flagged", "kind": "conflict",
                "message": "; ".join(extraction.conflict_messages),
                "hint": "stored with conflict=true; review the flagged fields"}
    return {"status": "ok"}


def _gap(doc_id: str, entry: dict[str, Any]) -> Gap | None:
    outcome = entry["outcome"]
    if outcome is None or outcome["status"] == "ok":
        return None
    return Gap(doc_id, entry["path"], outcome["kind"], outcome["message"], outcome["hint"])
