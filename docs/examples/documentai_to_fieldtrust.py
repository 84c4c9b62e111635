"""Google Document AI (Invoice / Expense parser) Document JSON -> fieldtrust rows (JSON Lines).

    python docs/examples/documentai_to_fieldtrust.py document.json --doc-id inv-42 \
        --document-uri scans/inv-42.pdf > rows.jsonl && fieldtrust ingest rows.jsonl

Each top-level ``entities[]`` whose ``type`` is in :data:`FIELDS` becomes a
row. The place is ``pageAnchor.pageRefs[0]``: ``page`` indexes
``Document.pages`` from 0 and, as proto3 JSON, is a string and left out when
0 (so add 1); ``boundingPoly.normalizedVertices`` are page fractions with the
origin top left, a coordinate left out when 0. The box is their extent.
"""

from __future__ import annotations

from typing import Any

from _common import arguments, box, load, row, write_jsonl

#: Document AI entity types -> fieldtrust field names.
FIELDS = {
    "invoice_id": "invoice_number",
    "invoice_date": "date",
    "supplier_name": "vendor",
    "currency": "currency",
    "total_amount": "total",
    "total_tax_amount": "tax",
}


def _place(entity: dict[str, Any]) -> tuple[int | None, str | None]:
    refs = entity.get("pageAnchor", {}).get("pageRefs", [])
    if not refs:
        return None, None
    ref = refs[0]
    page = int(ref.get("page", 0)) + 1
    vertices = ref.get("boundingPoly", {}).get("normalizedVertices", [])
    if not vertices:
        return page, None
    xs = [float(v.get("x", 0)) for v in vertices]
    ys = [float(v.get("y", 0)) for v in vertices]
    return page, box(min(xs), min(ys), max(xs), max(ys))


def convert(document: dict[str, Any], args: Any) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for entity in document.get("entities", []):
        field = FIELDS.get(entity.get("type", ""))
        if field is None or field in rows:
            continue
        page, bbox = _place(entity)
        text = entity.get("mentionText") or None
        rows[field] = row(args, field, text, float(entity.get("confidence", 0)), page, bbox, text)
    return list(rows.values())


if __name__ == "__main__":
    options = arguments(__doc__.splitlines()[0], "google-documentai-invoice-parser")
    write_jsonl(convert(load(options.response), options))
