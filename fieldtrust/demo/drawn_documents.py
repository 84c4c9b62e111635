"""The demo's documents, drawn when someone opens one, from the demo's own rows.

Nothing is drawn at build time: a reviewer who opens a demo item gets its
document rendered from the store (the extraction rows of its ``doc_id`` and
their hidden truth), deterministically, so the same item always shows the
same page. Invoices and purchase orders are PDFs with a text layer (fpdf2),
printed receipts PNG images in a monospaced receipt font, handwritten
receipts PNG images in slanted, jittered strokes of DejaVu Sans Mono
Oblique (Debian's fonts-dejavu-core; nothing is downloaded). Every value is
set in the slot :mod:`fieldtrust.demo.page_layout` gave its box from.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import io
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import cache
from pathlib import Path

import duckdb
import numpy as np
from fpdf import FPDF
from PIL import Image, ImageChops, ImageDraw, ImageFilter, ImageFont

from fieldtrust.demo.page_layout import (
    ASCENT,
    DEMO_FOLDER,
    HAND_SPACING,
    MONO_ADVANCE,
    PAGES,
    UNREADABLE_CHARS,
    printed_text,
    slot,
    text_start,
    value_box,
)
from fieldtrust.demo.truth import truth_rows
from fieldtrust.demo.values import OWN_COMPANY
from fieldtrust.store.locations import Location

FONT_DIR = Path("/usr/share/fonts/truetype/dejavu")
#: A fixed creation date, so the same document is the same bytes on every render.
_CREATED = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
INK = (28, 42, 120)
_SLANT = 0.15  # handwriting leans right: x shifts by this much per pixel above the baseline


@dataclass(frozen=True)
class DemoField:
    """What the page shows for one field: its true text, or that it cannot be read."""

    text: str | None  # None: the document has no such line
    unreadable: bool = False


@dataclass(frozen=True)
class DemoDocument:
    """A demo document's type, layout and fields, as the store knows them."""

    doc_id: str
    doc_type: str
    form_version: str
    fields: dict[str, DemoField]


@dataclass(frozen=True)
class Rendered:
    """A rendered document: its bytes and media type (``application/pdf``, ``image/png``)."""

    data: bytes
    media_type: str


def is_demo_uri(uri: str) -> bool:
    """Whether ``uri`` names a demo document (drawn on demand, never stored)."""
    return uri.startswith(DEMO_FOLDER + "/")


def demo_document(con: duckdb.DuckDBPyConnection, doc_id: str) -> DemoDocument | None:
    """The demo document ``doc_id`` from the store; None when it is no demo document."""
    if not truth_rows(con):  # a store that is no demo store has no demo documents
        return None
    # Every field of a demo document is extracted at one time (the generator's), so when
    # the sampled copy holds one of them its time bounds the read to a row group or two
    # instead of the doc_id column of every row (the review page draws these per item).
    first, last = con.execute(
        "SELECT min(extracted_at), max(extracted_at) FROM sampled_extractions WHERE doc_id = ?",
        [doc_id],
    ).fetchall()[0]
    span, params = ("e.extracted_at BETWEEN ? AND ?", [doc_id, first, last]) \
        if first is not None else ("TRUE", [doc_id])
    rows = con.execute(
        "SELECT e.doc_type, e.form_version, e.field, e.value_status, t.correct, t.true_value"
        " FROM extractions e JOIN demo_truth t USING (extraction_id)"
        f" WHERE e.doc_id = ? AND {span}",
        params,
    ).fetchall()
    if not rows or rows[0][0] not in PAGES:
        return None
    fields = {
        field: DemoField(true_value, status == "unclear" and bool(correct))
        for _, _, field, status, correct, true_value in rows
    }
    return DemoDocument(doc_id, rows[0][0], rows[0][1], fields)


def draw_document(con: duckdb.DuckDBPyConnection, location: Location) -> bytes | None:
    """The bytes of the demo document at ``location``; None when it is no demo document.

    The dashboard's document viewer finds this function by its entry point
    (``fieldtrust.document_drawers`` in pyproject.toml), so no production
    module imports the demo.
    """
    if not location.document_uri or not is_demo_uri(location.document_uri):
        return None
    drawn = render_demo(con, location.doc_id)
    return None if drawn is None else drawn.data


def render_demo(con: duckdb.DuckDBPyConnection, doc_id: str) -> Rendered | None:
    """Draw the demo document ``doc_id`` (None: the store holds no such demo document)."""
    document = demo_document(con, doc_id)
    if document is None:
        return None
    if PAGES[document.doc_type].media == "pdf":
        return Rendered(_pdf(document), "application/pdf")
    return Rendered(_receipt_png(document), "image/png")


# --- shared figures -------------------------------------------------------------------


def _rng(document: DemoDocument, part: str) -> np.random.Generator:
    """A stream per document and part of the page, so one part never moves another."""
    key = f"{document.doc_id}|{part}".encode()
    return np.random.default_rng(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def _amount(document: DemoDocument, field: str) -> Decimal | None:
    entry = document.fields.get(field)
    if entry is None or entry.text is None:
        return None
    try:
        return Decimal(entry.text)
    except InvalidOperation:
        return None


def _tax_rate(document: DemoDocument) -> str:
    total, tax = _amount(document, "total"), _amount(document, "tax")
    if total is None or tax is None or total <= tax:
        return ""
    rate = float(tax / (total - tax)) * 100
    return f"{min((20, 19, 10, 7, 5.5), key=lambda r: abs(r - rate)):g}%"


def _net(document: DemoDocument) -> str:
    total, tax = _amount(document, "total"), _amount(document, "tax")
    if total is None:
        return ""
    return f"{total - (tax or Decimal(0)):.2f}"


def _text(document: DemoDocument, field: str) -> str | None:
    entry = document.fields.get(field)
    if entry is None or entry.text is None:
        return None
    return printed_text(document.doc_type, field, entry.text)


# --- PDFs -----------------------------------------------------------------------------


def _pdf(document: DemoDocument) -> bytes:
    pdf = FPDF(format="A4", unit="mm")
    pdf.set_creation_date(_CREATED)
    pdf.set_auto_page_break(False)
    pdf.add_page()
    order = document.doc_type == "purchase_order"
    pdf.set_font("Helvetica", "B", 20)
    pdf.text(20, 25, "PURCHASE ORDER" if order else "INVOICE")
    labels = _ORDER_LABELS if order else _INVOICE_LABELS
    pdf.set_font("Helvetica", size=10)
    for field, label in labels.items():
        place = slot(document.doc_type, document.form_version, field)
        if field == "tax":
            if _text(document, "tax") is None and not document.fields["tax"].unreadable:
                label = "VAT exempt"
            else:
                label = f"VAT {_tax_rate(document)}".strip()
        x = 120 if place.right else _LABEL_X[field]
        pdf.text(x, place.y, label)
    pdf.set_text_color(90, 90, 90)
    if not order:
        pdf.text(20, 53, f"Bill to: {OWN_COMPANY}, Hafenstr. 12, 20457 Hamburg")
    else:
        pdf.text(20, 53, f"Supplier: {OWN_COMPANY} purchasing   Approved: J. Weber")
    pdf.set_text_color(0, 0, 0)
    pdf.set_draw_color(160, 160, 160)
    pdf.line(20, 92, 190, 92)
    pdf.text(20, 90, "Description")
    pdf.text(172, 90, "Amount")
    pdf.set_font("Courier", size=10)
    pdf.text(20, 100, "Goods and services as agreed")
    net = _net(document)
    pdf.text(190 - len(net) * 0.6 * 10 * 25.4 / 72, 100, net)
    pdf.set_font("Helvetica", size=8)
    pdf.set_text_color(120, 120, 120)
    pdf.text(20, 280, f"{document.doc_id} · layout {document.form_version} · payment terms"
             " 30 days net · demo document drawn by fieldtrust")
    pdf.set_text_color(0, 0, 0)
    for field in labels:
        place = slot(document.doc_type, document.form_version, field)
        entry = document.fields.get(field)
        if entry is not None and entry.unreadable:
            x0 = text_start(document.doc_type, place, UNREADABLE_CHARS)
            pdf.set_fill_color(150, 150, 150)
            width = UNREADABLE_CHARS * 0.6 * place.size * 25.4 / 72
            pdf.rect(x0, place.y - 3.5, width, 4.6, style="F")
            continue
        text = _text(document, field)
        if text is None:
            continue
        pdf.set_font("Courier", "B" if field == "total" else "", place.size)
        pdf.text(text_start(document.doc_type, place, len(text)), place.y, text)
    return bytes(pdf.output())


_INVOICE_LABELS = {
    "vendor": "From:", "invoice_number": "Invoice no.", "date": "Date:",
    "currency": "All amounts in", "tax": "VAT", "total": "TOTAL",
}
_ORDER_LABELS = {
    "buyer": "Ordered by:", "po_number": "PO no.", "date": "Date:",
    "currency": "All amounts in", "delivery_date": "Requested delivery:", "total": "TOTAL",
}
_LABEL_X = {
    "vendor": 20, "buyer": 20, "invoice_number": 120, "po_number": 120, "date": 120,
    "currency": 20, "delivery_date": 20,
}


# --- receipts -------------------------------------------------------------------------


@cache
def _font(name: str, size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT_DIR / name), size)


def _receipt_png(document: DemoDocument) -> bytes:
    page = PAGES[document.doc_type]
    image = _handwritten(document) if page.handwritten else _printed(document)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=3)
    return buffer.getvalue()


def _printed(document: DemoDocument) -> Image.Image:
    page = PAGES[document.doc_type]
    image = Image.new("RGB", (int(page.width), int(page.height)), (250, 250, 246))
    draw = ImageDraw.Draw(image)
    small = _font("DejaVuSansMono.ttf", 16)
    for y in (100, 470, 580):
        draw.text((30, y), "-" * 44, font=small, fill=(120, 120, 120), anchor="ls")
    labels = {"date": "Date:", "payment_method": "Payment:"}
    for field, label in labels.items():
        place = slot(document.doc_type, document.form_version, field)
        draw.text((30, place.y), label, font=_font("DejaVuSansMono.ttf", 20), fill=(20, 20, 20),
                  anchor="ls")
    draw.text((30, 200), "Goods", font=_font("DejaVuSansMono.ttf", 20), fill=(20, 20, 20),
              anchor="ls")
    net = _net(document)
    draw.text((450, 200), net, font=_font("DejaVuSansMono.ttf", 20), fill=(20, 20, 20),
              anchor="rs")
    tax_place = slot(document.doc_type, document.form_version, "tax")
    has_tax = _text(document, "tax") is not None or document.fields["tax"].unreadable
    tax_label = f"VAT {_tax_rate(document)}".strip() if has_tax else "VAT exempt"
    draw.text((30, tax_place.y), tax_label, font=_font("DejaVuSansMono.ttf", 20),
              fill=(20, 20, 20), anchor="ls")
    total_place = slot(document.doc_type, document.form_version, "total")
    draw.text((30, total_place.y), "TOTAL EUR", font=_font("DejaVuSansMono-Bold.ttf", 24),
              fill=(20, 20, 20), anchor="ls")
    draw.text((30, 700), f"{document.doc_id} {document.form_version}", font=small,
              fill=(130, 130, 130), anchor="ls")
    for field in ("merchant", "date", "tax", "total", "payment_method"):
        _set_printed(draw, document, field)
    return image


def _set_printed(draw: ImageDraw.ImageDraw, document: DemoDocument, field: str) -> None:
    place = slot(document.doc_type, document.form_version, field)
    entry = document.fields.get(field)
    size = int(place.size)
    if entry is not None and entry.unreadable:
        x0 = text_start(document.doc_type, place, UNREADABLE_CHARS)
        x1 = x0 + UNREADABLE_CHARS * MONO_ADVANCE * size
        draw.rectangle((x0, place.y - ASCENT * size, x1, place.y + 4), fill=(160, 160, 160))
        return
    text = _text(document, field)
    if text is None:
        return
    bold = field in ("total", "merchant")
    font = _font("DejaVuSansMono-Bold.ttf" if bold else "DejaVuSansMono.ttf", size)
    draw.text((text_start(document.doc_type, place, len(text)), place.y), text, font=font,
              fill=(15, 15, 15), anchor="ls")


def _handwritten(document: DemoDocument) -> Image.Image:
    page = PAGES[document.doc_type]
    notebook = document.form_version == "notebook"
    paper = (252, 250, 238) if notebook else (236, 240, 250)
    image = Image.new("RGB", (int(page.width), int(page.height)), paper)
    draw = ImageDraw.Draw(image)
    if notebook:
        for y in range(60, int(page.height), 35):
            draw.line((0, y + 8, page.width, y + 8), fill=(200, 215, 235), width=1)
        draw.line((40, 0, 40, page.height), fill=(235, 180, 180), width=2)
    else:
        draw.text((20, 30), "RECEIPT  No. " + document.doc_id[-5:],
                  font=_font("DejaVuSans.ttf", 16), fill=(90, 110, 170), anchor="ls")
    labels = {"date": "date", "tax": "tax", "total": "tot.", "payment_method": "paid"}
    for field, label in labels.items():
        place = slot(document.doc_type, document.form_version, field)
        if field == "tax" and _text(document, "tax") is None \
                and not document.fields["tax"].unreadable:
            continue  # no tax line on this receipt
        _hand(image, label, place.x - 100, place.y, int(place.size * 0.8),
              _rng(document, "label " + field))
    for field in ("merchant", "date", "tax", "total", "payment_method"):
        place = slot(document.doc_type, document.form_version, field)
        entry = document.fields.get(field)
        if entry is not None and entry.unreadable:
            _smudge(image, document, field, _rng(document, field))
            continue
        text = _text(document, field)
        if text is not None:
            _hand(image, text, text_start(document.doc_type, place, len(text)), place.y,
                  int(place.size), _rng(document, field))
    return image


def _hand(
    image: Image.Image, text: str, x: float, baseline: float, size: int,
    rng: np.random.Generator,
) -> None:
    """Write ``text`` with its first character's baseline at (x, baseline), slanted and jittered.

    Characters stay within :data:`~fieldtrust.demo.page_layout.JITTER_PX` of the
    box their advance gives, which is what the stored bbox allows for (a
    test checks every ink pixel of a value lies in its box).
    """
    advance = MONO_ADVANCE * size * HAND_SPACING
    margin = int(size)
    width = int(len(text) * advance) + 2 * margin
    height = 2 * size
    tile_base = int(1.3 * size)
    tile = Image.new("L", (width, height), 0)
    draw = ImageDraw.Draw(tile)
    for index, char in enumerate(text):
        char_size = max(8, int(size * (1 + rng.uniform(-0.05, 0.05))))
        dx, dy = rng.uniform(-1.2, 1.2), rng.uniform(-1.8, 1.8)
        draw.text((margin + index * advance + dx, tile_base + dy), char,
                  font=_font("DejaVuSansMono-Oblique.ttf", char_size), fill=255, anchor="ls")
    # Lean further right above the baseline (a shear anchored on it), as a hand does.
    slanted = tile.transform(tile.size, Image.Transform.AFFINE,
                             (1, _SLANT, -_SLANT * tile_base, 0, 1, 0),
                             resample=Image.Resampling.BILINEAR)
    ink = Image.new("RGB", tile.size, INK)
    image.paste(ink, (round(x) - margin, round(baseline) - tile_base), slanted)


def _smudge(image: Image.Image, document: DemoDocument, field: str,
            rng: np.random.Generator) -> None:
    place = slot(document.doc_type, document.form_version, field)
    x0 = text_start(document.doc_type, place, UNREADABLE_CHARS)
    width = UNREADABLE_CHARS * MONO_ADVANCE * place.size
    layer = Image.new("L", image.size, 0)
    draw = ImageDraw.Draw(layer)
    for _ in range(6):
        cx = x0 + rng.uniform(0.1, 0.9) * width
        cy = place.y - rng.uniform(0.2, 0.6) * place.size
        r = rng.uniform(0.4, 0.7) * place.size
        draw.ellipse((cx - r * 1.4, cy - r, cx + r * 1.4, cy + r), fill=170)
    layer = layer.filter(ImageFilter.GaussianBlur(4))
    # Kept inside the value's box: the smudge is where the value would be.
    x0, y0, x1, y1 = value_box(document.doc_type, document.form_version, field, None)
    w, h = image.size
    clip = Image.new("L", image.size, 0)
    ImageDraw.Draw(clip).rectangle((x0 * w, y0 * h, x1 * w - 1, y1 * h - 1), fill=255)
    layer = ImageChops.multiply(layer, clip)
    image.paste(Image.new("RGB", image.size, (95, 90, 110)), (0, 0), layer)
