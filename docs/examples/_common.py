"""What the three converters share: the ingest row, the box as page fractions, the CLI.

Kept beside them so each converter stays a short file you can copy into
your own pipeline (copy this one too).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from collections.abc import Iterable
from typing import Any


def box(x0: float, y0: float, x1: float, y1: float) -> str | None:
    """``x0,y0,x1,y1`` clamped to the page, or None when nothing is left of it."""
    x0, y0, x1, y1 = (min(max(float(v), 0.0), 1.0) for v in (x0, y0, x1, y1))
    if not (x0 < x1 and y0 < y1):
        return None
    return ",".join(f"{v:.6f}" for v in (x0, y0, x1, y1))


def row(
    args: argparse.Namespace, field: str, value: str | None, confidence: float,
    page: int | None, bbox: str | None, excerpt: str | None,
) -> dict[str, Any]:
    """One fieldtrust ingest row (docs/ingest.md)."""
    return {
        "extraction_id": f"{args.doc_id}/{field}",
        "doc_id": args.doc_id,
        "doc_type": args.doc_type,
        "field": field,
        "value": value,
        "value_status": "present" if value else "null",
        "confidence": round(min(max(confidence, 0.0), 1.0), 6),
        "model": args.model,
        "extracted_at": args.extracted_at,
        "source_excerpt": excerpt,
        "document_uri": args.document_uri,
        "page": page,
        "bbox": bbox if page is not None else None,
    }


def arguments(description: str, model: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("response", help="the service's JSON response, as saved")
    parser.add_argument("--doc-id", required=True)
    parser.add_argument("--doc-type", default="invoice")
    parser.add_argument("--document-uri", default=None,
                        help="where the document is, relative to fieldtrust's documents root")
    parser.add_argument("--model", default=model)
    parser.add_argument("--extracted-at",
                        default=dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return parser.parse_args()


def write_jsonl(rows: Iterable[dict[str, Any]]) -> None:
    for item in rows:
        sys.stdout.write(json.dumps(item, ensure_ascii=False) + "\n")


def load(path: str) -> Any:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


