"""Every model call, written to the ``extraction_log`` table.

One row per attempt: its stop reason, the tool it called, the tool input as
canonical JSON, the validator's message and what the loop did with it. This
is what to read when a document failed or was flagged. Nothing about the
request's headers is kept, so the API key cannot end up here.
"""

from __future__ import annotations

import datetime as dt

import duckdb
from fieldtrust.extraction.results import Attempt, DocumentResult
from fieldtrust.extraction.to_rows import canonical_json
from fieldtrust.store.connection import utc_now


def attempt_id(run_id: str, doc_id: str, number: int) -> str:
    """The log id of attempt ``number`` of a document in a run."""
    return f"{run_id}/{doc_id}/{number}"


def write_attempts(con: duckdb.DuckDBPyConnection, result: DocumentResult, *, run_id: str) -> int:
    """Log the attempts of ``result``; attempts logged before are left as they are.

    Returns the number of attempts given (already-logged ones included).
    """
    rows = [_row(result, attempt, run_id) for attempt in result.attempts]
    if rows:
        con.executemany(
            "INSERT OR IGNORE INTO extraction_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    return len(rows)


def _row(result: DocumentResult, attempt: Attempt, run_id: str) -> list[object]:
    created = dt.datetime.fromisoformat(attempt.created_at) if attempt.created_at else utc_now()
    return [
        attempt_id(run_id, result.doc_id, attempt.number),
        run_id,
        result.doc_id,
        result.source_path,
        attempt.number,
        attempt.model,
        attempt.stop_reason,
        attempt.tool_name,
        None if attempt.tool_input is None else canonical_json(attempt.tool_input),
        attempt.validator_message,
        attempt.outcome,
        created,
    ]
