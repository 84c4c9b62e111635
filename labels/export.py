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
from fieldtrust.store.files import OutputKind, file_head, store_files, write_output
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

def export_labels(
    con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], *, force: bool = False
) -> int:
    """Write all labels with history to ``path`` (``.csv`` or ``.parquet``); return the row count.

    The file is written by ``store.files.write_output``: through a temporary
    file renamed into place, never over the store, and over an existing file
    only when it is an earlier labels export or ``force`` is set.

    Raises
    ------
    InputError
        The extension is neither ``.csv`` nor ``.parquet``; the path is a
        store, a folder, a device or another file (without ``force``); or the
        file cannot be written.
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
        kind = LABELS_CSV
    elif suffix == ".parquet":
        query = _HISTORY_SQL
        options = "FORMAT parquet"
        kind = LABELS_PARQUET
    else:
        raise InputError(f"cannot export labels to {target.name}: use a .csv or .parquet file")

    def copy(temporary: Path) -> None:
        # COPY cannot bind its file name; quote_literal is the one sanctioned way.
        con.execute(f"COPY ({query}) TO {quote_literal(str(temporary))} ({options})")

    write_output(target, copy, kind, force=force, protect=store_files(con))
    row = first_row(con.execute("SELECT count(*) FROM labels").fetchall())
    return int(row[0]) if row else 0


_NAMES = [name for name, _ in _COLUMNS]


def _is_labels_csv(path: Path) -> bool:
    return file_head(path).split(b"\n", 1)[0].rstrip(b"\r") == ",".join(_NAMES).encode()


def _is_labels_parquet(path: Path) -> bool:
    import pyarrow.parquet as pq

    if file_head(path, 4) != b"PAR1":
        return False
    try:
        return list(pq.read_schema(path).names) == _NAMES
    except (OSError, ValueError):  # pyarrow's ArrowInvalid is a ValueError
        return False


#: A labels export, as :func:`export_labels` writes it (CSV, Parquet).
LABELS_CSV = OutputKind("labels export", _is_labels_csv)
LABELS_PARQUET = OutputKind("labels export", _is_labels_parquet)
