"""Write a sample's items to CSV for offline labelling.

The file has the item columns (what the value is and where it came from:
the document's uri, its page and the text excerpt around the value), then
empty label columns a reviewer fills in (verdict, reviewer, corrected_value,
corrected_status, error_type, error_detail, labeled_at: every column the
import reads); ``fieldtrust labels import FILE`` reads it back by
extraction_id and sample_id. The model's stated confidence is left out
unless asked for (``show_confidence``), as on the review page: a reviewer who
sees 0.99 anchors on it.

Spreadsheet programs run a cell that starts with ``=``, ``+``, ``-`` or ``@``
as a formula (CSV injection, OWASP). Text cells are escaped the one reversible
way (:mod:`fieldtrust.store.spreadsheet`), the two key columns, extraction_id
and sample_id, included: ids come from ingested files anyone can write, and
``fieldtrust labels import`` reads every cell so escaped back as written.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pyarrow as pa
from fieldtrust.store.spreadsheet import escape_cell

from fieldtrust.errors import InputError

__all__ = ["ITEM_COLUMNS", "LABEL_COLUMNS", "check_writable", "escape_cell", "write_items_csv"]

ITEM_COLUMNS = (
    "extraction_id",
    "doc_id",
    "doc_type",
    "form_version",
    "field",
    "value",
    "document_uri",
    "page",
    "source_excerpt",
    "cell",
    "inclusion_prob",
    "sample_id",
)
#: Every column ``fieldtrust labels import`` reads, so a filled file imports as written.
LABEL_COLUMNS = (
    "verdict", "reviewer", "corrected_value", "corrected_status", "error_type", "error_detail",
    "labeled_at",
)


def check_writable(path: str | os.PathLike[str]) -> None:
    """Refuse an output path that cannot be written, before anything is drawn.

    Raises
    ------
    InputError
        The folder is missing or not writable, or the path is a folder.
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir() or not folder.is_dir() or not os.access(folder, os.W_OK):
        raise InputError(
            f"cannot write {target}: no writable folder {folder} (or it names a folder);"
            " nothing was drawn"
        )


def write_items_csv(
    items: pa.Table, path: str | os.PathLike[str], *, show_confidence: bool = False
) -> int:
    """Write ``items`` (:func:`~.draw.sample_items`) to ``path``; return the row count.

    ``show_confidence`` adds the stated confidence after the value.

    Raises
    ------
    InputError
        The file cannot be written (a missing folder, no permission, a full disk).
    """
    columns = list(ITEM_COLUMNS)
    if show_confidence:
        columns.insert(columns.index("value") + 1, "confidence")
    missing = [c for c in columns if c not in items.column_names]
    if missing:
        raise InputError(f"items lack column {missing[0]!r}; pass sample_items(...) output")
    rows = items.select(columns).to_pylist()
    try:
        return _write(rows, columns, Path(path))
    except OSError as exc:
        reason = exc.strerror.lower() if exc.strerror else type(exc).__name__
        raise InputError(f"cannot write {path}: {reason}") from exc


def _write(rows: list[dict[str, object]], columns: list[str], path: Path) -> int:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*columns, *LABEL_COLUMNS])
        for row in rows:
            cells = [escape_cell(row[c]) for c in columns]
            writer.writerow(
                [*("" if v is None else v for v in cells), *([""] * len(LABEL_COLUMNS))]
            )
    return len(rows)
