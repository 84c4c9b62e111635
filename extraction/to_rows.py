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
from fieldtrust.extraction.locate import Box, Located
from fieldtrust.extraction.results import Extraction
from fieldtrust.extraction.schemas import SCHEMAS, UNCLEAR, FieldSpec

#: Columns of the rows, as ingest.extractions.ingest_table takes them.
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
        ("extractor_version", pa.string()),
        ("document_uri", pa.string()),
        ("page", pa.int32()),
        ("bbox", pa.string()),  # "x0,y0,x1,y1", as an ingested file writes it
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


def quotes(extraction: Extraction) -> dict[str, tuple[int | None, str]]:
    """Per field the model's page and verbatim text (fields without a page are left out)."""
    out: dict[str, tuple[int | None, str]] = {}
    for name, entry in extraction.tool_input.items():
        page = entry.get("page") if isinstance(entry, Mapping) else None
        if isinstance(page, int) and not isinstance(page, bool) and page >= 1:
            text = entry.get("source_text")
            out[name] = (page, text if isinstance(text, str) else "")
    return out


def _place(located: Located | None) -> dict[str, Any]:
    if located is None:
        return {"page": None, "bbox": None}
    return {"page": located.page, "bbox": _bbox_text(located.bbox)}


def _bbox_text(box: Box | None) -> str | None:
    return None if box is None else ",".join(f"{v:.6f}" for v in box)


def extraction_rows(
    extraction: Extraction,
    *,
    run_id: str,
    doc_id: str,
    extracted_at: dt.datetime,
    form_version: str | None = None,
    document_uri: str | None = None,
    located: Mapping[str, Located] | None = None,
) -> pa.Table:
    """The store rows of one accepted extraction (columns :data:`ROW_SCHEMA`).

    ``extracted_at`` must be naive UTC (the store's convention).
    ``document_uri`` goes on every row; ``located`` gives a field's page and
    bbox (:func:`fieldtrust.extraction.locate.locate_fields`).
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
            # The model id is the extractor version: a new model is a new segment.
            "extractor_version": extraction.model,
            "document_uri": document_uri,
            **_place((located or {}).get(spec.name)),
        }
        for name, cell in row.items():
            rows[name].append(cell)
    return pa.table(rows, schema=ROW_SCHEMA)
