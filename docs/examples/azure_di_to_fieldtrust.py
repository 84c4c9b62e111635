"""Azure AI Document Intelligence (prebuilt-invoice, v3/v4) JSON -> fieldtrust rows (JSON Lines).

    python docs/examples/azure_di_to_fieldtrust.py result.json --doc-id inv-42 \
        --document-uri scans/inv-42.pdf > rows.jsonl && fieldtrust ingest rows.jsonl

Each field of ``analyzeResult.documents[0].fields`` named in :data:`FIELDS`
becomes a row, its value the printed ``content``. ``boundingRegions[0]``
has a 1-based ``pageNumber`` and a ``polygon`` (x1, y1, x2, y2, ...) in the
page's ``unit``: inches for PDFs, pixels for images, origin top left. Divided
by that page's ``width`` and ``height`` (``analyzeResult.pages``) it becomes
page fractions; the box is its extent.
"""

from __future__ import annotations

from typing import Any

from _common import arguments, box, load, row, write_jsonl

#: prebuilt-invoice field names -> fieldtrust field names.
FIELDS = {
    "InvoiceId": "invoice_number",
    "InvoiceDate": "date",
    "VendorName": "vendor",
    "InvoiceTotal": "total",
    "TotalTax": "tax",
}


def _points(polygon: list[Any]) -> list[tuple[float, float]]:
    """Flat [x1, y1, ...] (REST v3/v4) or [{x, y}, ...] (some SDKs' dumps) as points."""
    if polygon and isinstance(polygon[0], dict):
        return [(float(p["x"]), float(p["y"])) for p in polygon]
    return [(float(polygon[i]), float(polygon[i + 1])) for i in range(0, len(polygon) - 1, 2)]


def convert(response: dict[str, Any], args: Any) -> list[dict[str, Any]]:
    result = response.get("analyzeResult", response)
    sizes = {p["pageNumber"]: (float(p["width"]), float(p["height"]))
             for p in result.get("pages", [])}
    documents = result.get("documents", [])
    fields = documents[0].get("fields", {}) if documents else {}
    rows = []
    for name, field in FIELDS.items():
        found = fields.get(name)
        if found is None:
            continue
        page, bbox = None, None
        regions = found.get("boundingRegions", [])
        if regions:
            page = int(regions[0]["pageNumber"])
            points = _points(regions[0].get("polygon", []))
            if points and page in sizes:
                width, height = sizes[page]
                xs, ys = [x / width for x, _ in points], [y / height for _, y in points]
                bbox = box(min(xs), min(ys), max(xs), max(ys))
        text = found.get("content") or None
        rows.append(row(args, field, text, float(found.get("confidence", 0)), page, bbox, text))
    return rows


if __name__ == "__main__":
    options = arguments(__doc__.splitlines()[0], "azure-document-intelligence-prebuilt-invoice")
    write_jsonl(convert(load(options.response), options))
