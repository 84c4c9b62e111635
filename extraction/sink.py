"""Keeping results in the store: rows through the validated ingest path, attempts in the log.

:func:`store_result` writes one document's result: its attempts to
``extraction_log`` and, when it was accepted, its rows through
:func:`fieldtrust.ingest.extractions.ingest_table` (the same checks as an ingested file).
:class:`StoreSink` opens the store only for each write, because DuckDB locks
the file per process and an extraction run (a batch can take hours) must not
lock reviewers out of the dashboard.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import TypedDict

import duckdb
from fieldtrust.extraction.documents import media_type_of
from fieldtrust.extraction.locate import Located, locate_fields
from fieldtrust.extraction.log import write_attempts
from fieldtrust.extraction.results import DocumentResult
from fieldtrust.extraction.to_rows import extraction_rows, quotes
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.store.connection import open_store, utc_now
from fieldtrust.store.locations import relative_uri


def store_result(
    con: duckdb.DuckDBPyConnection,
    result: DocumentResult,
    *,
    run_id: str,
    form_version: str | None = None,
    extracted_at: dt.datetime | None = None,
    documents_root: str | os.PathLike[str] | None = None,
) -> int:
    """Log ``result``'s attempts and store its rows; return the rows added.

    With ``documents_root`` the rows say where they came from: the document's
    uri (relative to the root when the file is inside it), each field's page,
    and for a PDF with a text layer the box of the field's quoted text.

    A failed document adds no rows (the failure is in the log and the run's
    summary). Rows already stored (same extraction_id) are skipped, so
    storing the same result twice adds nothing.
    """
    # Two steps, not one transaction: ingest_table opens its own, and both
    # writes are idempotent (log ids and extraction ids are deterministic), so
    # storing again after an interruption between them completes the job.
    write_attempts(con, result, run_id=run_id)
    if result.extraction is None:
        return 0
    table = extraction_rows(
        result.extraction,
        run_id=run_id,
        doc_id=result.doc_id,
        extracted_at=extracted_at or utc_now(),
        form_version=form_version,
        **_locations(result, documents_root),
    )
    source = f"extract {run_id} {result.doc_id}"
    return ingest_table(con, table, source=source, fmt="extract").rows_added


class _Locations(TypedDict, total=False):
    """The keyword arguments of :func:`extraction_rows` that say where rows came from."""

    document_uri: str | None
    located: Mapping[str, Located] | None


def _locations(result: DocumentResult, root: str | os.PathLike[str] | None) -> _Locations:
    """``document_uri`` and ``located`` for :func:`extraction_rows` (empty without a root)."""
    if root is None or result.extraction is None:
        return {}
    wanted = quotes(result.extraction)
    located: dict[str, Located] = {}
    try:
        data = Path(result.source_path).read_bytes()
    except OSError:
        data = b""  # moved since it was read: the pages the model gave are still known
    if data:
        located = locate_fields(data, media_type_of(data), wanted, doc_id=result.doc_id)
    else:
        located = {f: Located(p, None) for f, (p, _) in wanted.items()}
    return {"document_uri": relative_uri(result.source_path, root), "located": located}


def stored_doc_ids(con: duckdb.DuckDBPyConnection, doc_ids: Collection[str]) -> set[str]:
    """Which of ``doc_ids`` already have rows in ``extractions``."""
    if not doc_ids:
        return set()
    rows = con.sql(
        "SELECT DISTINCT doc_id FROM extractions WHERE doc_id IN (SELECT unnest(?::VARCHAR[]))",
        params=[list(doc_ids)],
    ).fetchall()
    return {str(doc_id) for (doc_id,) in rows}


class StoreSink:
    """Writes each result to the store file at ``path``, holding it only while writing."""

    def __init__(
        self, path: str | os.PathLike[str], *, form_version: str | None = None,
        documents_root: str | os.PathLike[str] | None = None,
    ) -> None:
        self.path = path
        self.form_version = form_version
        self.documents_root = documents_root

    def stored(self, doc_ids: Collection[str]) -> set[str]:
        """Which of ``doc_ids`` already have rows in the store."""
        with open_store(self.path) as con:
            return stored_doc_ids(con, doc_ids)

    def put(self, result: DocumentResult, run_id: str) -> None:
        """Store one document's result (see :func:`store_result`)."""
        with open_store(self.path) as con:
            store_result(con, result, run_id=run_id, form_version=self.form_version,
                         documents_root=self.documents_root)
