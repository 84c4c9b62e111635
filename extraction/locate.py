"""Where on its page a value was read: the model's verbatim quote, found in the PDF's text.

The model says, per field, the page and the text exactly as printed. For a
PDF with a text layer the quote is looked up in that page's characters
(pypdfium2) and the union of the matched characters' boxes becomes the
field's bbox: fractions of the page, origin top left (store.locations). The
match forgives case and runs of white space, nothing else: a quote the page
does not hold gets no bbox, and the log says so. Images and scanned PDFs
(no text layer) keep the page only.
"""

from __future__ import annotations

import logging
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

log = logging.getLogger("fieldtrust.extraction")

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Located:
    """A field's place: its page (None: not said) and bbox (None: not found)."""

    page: int | None
    bbox: Box | None


def _normalised(chars: list[str]) -> tuple[str, list[int]]:
    """Lower-cased text with white-space runs as one space, and each kept char's index."""
    out: list[str] = []
    where: list[int] = []
    for index, char in enumerate(chars):
        if char.isspace() or char in "\r\n\x02\ufffe":
            if out and out[-1] != " ":
                out.append(" ")
                where.append(index)
            continue
        out.append(unicodedata.normalize("NFKC", char).lower())
        where.append(index)
    return "".join(out), where


def _quote_key(quote: str) -> str:
    text, _ = _normalised(list(quote.strip()))
    return text.strip()


class PdfText:
    """The text layer of one PDF, opened once for all of a document's fields."""

    def __init__(self, data: bytes) -> None:
        self._pdf = pdfium.PdfDocument(data)
        self._pages: dict[int, tuple[str, list[int], list[Box]]] = {}

    def __len__(self) -> int:
        return len(self._pdf)

    def close(self) -> None:
        self._pdf.close()

    def has_text(self, page: int) -> bool:
        """Whether ``page`` (1-based) has any characters in its text layer."""
        return bool(self._page(page)[0].strip())

    def _page(self, page: int) -> tuple[str, list[int], list[Box]]:
        if page not in self._pages:
            handle = self._pdf[page - 1]
            width, height = handle.get_size()
            text = handle.get_textpage()
            count = text.count_chars()
            chars = [chr(pdfium_c.FPDFText_GetUnicode(text.raw, i)) for i in range(count)]
            boxes = []
            for i in range(count):
                left, bottom, right, top = text.get_charbox(i)
                boxes.append((left / width, 1 - top / height, right / width, 1 - bottom / height))
            norm, where = _normalised(chars)
            self._pages[page] = (norm, [*where], boxes)
            text.close()
            handle.close()
        return self._pages[page]

    def find(self, page: int, quote: str) -> Box | None:
        """The bbox of ``quote``'s first occurrence on ``page`` (1-based), or None."""
        found = self.find_all(page, quote)
        return found[0] if found else None

    def find_all(self, page: int, quote: str) -> list[Box]:
        """The bbox of every occurrence of ``quote`` on ``page``, in reading order."""
        key = _quote_key(quote)
        if not key or not 1 <= page <= len(self):
            return []
        norm, where, boxes = self._page(page)
        found = []
        start = norm.find(key)
        while start >= 0:
            picked = [boxes[where[k]] for k in range(start, start + len(key)) if norm[k] != " "]
            picked = [b for b in picked if b[2] > b[0] and b[3] > b[1]]
            box = _clamped((min(b[0] for b in picked), min(b[1] for b in picked),
                            max(b[2] for b in picked), max(b[3] for b in picked))) \
                if picked else None
            if box is not None:
                found.append(box)
            start = norm.find(key, start + 1)
        return found


def _clamped(box: Box) -> Box | None:
    x0, y0, x1, y1 = (min(max(v, 0.0), 1.0) for v in box)
    return (x0, y0, x1, y1) if x0 < x1 and y0 < y1 else None


def locate_fields(
    data: bytes, media_type: str, quotes: dict[str, tuple[int | None, str]], *, doc_id: str
) -> dict[str, Located]:
    """Each field's page and bbox, from ``quotes`` (field -> (page, verbatim text)).

    Only PDFs are searched; other documents keep the page the model gave. A
    page outside the document is dropped. Never raises on a bad PDF: the
    fields keep their pages and the log says why no box was found.
    """
    if media_type != "application/pdf":
        return {f: Located(p if p and p >= 1 else None, None) for f, (p, _) in quotes.items()}
    try:
        pdf = PdfText(data)
    except pdfium.PdfiumError as exc:
        log.warning("%s: the PDF's text layer cannot be read (%s); no boxes stored", doc_id, exc)
        return {f: Located(p if p and p >= 1 else None, None) for f, (p, _) in quotes.items()}
    try:
        return dict(_located(pdf, quotes, doc_id))
    finally:
        pdf.close()


def _located(
    pdf: PdfText, quotes: dict[str, tuple[int | None, str]], doc_id: str
) -> Iterator[tuple[str, Located]]:
    for field, (page, quote) in quotes.items():
        if page is None or page < 1:
            yield field, Located(None, None)
            continue
        if page > len(pdf):
            log.warning("%s %s: page %d is past the document's %d pages; no page stored",
                        doc_id, field, page, len(pdf))
            yield field, Located(None, None)
            continue
        if not quote.strip():
            yield field, Located(page, None)
            continue
        if not pdf.has_text(page):
            yield field, Located(page, None)  # a scan: the page is all we know
            continue
        box = pdf.find(page, quote)
        if box is None:
            log.warning("%s %s: the quote %r is not on page %d; stored without a bbox",
                        doc_id, field, quote, page)
        yield field, Located(page, box)
