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
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
from fieldtrust.store.files import OutputKind, check_output, file_head, write_output
from fieldtrust.store.spreadsheet import escape_cell

from fieldtrust.errors import InputError

__all__ = [
    "ITEM_COLUMNS", "LABEL_COLUMNS", "SAMPLE_FILE", "check_writable", "escape_cell",
    "write_items_csv",
]

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


def _is_sample_file(path: Path) -> bool:
    """Whether ``path`` is a sample file as fieldtrust wrote it: its header, no label filled in.

    A file a reviewer has started filling in holds their work, so it is not
    replaced without ``--force``.
    """
    first_line = file_head(path).split(b"\n", 1)[0].rstrip(b"\r")
    headers = {show: ",".join([*_item_columns(show), *LABEL_COLUMNS]).encode()
               for show in (False, True)}
    if first_line not in headers.values():
        return False
    if path.stat().st_size > _LARGEST_SAMPLE_FILE:
        return False
    labels = slice(len(_item_columns(first_line == headers[True])), None)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = csv.reader(handle)
            next(rows, None)  # the header
            return not any(any(row[labels]) for row in rows)
    except (OSError, UnicodeDecodeError, csv.Error):
        return False


#: A sample file bigger than this is taken as someone else's (a sample is thousands of rows).
_LARGEST_SAMPLE_FILE = 256 << 20

#: A sample's items for offline labelling, as :func:`write_items_csv` writes them.
SAMPLE_FILE = OutputKind("sample file", _is_sample_file)


def check_writable(
    path: str | os.PathLike[str], kind: OutputKind = SAMPLE_FILE, *, force: bool = False,
    protect: Iterable[str | os.PathLike[str]] = (),
) -> None:
    """Refuse an output of a draw before anything is drawn (``store.files.check_output``).

    Raises
    ------
    InputError
        The folder is missing, the path is a store, its log, a folder or a
        device, or a file that is not an output of ``kind`` fieldtrust wrote
        (without ``force``); nothing was drawn.
    """
    try:
        check_output(path, kind, force=force, protect=protect)
    except InputError as exc:
        raise InputError(str(exc).replace("nothing was written", "nothing was drawn")) from exc


def _item_columns(show_confidence: bool) -> list[str]:
    """The item columns of a sample file, the stated confidence after the value if asked."""
    columns = list(ITEM_COLUMNS)
    if show_confidence:
        columns.insert(columns.index("value") + 1, "confidence")
    return columns


def write_items_csv(
    items: pa.Table, path: str | os.PathLike[str], *, show_confidence: bool = False,
    force: bool = False, protect: Iterable[str | os.PathLike[str]] = (),
) -> int:
    """Write ``items`` (:func:`~.samples.sample_items`) to ``path``; return the row count.

    ``show_confidence`` adds the stated confidence after the value.

    Written by ``store.files.write_output`` (a temporary file renamed into
    place; an existing file only when it is an unfilled sample file, or with
    ``force``; never a path in ``protect``).

    Raises
    ------
    InputError
        The file cannot be written (a missing folder, no permission, a full
        disk), or is refused as above.
    """
    columns = _item_columns(show_confidence)
    missing = [c for c in columns if c not in items.column_names]
    if missing:
        raise InputError(f"items lack column {missing[0]!r}; pass sample_items(...) output")
    rows = items.select(columns).to_pylist()
    write_output(path, lambda temporary: _write(rows, columns, temporary), SAMPLE_FILE,
                 force=force, protect=protect)
    return len(rows)


def _write(rows: list[dict[str, object]], columns: list[str], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*columns, *LABEL_COLUMNS])
        for row in rows:
            cells = [escape_cell(row[c]) for c in columns]
            writer.writerow(
                [*("" if v is None else v for v in cells), *([""] * len(LABEL_COLUMNS))]
            )
