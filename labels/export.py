"""Export every label with its history, to CSV or Parquet (chosen by extension).

Every row of ``labels`` is written, superseded ones included, with
``superseded_by`` (the label that replaced it, if any), ``effective`` (true
for the one verdict ``effective_labels`` uses) and the extraction's stratum
(doc_type, field, form_version).

CSV only: a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab, a
carriage return or a single quote is written with a leading single quote
(``'=SUM(A1)``), so a spreadsheet opening the file shows the text instead of
running it as a formula (OWASP "CSV injection",
:mod:`fieldtrust.store.spreadsheet`). ``labels import`` undoes it: the CSV
imports as written, ``-12.50`` back as ``-12.50``. Parquet keeps every value
exactly.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
from fieldtrust.store.connection import is_no_space, no_space_error
from fieldtrust.store.retry import first_row
from fieldtrust.store.spreadsheet import escape_sql
from fieldtrust.store.sql import quote_ident, quote_literal

from fieldtrust.errors import InputError

_COLUMNS = (
    ("label_id", True), ("extraction_id", True), ("sample_id", True),
    ("doc_type", True), ("field", True), ("form_version", True),
    ("verdict", True), ("corrected_value", True), ("corrected_status", True),
    ("error_type", True), ("error_detail", True), ("reviewer", True),
    ("review_round", True), ("labeled_at", False), ("supersedes", True),
    ("superseded_by", True), ("effective", False), ("import_batch_id", True),
)

_HISTORY_SQL = """
SELECT l.label_id, l.extraction_id, l.sample_id, e.doc_type, e.field, e.form_version,
       l.verdict, l.corrected_value, l.corrected_status, l.error_type, l.error_detail,
       l.reviewer, l.review_round, l.labeled_at, l.supersedes,
       s.label_id AS superseded_by,
       l.label_id IN (SELECT label_id FROM effective_labels) AS effective,
       l.import_batch_id
FROM labels l
LEFT JOIN labels s ON s.supersedes = l.label_id
LEFT JOIN (SELECT DISTINCT ON (extraction_id) extraction_id, doc_type, field, form_version
           FROM extractions) e ON e.extraction_id = l.extraction_id
ORDER BY l.extraction_id, l.labeled_at, l.label_id
"""

def export_labels(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str]) -> int:
    """Write all labels with history to ``path`` (``.csv`` or ``.parquet``); return the row count.

    Raises
    ------
    InputError
        The extension is neither ``.csv`` nor ``.parquet``, or the file cannot
        be written.
    NoSpaceError
        The disk is full.
    """
    target = Path(path)
    suffix = target.suffix.lower()
    if suffix == ".csv":
        columns = ", ".join(
            f"{escape_sql(quote_ident(name))} AS {quote_ident(name)}" if text
            else quote_ident(name)
            for name, text in _COLUMNS
        )
        query = f"SELECT {columns} FROM ({_HISTORY_SQL})"
        options = "FORMAT csv, HEADER true"
    elif suffix == ".parquet":
        query = _HISTORY_SQL
        options = "FORMAT parquet"
    else:
        raise InputError(f"cannot export labels to {target.name}: use a .csv or .parquet file")
    # COPY cannot bind its file name; quote_literal is the one sanctioned way.
    try:
        con.execute(f"COPY ({query}) TO {quote_literal(str(target))} ({options})")
    except duckdb.IOException as exc:
        if is_no_space(exc):
            raise no_space_error(str(target), exc) from exc
        raise InputError(
            f"cannot write {target}: {str(exc).splitlines()[0][:200]}"
        ) from exc
    row = first_row(con.execute("SELECT count(*) FROM labels").fetchall())
    return int(row[0]) if row else 0
