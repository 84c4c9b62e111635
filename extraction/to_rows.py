"""An accepted extraction as store rows: one row per top-level field.

Each field of the schema becomes one row with the model's stated confidence,
so calibration and audits work per (doc_type, field). How values map:

* a value -> ``value_status`` ``present`` and the value;
* ``null`` -> ``null`` with no value (the document has no such field);
* ``"unclear"`` -> ``unclear`` with no value (there but unreadable);
* category ``"other"`` -> ``other`` with the model's detail as the value.

Line items are one row, field ``line_items``: the value is the items as
canonical JSON (sorted keys, no spaces), so a reviewer judges the list as a
whole and it has one confidence like every other field. The total computed
from them is not a row of its own (the code computed it, the model stated no
confidence for it); when it disagrees with the stated total, it is kept in
``conflict_value`` of the ``total`` and ``line_items`` rows, both flagged
``conflict = true``.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
from fieldtrust.extraction.results import Extraction
from fieldtrust.extraction.schemas import SCHEMAS, UNCLEAR, FieldSpec

#: Columns of the rows, as store.ingest.ingest_table takes them.
ROW_SCHEMA = pa.schema(
    [
        ("extraction_id", pa.string()),
        ("doc_id", pa.string()),
        ("doc_type", pa.string()),
        ("form_version", pa.string()),
        ("field", pa.string()),
        ("value", pa.string()),
        ("value_status", pa.string()),
        ("confidence", pa.float64()),
        ("model", pa.string()),
        ("extracted_at", pa.timestamp("us")),
        ("conflict", pa.bool_()),
        ("conflict_value", pa.string()),
        ("source_excerpt", pa.string()),
    ]
)

#: form_version stored when the run was not told one.
UNKNOWN_FORM_VERSION = "unknown"


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: equal content, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def extraction_id(run_id: str, doc_id: str, field: str) -> str:
    """The id of one field's row: the same run, document and field give the same id."""
    return f"{run_id}/{doc_id}/{field}"


def value_and_status(spec: FieldSpec, entry: Mapping[str, Any]) -> tuple[str | None, str]:
    """The stored value and value_status of one field's tool-input object."""
    if spec.kind == "line_items":
        items = entry.get("items")
        return (canonical_json(items), "present") if items else (None, "null")
    value = entry.get("value")
    if value is None:
        return None, "null"
    if value == UNCLEAR:
        return None, "unclear"
    if spec.kind == "category" and value == "other":
        return str(entry.get("detail") or "").strip() or None, "other"
    return str(value), "present"


def extraction_rows(
    extraction: Extraction,
    *,
    run_id: str,
    doc_id: str,
    extracted_at: dt.datetime,
    form_version: str | None = None,
) -> pa.Table:
    """The store rows of one accepted extraction (columns :data:`ROW_SCHEMA`).

    ``extracted_at`` must be naive UTC (the store's convention).
    """
    schema = SCHEMAS[extraction.doc_type]
    rows: dict[str, list[Any]] = {name: [] for name in ROW_SCHEMA.names}
    for spec in schema.fields:
        entry = extraction.tool_input[spec.name]
        value, status = value_and_status(spec, entry)
        source_text = entry.get("source_text")
        row = {
            "extraction_id": extraction_id(run_id, doc_id, spec.name),
            "doc_id": doc_id,
            "doc_type": schema.doc_type,
            "form_version": form_version or UNKNOWN_FORM_VERSION,
            "field": spec.name,
            "value": value,
            "value_status": status,
            "confidence": float(entry["confidence"]),
            "model": extraction.model,
            "extracted_at": extracted_at,
            "conflict": spec.name in extraction.conflicts,
            "conflict_value": extraction.conflicts.get(spec.name),
            "source_excerpt": source_text if isinstance(source_text, str) and source_text else None,
        }
        for name, cell in row.items():
            rows[name].append(cell)
    return pa.table(rows, schema=ROW_SCHEMA)
