"""A document page as an image: PDF pages through pypdfium2, images through Pillow.

The dashboard's viewer (``fieldtrust.dashboard.render``, which draws the
value's box and caches) and the Label Studio tasks (each item's page written
as a PNG the Label Studio server serves) render pages with the same function,
so a reviewer sees the same page wherever they label.
"""

from __future__ import annotations

import io

import pypdfium2 as pdfium
from PIL import Image, UnidentifiedImageError

#: Width in pixels pages are rendered at (an A4 page: about 110 dpi).
PAGE_WIDTH = 900

#: What a page that cannot be read raises, besides IndexError for a page not there.
UNREADABLE = (pdfium.PdfiumError, UnidentifiedImageError, OSError, ValueError)


def render_page(data: bytes, page: int, *, width: int = PAGE_WIDTH) -> tuple[Image.Image, int]:
    """Page ``page`` (1-based) of a PDF or image as an RGB image about ``width`` wide,
    and the document's page count.

    Raises
    ------
    IndexError
        The document has no page ``page``.
    pypdfium2.PdfiumError, PIL.UnidentifiedImageError, OSError, ValueError
        The bytes are no readable PDF or image (:data:`UNREADABLE`).
    """
    if data.startswith(b"%PDF-"):
        pdf = pdfium.PdfDocument(data)
        try:
            pages = len(pdf)
            if not 1 <= page <= pages:
                raise IndexError(page)
            handle = pdf[page - 1]
            page_width, _ = handle.get_size()
            image = handle.render(scale=width / page_width).to_pil().convert("RGB")
            handle.close()
            return image, pages
        finally:
            pdf.close()
    with Image.open(io.BytesIO(data)) as opened:
        pages = getattr(opened, "n_frames", 1)
        if not 1 <= page <= pages:
            raise IndexError(page)
        opened.seek(page - 1)
        image = opened.convert("RGB")
    if image.width > width:
        image = image.resize((width, round(image.height * width / image.width)))
    return image, pages


def page_png(data: bytes, page: int, *, width: int = PAGE_WIDTH) -> tuple[bytes, int, int]:
    """:func:`render_page` as PNG bytes, with the image's width and height."""
    image, _ = render_page(data, page, width=width)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=6)
    return buffer.getvalue(), image.width, image.height
