"""A document page as an image: PDF pages through pypdfium2, images through Pillow.

The dashboard's viewer (``fieldtrust.dashboard.render``, which draws the
value's box and caches) and the Label Studio tasks (each item's page written
as a PNG the Label Studio server serves) render pages with the same function,
so a reviewer sees the same page wherever they label.
"""

from __future__ import annotations

import io

import pypdfium2 as pdfium
from fieldtrust.store.documents import check_pixels, document_format, render_scale
from PIL import Image, UnidentifiedImageError

from fieldtrust.errors import DocumentError

#: Width in pixels pages are rendered at (an A4 page: about 110 dpi).
PAGE_WIDTH = 900

#: The image formats Pillow may open: no other decoder (EPS, say, handed to Ghostscript) runs.
IMAGE_FORMATS = ("PNG", "JPEG", "TIFF", "WEBP")

#: What a page that cannot be read raises, besides DocumentError for a page refused or not there.
UNREADABLE = (pdfium.PdfiumError, UnidentifiedImageError, OSError, ValueError)


def render_page(data: bytes, page: int, *, width: int = PAGE_WIDTH) -> tuple[Image.Image, int]:
    """Page ``page`` (1-based) of a PDF or image as an RGB image about ``width`` wide,
    and the document's page count.

    Only the formats of :func:`fieldtrust.store.documents.document_format` reach a
    decoder, and sizes are checked before decoding (a PDF page's points, an
    image's header against the pixel budget): a hostile page costs a refusal,
    not the memory it asks for.

    Raises
    ------
    DocumentError
        The document has no page ``page``, its format is not allowed, or the page
        is larger than the budget.
    pypdfium2.PdfiumError, PIL.UnidentifiedImageError, OSError, ValueError
        The bytes are no readable PDF or image (:data:`UNREADABLE`).
    """
    if document_format(data) == "PDF":
        pdf = pdfium.PdfDocument(data)
        try:
            pages = len(pdf)
            if not 1 <= page <= pages:
                raise DocumentError(f"the document has no page {page} (it has {pages})")
            handle = pdf[page - 1]
            page_width, page_height = handle.get_size()
            scale = render_scale(page_width, page_height, width, page=page)
            image = handle.render(scale=scale).to_pil().convert("RGB")
            handle.close()
            return image, pages
        finally:
            pdf.close()
    with Image.open(io.BytesIO(data), formats=IMAGE_FORMATS) as opened:
        pages = getattr(opened, "n_frames", 1)
        if not 1 <= page <= pages:
            raise DocumentError(f"the document has no page {page} (it has {pages})")
        opened.seek(page - 1)
        check_pixels(opened.width, opened.height, f"page {page} of the image")
        # A JPEG decodes at 1/2, 1/4 or 1/8 of its size where that still covers the width.
        opened.draft("RGB", (width, max(1, opened.height * width // opened.width)))
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
