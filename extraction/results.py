"""What one document's extraction came to, and what a whole run came to.

A document ends either ``ok`` (an :class:`Extraction`, possibly flagged with
conflicts for human review) or ``failed`` (a :class:`Failure` saying which
kind, how many attempts were made, the last partial result and what to try).
Nothing here raises: a failure on one document never loses the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

FailureKind = Literal["transient", "validation", "truncated", "refused", "input"]

#: Every failure kind, for docs and summaries.
FAILURE_KINDS: tuple[FailureKind, ...] = (
    "transient", "validation", "truncated", "refused", "input"
)

#: What an attempt led to, as written to extraction_log.outcome.
Outcome = Literal[
    "accepted",  # the tool input passed every check
    "conflict_kept",  # accepted with conflicts that persisted after the retries
    "format_error",  # a format rule broken; asked again
    "conflict",  # values disagree; asked to re-read
    "truncated",  # stopped at max_tokens; the cut-off call is discarded
    "no_tool",  # answered without calling the tool
    "refused",  # stop_reason refusal
    "api_error",  # the request failed (after the SDK's own retries)
    "failed",  # a limit was reached; the document failed
]


@dataclass(frozen=True)
class Attempt:
    """One model call: what came back and what the loop made of it."""

    number: int
    model: str | None
    stop_reason: str | None
    tool_name: str | None
    tool_input: dict[str, Any] | None
    validator_message: str | None
    outcome: Outcome
    input_tokens: int = 0
    output_tokens: int = 0
    #: when the reply was judged, naive UTC in ISO format (JSON-friendly for manifests)
    created_at: str = ""


@dataclass(frozen=True)
class Extraction:
    """An accepted tool input, with the code's checks of it."""

    doc_type: str
    model: str
    tool_input: dict[str, Any]
    computed_total: str | None
    #: field -> the code's conflicting figure (or None), for fields flagged for review
    conflicts: dict[str, str | None] = field(default_factory=dict)
    conflict_messages: tuple[str, ...] = ()

    @property
    def has_conflict(self) -> bool:
        return bool(self.conflicts)


@dataclass(frozen=True)
class Failure:
    """Why a document has no extraction, and what to try next."""

    kind: FailureKind
    message: str
    hint: str
    #: the last tool input received, unvalidated, when there was one
    partial: dict[str, Any] | None = None
    #: the API refused the credentials: every further request would fail the same way
    stops_run: bool = False


@dataclass(frozen=True)
class DocumentResult:
    """The outcome for one document: an extraction or a failure, and every attempt."""

    doc_id: str
    source_path: str
    extraction: Extraction | None
    failure: Failure | None
    attempts: tuple[Attempt, ...]

    @property
    def ok(self) -> bool:
        return self.extraction is not None

    @property
    def status(self) -> str:
        if self.extraction is None:
            return f"failed ({self.failure.kind if self.failure else 'unknown'})"
        return "ok, flagged" if self.extraction.has_conflict else "ok"


@dataclass(frozen=True)
class Gap:
    """A document the run could not extract, or stored only with a conflict flag."""

    doc_id: str
    source_path: str
    kind: str  # a FailureKind, or "conflict"
    message: str
    hint: str


@dataclass(frozen=True)
class RunSummary:
    """Counts of a run and the gaps a person should look at."""

    run_id: str
    documents: int
    ok: int
    flagged: int
    failed: int
    pending: int
    skipped: int
    attempts: int
    input_tokens: int
    output_tokens: int
    gaps: tuple[Gap, ...]
    results: tuple[DocumentResult, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``fieldtrust extract --json`` prints): the counts and the gaps,
        not the per-document results."""
        counts = {k: v for k, v in dataclasses.asdict(self).items() if k not in ("gaps", "results")}
        return {**counts, "gaps": [dataclasses.asdict(g) for g in self.gaps]}


def summarise(
    run_id: str, results: Sequence[DocumentResult], *, pending: int = 0, skipped: int = 0
) -> RunSummary:
    """Fold per-document results into a :class:`RunSummary`.

    ``pending`` counts documents still inside an unfinished batch; ``skipped``
    those left alone because the store already holds their extraction.
    """
    gaps: list[Gap] = []
    for result in results:
        if result.failure is not None:
            gaps.append(
                Gap(result.doc_id, result.source_path, result.failure.kind,
                    result.failure.message, result.failure.hint)
            )
        elif result.extraction is not None and result.extraction.has_conflict:
            gaps.append(
                Gap(result.doc_id, result.source_path, "conflict",
                    "; ".join(result.extraction.conflict_messages),
                    "stored with conflict=true; review the flagged fields")
            )
    attempts = [a for r in results for a in r.attempts]
    return RunSummary(
        run_id=run_id,
        documents=len(results) + pending + skipped,
        ok=sum(1 for r in results if r.ok),
        flagged=sum(1 for r in results if r.extraction is not None and r.extraction.has_conflict),
        failed=sum(1 for r in results if not r.ok),
        pending=pending,
        skipped=skipped,
        attempts=len(attempts),
        input_tokens=sum(a.input_tokens for a in attempts),
        output_tokens=sum(a.output_tokens for a in attempts),
        gaps=tuple(gaps),
        results=tuple(results),
    )
