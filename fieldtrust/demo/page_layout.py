"""Where each value sits on a demo document, known before anything is drawn.

Every demo document has a fixed layout per type and form version; values
are set in monospaced type (Courier in the PDFs, DejaVu Sans Mono in the
receipt images), so a value's box follows from its slot and its number of
characters alone. :func:`with_locations` gives every demo row its
``document_uri``, ``page`` and ``bbox`` this way, for all rows, without
rendering a page; :mod:`fieldtrust.demo.drawn_documents` draws a page on demand
from the same slots, so the box is where the value is printed.

The page shows the document's true values: where the demo model was wrong
(a misread digit, the total copied into the tax field), the reviewer sees
the difference. A field the document lacks (no tax line) has no box.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

#: Folder (under the documents root) the demo's document uris point into.
DEMO_FOLDER = "demo-documents"

#: A4 in millimetres, and the receipts' size in pixels.
A4 = (210.0, 297.0)
RECEIPT = (480.0, 760.0)
HANDWRITTEN = (480.0, 560.0)

#: Courier's advance (0.6 em) and DejaVu Sans Mono's (1233/2048 em).
COURIER_ADVANCE = 0.6
MONO_ADVANCE = 1233 / 2048
#: Above and below the baseline, in em, of the characters values use (accents included).
ASCENT, DESCENT = 0.92, 0.24
PT_MM = 25.4 / 72
#: Handwritten characters wander up to this many pixels; their boxes allow for it.
JITTER_PX = 7.0
#: Handwriting is spaced wider than the type's advance.
HAND_SPACING = 1.12


@dataclass(frozen=True)
class Slot:
    """Where a field's value is set: its baseline start (or end, ``right``) and size.

    Units are those of the page: millimetres on a PDF, pixels on an image.
    """

    x: float
    y: float
    size: float
    right: bool = False
    centred: bool = False


@dataclass(frozen=True)
class PageKind:
    """A document type's page: PDF or image, its size and the advance of its type."""

    media: str  # 'pdf' | 'png'
    width: float
    height: float
    handwritten: bool = False


PAGES = {
    "invoice": PageKind("pdf", *A4),
    "purchase_order": PageKind("pdf", *A4),
    "printed_receipt": PageKind("png", *RECEIPT),
    "handwritten_receipt": PageKind("png", *HANDWRITTEN, handwritten=True),
}

_INVOICE = {
    "vendor": Slot(38, 46, 11),
    "invoice_number": Slot(148, 46, 11),
    "date": Slot(148, 53, 11),
    "currency": Slot(50, 72, 11),
    "tax": Slot(190, 200, 11, right=True),
    "total": Slot(190, 210, 12, right=True),
}
_PURCHASE_ORDER = {
    "buyer": Slot(44, 46, 11),
    "po_number": Slot(148, 46, 11),
    "date": Slot(148, 53, 11),
    "currency": Slot(50, 72, 11),
    "delivery_date": Slot(64, 80, 11),
    "total": Slot(190, 210, 12, right=True),
}
_PRINTED = {
    "merchant": Slot(240, 70, 24, centred=True),
    "date": Slot(210, 130, 20),
    "tax": Slot(450, 500, 20, right=True),
    "total": Slot(450, 545, 24, right=True),
    "payment_method": Slot(210, 610, 20),
}
_HANDWRITTEN = {
    "merchant": Slot(50, 80, 30),
    "date": Slot(150, 160, 30),
    "tax": Slot(150, 320, 30),
    "total": Slot(150, 390, 32),
    "payment_method": Slot(150, 460, 30),
}

#: Per form version, moves of whole blocks (dx, dy) for the fields named.
_MOVES: dict[str, tuple[tuple[float, float], frozenset[str]]] = {
    # The supplier portal's new layout: header block to the left, totals higher.
    "v3-2026": ((0.0, -60.0), frozenset({"tax", "total"})),
    "po-2026": ((0.0, -40.0), frozenset({"total", "delivery_date"})),
    "pos-2023": ((0.0, 20.0), frozenset({"date", "payment_method"})),
    "notebook": ((20.0, 10.0), frozenset({"merchant", "date", "tax", "total",
                                          "payment_method"})),
}

SLOTS = {
    "invoice": _INVOICE,
    "purchase_order": _PURCHASE_ORDER,
    "printed_receipt": _PRINTED,
    "handwritten_receipt": _HANDWRITTEN,
}

#: Characters a value of unknown text (an unreadable one) is drawn over.
UNREADABLE_CHARS = 7


def slot(doc_type: str, form_version: str, field: str) -> Slot:
    """The slot of ``field`` on a ``doc_type`` page of ``form_version``."""
    base = SLOTS[doc_type][field]
    move, fields = _MOVES.get(form_version, ((0.0, 0.0), frozenset()))
    if field not in fields:
        return base
    return Slot(base.x + move[0], base.y + move[1], base.size, base.right, base.centred)


def printed_text(doc_type: str, field: str, value: str) -> str:
    """How a true value is printed (or written) on the page."""
    hand = doc_type == "handwritten_receipt"
    if field in ("date", "delivery_date"):
        year, month, day = value.split("-")
        return f"{int(day)}/{int(month)}" if hand else f"{day}.{month}.{year}"
    if field in ("total", "tax") and hand:
        return value.replace(".", ",")
    if field == "payment_method" and doc_type == "printed_receipt":
        return value.upper()
    return value


def _advance(page: PageKind, size: float) -> float:
    if page.media == "pdf":
        return COURIER_ADVANCE * size * PT_MM
    return MONO_ADVANCE * size * (HAND_SPACING if page.handwritten else 1.0)


def text_start(doc_type: str, place: Slot, chars: int) -> float:
    """Where the first character of a ``chars``-long value is set on its slot."""
    page = PAGES[doc_type]
    width = chars * _advance(page, place.size)
    if place.right:
        return place.x - width
    if place.centred:
        return place.x - width / 2
    return place.x


def value_box(
    doc_type: str, form_version: str, field: str, text: str | None
) -> tuple[float, float, float, float]:
    """The box of a value printed in its slot, as fractions of the page (origin top left)."""
    page = PAGES[doc_type]
    place = slot(doc_type, form_version, field)
    chars = UNREADABLE_CHARS if text is None else len(text)
    x0 = text_start(doc_type, place, chars)
    x1 = x0 + chars * _advance(page, place.size)
    em = place.size * (PT_MM if page.media == "pdf" else 1.0)
    y0, y1 = place.y - ASCENT * em, place.y + DESCENT * em
    pad = JITTER_PX if page.handwritten else (0.6 if page.media == "pdf" else 2.0)
    return (
        max(0.0, (x0 - pad) / page.width), max(0.0, (y0 - pad) / page.height),
        min(1.0, (x1 + pad) / page.width), min(1.0, (y1 + pad) / page.height),
    )


def document_uri(doc_id: str, doc_type: str) -> str:
    """The demo document's uri, relative to the documents root (rendered when opened)."""
    return f"{DEMO_FOLDER}/{doc_id}.{PAGES[doc_type].media}"


def field_box(
    doc_type: str, form_version: str, field: str, true_value: str | None, unreadable: bool
) -> tuple[float, float, float, float] | None:
    """A demo row's box: where its true value is printed; None when the page lacks it."""
    if unreadable:
        return value_box(doc_type, form_version, field, None)
    if true_value is None:
        return None  # the document has no such line (no tax shown)
    return value_box(doc_type, form_version, field, printed_text(doc_type, field, true_value))


def with_locations(extractions: pa.Table, truth: pa.Table) -> pa.Table:
    """The demo rows with ``document_uri``, ``page`` and ``bbox`` added (one page each).

    ``truth`` is the demo's hidden truth in the same row order: the page
    prints the true value, so the box is where that is.
    """
    doc_id = extractions["doc_id"].to_pylist()
    doc_type = extractions["doc_type"].to_pylist()
    version = extractions["form_version"].to_pylist()
    field = extractions["field"].to_pylist()
    status = extractions["value_status"].to_pylist()
    correct = truth["correct"].to_pylist()
    true_value = truth["true_value"].to_pylist()
    uris, boxes = [], []
    for i, doc in enumerate(doc_id):
        uris.append(document_uri(doc, doc_type[i]))
        unreadable = status[i] == "unclear" and bool(correct[i])
        box = field_box(doc_type[i], version[i], field[i], true_value[i], unreadable)
        boxes.append(None if box is None else ",".join(f"{v:.5f}" for v in box))
    return (
        extractions.append_column("document_uri", pa.array(uris, pa.string()))
        .append_column("page", pa.array([1] * len(uris), pa.int32()))
        .append_column("bbox", pa.array(boxes, pa.string()))
    )
