"""Write a sample's items to CSV for offline labelling.

The file has the item columns, then empty label columns a reviewer fills in
(verdict, reviewer, corrected_value, corrected_status, error_type,
error_detail, labeled_at: every column the import reads); ``fieldtrust
labels import FILE`` reads it back by extraction_id and sample_id.

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


def write_items_csv(items: pa.Table, path: str | os.PathLike[str]) -> int:
    """Write ``items`` (:func:`~.samples.sample_items`) to ``path``; return the row count.

    Raises
    ------
    InputError
        The file cannot be written (a missing folder, no permission, a full disk).
    """
    missing = [c for c in ITEM_COLUMNS if c not in items.column_names]
    if missing:
        raise InputError(f"items lack column {missing[0]!r}; pass sample_items(...) output")
    rows = items.select(list(ITEM_COLUMNS)).to_pylist()
    try:
        return _write(rows, Path(path))
    except OSError as exc:
        reason = exc.strerror.lower() if exc.strerror else type(exc).__name__
        raise InputError(f"cannot write {path}: {reason}") from exc


def _write(rows: list[dict[str, object]], path: Path) -> int:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*ITEM_COLUMNS, *LABEL_COLUMNS])
        for row in rows:
            cells = [escape_cell(row[c]) for c in ITEM_COLUMNS]
            writer.writerow(
                [*("" if v is None else v for v in cells), *([""] * len(LABEL_COLUMNS))]
            )
    return len(rows)
