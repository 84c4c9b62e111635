"""A document page as the reviewer sees it: rendered, the value's box drawn, cached.

No Streamlit here (:mod:`fieldtrust.dashboard.viewer` draws); the benchmark
times these functions. A document is found by :func:`open_document`, which
decides with :func:`fieldtrust.store.locations.resolve_document` before it
reads anything: a file inside the documents root, a remote document on an
allowed host, a demo document drawn from the store, or a :class:`Notice`
saying why there is nothing to show. :func:`page_image` renders one page
(PDF through pypdfium2, images through Pillow) with the box and returns
PNG bytes; results are kept in a small LRU cache (:data:`CACHE_PAGES`).
"""

from __future__ import annotations

import io
import threading
import urllib.request
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pypdfium2 as pdfium
from fieldtrust.store.locations import Location, resolve_document
from PIL import Image, ImageDraw, UnidentifiedImageError

from fieldtrust.errors import DocumentError

#: Width in pixels pages are rendered at (an A4 page: about 110 dpi).
PAGE_WIDTH = 900
#: Width of the zoomed view of the value's region.
ZOOM_WIDTH = 900
#: Rendered pages kept (about 0.2 MB each).
CACHE_PAGES = 48
#: Largest remote document fetched from an allowed host, and how long to wait for it.
MAX_REMOTE_BYTES = 20 * 1024 * 1024
REMOTE_TIMEOUT = 5.0
BOX_COLOUR = (230, 20, 60)
BOX_WIDTH = 4


@dataclass(frozen=True)
class Notice:
    """Why no page can be shown: the reviewer reads this, the uri and the excerpt."""

    message: str
    uri: str | None
    link: str | None = None  # a remote document to open in the browser instead


@dataclass(frozen=True)
class Source:
    """A document's bytes, ready to render, and the key its pages are cached under."""

    key: Hashable
    data: bytes
    uri: str


@dataclass(frozen=True)
class PageImage:
    """One rendered page: PNG bytes, its size, and the box in its pixels (if any)."""

    png: bytes
    width: int
    height: int
    page: int
    pages: int
    box: tuple[int, int, int, int] | None


class _LRU:
    """A small thread-safe LRU cache (the server renders for several sessions at once)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, object] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, make: Callable[[], object]) -> object:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = make()
        with self._lock:
            self._items[key] = value
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


PAGES = _LRU(CACHE_PAGES)
#: Demo and remote documents, drawn or fetched once (files are read each time: cheap,
#: and a changed file shows at once).
SOURCES = _LRU(16)


def open_document(
    con: duckdb.DuckDBPyConnection | None,
    location: Location,
    *,
    root: str | Path,
    remote_hosts: frozenset[str] = frozenset(),
    store_key: str = "",
) -> Source | Notice:
    """The bytes of ``location``'s document, or a :class:`Notice` of why there are none.

    ``con`` (a store connection) is asked for demo documents, which are drawn
    from the store instead of read from a file; ``store_key`` (the store's
    path) keeps demo documents of different stores apart in the cache.
    """
    uri = location.document_uri
    if not uri:
        return Notice("No document is stored for this extraction.", None)
    try:
        resolved = resolve_document(uri, root=root, remote_hosts=remote_hosts)
    except DocumentError as exc:
        return Notice(f"Not shown: {exc}.", uri)
    if resolved.kind == "link":
        return Notice("A remote document: it is not fetched by the server (its host is not in"
                      " documents_remote_hosts). Open it in your browser.", uri, resolved.url)
    if resolved.kind == "remote":
        fetched = SOURCES.get(("remote", uri), lambda: _fetch(uri, str(resolved.url)))
        assert isinstance(fetched, Source | Notice)
        return fetched
    path = resolved.path
    assert path is not None
    if not path.is_file():
        drawn = None
        if con is not None:
            drawn = SOURCES.get(("demo", store_key, uri), lambda: _demo(con, location))
        if isinstance(drawn, Source):
            return drawn
        return Notice("The document is missing: there is no file at this uri under the"
                      " documents root.", uri)
    try:
        stat = path.stat()
        return Source((str(path), stat.st_mtime_ns, stat.st_size), path.read_bytes(), uri)
    except OSError as exc:
        return Notice(f"The document cannot be read ({exc.strerror}).", uri)


def _demo(con: duckdb.DuckDBPyConnection, location: Location) -> Source | None:
    from fieldtrust.demo.documents import is_demo_uri, render_demo

    if not location.document_uri or not is_demo_uri(location.document_uri):
        return None
    drawn = render_demo(con, location.doc_id)
    if drawn is None:
        return None
    return Source(("demo", location.document_uri, drawn.data), drawn.data, location.document_uri)


def _fetch(uri: str, url: str) -> Source | Notice:
    try:
        with urllib.request.urlopen(url, timeout=REMOTE_TIMEOUT) as response:
            data = response.read(MAX_REMOTE_BYTES + 1)
    except (OSError, ValueError) as exc:
        return Notice(f"The remote document could not be fetched ({exc}).", uri, url)
    if len(data) > MAX_REMOTE_BYTES:
        return Notice("The remote document is over 20 MB; open it in your browser.", uri, url)
    return Source(("remote", url, hash(data)), data, uri)


def page_image(
    source: Source, page: int | None, bbox: tuple[float, float, float, float] | None,
    *, zoom: bool = False, window: int | None = None,
) -> PageImage | Notice:
    """Page ``page`` (1-based; None: the first) of ``source`` with ``bbox`` drawn, cached.

    With ``zoom`` the image is the box's region with a margin, enlarged. With
    ``window`` (rows of a page :data:`PAGE_WIDTH` wide; a narrower image gets
    as many in proportion) a taller page is cut to that height around the
    box, its full width kept, so the value and what is around it fit a screen.
    Returns a :class:`Notice` when the bytes are no readable PDF or image, or
    the page is not in the document.
    """
    key = (source.key, page or 1, bbox, zoom, window)
    result = PAGES.get(key, lambda: _render(source, page or 1, bbox, zoom, window))
    assert isinstance(result, PageImage | Notice)
    return result


def _render(
    source: Source, page: int, bbox: tuple[float, float, float, float] | None, zoom: bool,
    window: int | None = None,
) -> PageImage | Notice:
    try:
        image, pages = _page(source.data, page)
    except (pdfium.PdfiumError, UnidentifiedImageError, OSError, ValueError) as exc:
        return Notice(f"The document cannot be read as a PDF or an image ({exc}).", source.uri)
    except IndexError:
        return Notice(f"The document has no page {page}.", source.uri)
    box = None
    if bbox is not None:
        x0, y0, x1, y1 = bbox
        box = (round(x0 * image.width), round(y0 * image.height),
               round(x1 * image.width), round(y1 * image.height))
    if zoom and box is not None:
        image, box = _zoomed(image, box)
    elif window is not None and box is not None:
        rows = round(window * image.width / PAGE_WIDTH)  # an image may be narrower than PDFs
        if image.height > rows:
            image, box = _windowed(image, box, rows)
    if box is not None:
        draw = ImageDraw.Draw(image)
        pad = BOX_WIDTH
        draw.rectangle((box[0] - pad, box[1] - pad, box[2] + pad, box[3] + pad),
                       outline=BOX_COLOUR, width=BOX_WIDTH)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return PageImage(buffer.getvalue(), image.width, image.height, page, pages, box)


#: PDFium must never be called from two threads at once, not even on different
#: documents (it crashes or corrupts the process: pypdfium2's docs); the server
#: renders for every session and prepares the next item's page in the background.
_PDFIUM = threading.Lock()


def _page(data: bytes, page: int) -> tuple[Image.Image, int]:
    """Page ``page`` as an RGB image about :data:`PAGE_WIDTH` wide, and the page count."""
    if data.startswith(b"%PDF-"):
        with _PDFIUM:
            return _pdf_page(data, page)
    with Image.open(io.BytesIO(data)) as opened:
        pages = getattr(opened, "n_frames", 1)
        if not 1 <= page <= pages:
            raise IndexError(page)
        opened.seek(page - 1)
        image = opened.convert("RGB")
    if image.width > PAGE_WIDTH:
        image = image.resize((PAGE_WIDTH, round(image.height * PAGE_WIDTH / image.width)))
    return image, pages


def _pdf_page(data: bytes, page: int) -> tuple[Image.Image, int]:
    """:func:`_page` of a PDF (the caller holds :data:`_PDFIUM`)."""
    pdf = pdfium.PdfDocument(data)
    try:
        pages = len(pdf)
        if not 1 <= page <= pages:
            raise IndexError(page)
        handle = pdf[page - 1]
        width, _ = handle.get_size()
        image = handle.render(scale=PAGE_WIDTH / width).to_pil().convert("RGB")
        handle.close()
        return image, pages
    finally:
        pdf.close()


def _zoomed(
    image: Image.Image, box: tuple[int, int, int, int]
) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """The box's region with room around it, scaled to :data:`ZOOM_WIDTH`; the box moved too."""
    x0, y0, x1, y1 = box
    margin_x = max(60, (x1 - x0))
    margin_y = max(40, 2 * (y1 - y0))
    left, top = max(0, x0 - margin_x), max(0, y0 - margin_y)
    right, bottom = min(image.width, x1 + margin_x), min(image.height, y1 + margin_y)
    crop = image.crop((left, top, right, bottom))
    scale = ZOOM_WIDTH / crop.width
    crop = crop.resize((ZOOM_WIDTH, max(1, round(crop.height * scale))), Image.Resampling.LANCZOS)
    moved = (round((x0 - left) * scale), round((y0 - top) * scale),
             round((x1 - left) * scale), round((y1 - top) * scale))
    return crop, moved


def _windowed(
    image: Image.Image, box: tuple[int, int, int, int], height: int
) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """``height`` rows of the page centred on the box (inside the page); the box moved too."""
    middle = (box[1] + box[3]) // 2
    top = min(max(0, middle - height // 2), image.height - height)
    moved = (box[0], box[1] - top, box[2], box[3] - top)
    return image.crop((0, top, image.width, top + height)), moved
