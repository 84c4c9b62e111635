"""AWS Textract AnalyzeExpense JSON -> fieldtrust ingest rows (JSON Lines on stdout).

    python docs/examples/textract_to_fieldtrust.py expense.json --doc-id inv-42 \
        --document-uri scans/inv-42.pdf > rows.jsonl && fieldtrust ingest rows.jsonl

Each ``ExpenseDocuments[].SummaryFields[]`` whose ``Type.Text`` is in
:data:`FIELDS` becomes a row. Textract's ``ValueDetection.Geometry.BoundingBox``
(Left, Top, Width, Height) is already a fraction of the page with the origin
top left, and ``PageNumber`` is 1-based: they map straight to bbox and page.
Confidence is a percentage; fieldtrust wants [0, 1].
"""

from __future__ import annotations

from typing import Any

from _common import arguments, box, load, row, write_jsonl

#: Textract's summary field types -> fieldtrust field names.
FIELDS = {
    "INVOICE_RECEIPT_ID": "invoice_number",
    "INVOICE_RECEIPT_DATE": "date",
    "VENDOR_NAME": "vendor",
    "TOTAL": "total",
    "TAX": "tax",
}


def convert(response: dict[str, Any], args: Any) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for document in response.get("ExpenseDocuments", []):
        for summary in document.get("SummaryFields", []):
            field = FIELDS.get(summary.get("Type", {}).get("Text", ""))
            if field is None or field in rows:
                continue  # the first detection of a type wins
            value = summary.get("ValueDetection", {})
            bb = value.get("Geometry", {}).get("BoundingBox")
            bbox = box(bb["Left"], bb["Top"], bb["Left"] + bb["Width"],
                       bb["Top"] + bb["Height"]) if bb else None
            label = summary.get("LabelDetection", {}).get("Text")
            text = value.get("Text") or None
            excerpt = f"{label} {text}" if label and text else text
            rows[field] = row(args, field, text, float(value.get("Confidence", 0)) / 100,
                              summary.get("PageNumber"), bbox, excerpt)
    return list(rows.values())


if __name__ == "__main__":
    options = arguments(__doc__.splitlines()[0], "aws-textract-analyze-expense")
    write_jsonl(convert(load(options.response), options))
