"""Write a sample's items to CSV for offline labelling.

The file has the item columns, then empty label columns a reviewer fills in
(verdict, reviewer, corrected_value, corrected_status, error_type,
error_detail, labeled_at: every column the import reads); ``fieldtrust
labels import FILE`` reads it back by extraction_id and sample_id.

Spreadsheet programs run a cell that starts with ``=``, ``+``, ``-`` or ``@``
as a formula (CSV injection, OWASP). Every text cell that starts so, or with a
tab or carriage return, gets a leading single quote, which spreadsheets show
as text. That includes the two key columns, extraction_id and sample_id: ids
come from ingested files anyone can write, and ``fieldtrust labels import``
reads an id so escaped back as the id itself (store.label_import).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pyarrow as pa

ITEM_COLUMNS = (
    "extraction_id",
    "doc_id",
    "doc_type",
    "form_version",
    "field",
    "value",
    "confidence",
    "cell",
    "inclusion_prob",
    "sample_id",
)
#: Every column ``fieldtrust labels import`` reads, so a filled file imports as written.
LABEL_COLUMNS = (
    "verdict", "reviewer", "corrected_value", "corrected_status", "error_type", "error_detail",
    "labeled_at",
)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def escape_cell(value: object) -> object:
    """``value`` with a leading ``'`` when it is text a spreadsheet would run as a formula."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


def write_items_csv(items: pa.Table, path: str | os.PathLike[str]) -> int:
    """Write ``items`` (:func:`~.draw.sample_items`) to ``path``; return the row count."""
    missing = [c for c in ITEM_COLUMNS if c not in items.column_names]
    if missing:
        raise ValueError(f"items lack column {missing[0]!r}; pass sample_items(...) output")
    rows = items.select(list(ITEM_COLUMNS)).to_pylist()
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*ITEM_COLUMNS, *LABEL_COLUMNS])
        for row in rows:
            cells = [escape_cell(row[c]) for c in ITEM_COLUMNS]
            writer.writerow(
                [*("" if v is None else v for v in cells), *([""] * len(LABEL_COLUMNS))]
            )
    return len(rows)
