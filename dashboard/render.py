"""A document page as the reviewer sees it: rendered, the value's box drawn, cached.

No Streamlit here (:mod:`fieldtrust.dashboard.viewer` draws); the benchmark
times these functions. A document is found by :func:`open_document`, which
decides with :func:`fieldtrust.store.locations.resolve_document` before it
reads anything: a file inside the documents root, a remote document on an
allowed host (redirects followed among allowed hosts only), a document drawn
from the store's rows, or a :class:`Notice` saying why there is nothing to
show. :func:`page_image` renders one page (PDF through pypdfium2, PNG, JPEG,
TIFF and WebP through Pillow) with the box and returns PNG bytes; results are
kept in a small LRU cache (:data:`CACHE_PAGES`).

What a render may cost is bounded twice. Before anything is decoded, the
format, the page size and the pixels are checked
(:mod:`fieldtrust.store.documents`: at most 40 megapixels). And the render
itself runs in a worker process (:mod:`fieldtrust.dashboard.render_worker`)
whose address space the kernel caps at :data:`RENDER_MEMORY` beyond its own,
for :data:`RENDER_TIMEOUT` seconds at most: a document that needs more gets
a notice, and the server goes on.

Drawn documents are the demo's (its documents are never files). The
dashboard does not import the demo: a package that draws documents names
its function as an entry point
(:data:`fieldtrust.store.locations.DRAWERS`; the demo does, in pyproject.toml),
and :func:`open_document` asks each for a missing file.
"""

from __future__ import annotations

import io
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path

import duckdb
from fieldtrust.store import pages as page_images
from fieldtrust.store.documents import document_format, fetch_remote
from fieldtrust.store.locations import Location, document_drawers, resolve_document
from fieldtrust.store.pages import PAGE_WIDTH
from PIL import Image, ImageDraw

from fieldtrust.errors import DocumentError

#: Width of the zoomed view of the value's region.
ZOOM_WIDTH = 900
#: Rendered pages kept (about 0.2 MB each).
CACHE_PAGES = 48
#: Largest remote document fetched from an allowed host, and how long to wait for it.
MAX_REMOTE_BYTES = 20 * 1024 * 1024
REMOTE_TIMEOUT = 5.0
#: Entry-point group of the functions that draw documents from a store's rows:
#: ``draw(con, location) -> bytes | None`` (None: not one of theirs).
BOX_COLOUR = (230, 20, 60)
BOX_WIDTH = 4
#: Memory a render may take beyond the worker process's own (its address space, capped by
#: the kernel); a page of the whole pixel budget takes about 310 MB (docs/reliability.md).
RENDER_MEMORY = 1024 * 2**20
#: Seconds a render may take before its worker is stopped.
RENDER_TIMEOUT = 30.0


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
#: Drawn and remote documents, drawn or fetched once (files are read each time: cheap,
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

    ``con`` (a store connection) is asked for drawn documents (the demo's),
    which come from the store's rows instead of a file; ``store_key`` (the
    store's path) keeps drawn documents of different stores apart in the cache.
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
        fetched = SOURCES.get(("remote", uri),
                              lambda: _fetch(uri, str(resolved.url), remote_hosts))
        assert isinstance(fetched, Source | Notice)
        return fetched
    path = resolved.path
    assert path is not None
    if not path.is_file():
        drawn = None
        if con is not None:
            drawn = SOURCES.get(("drawn", store_key, uri), lambda: _drawn(con, location))
        if isinstance(drawn, Source):
            return drawn
        return Notice("The document is missing: there is no file at this uri under the"
                      " documents root.", uri)
    try:
        stat = path.stat()
        return Source((str(path), stat.st_mtime_ns, stat.st_size), path.read_bytes(), uri)
    except OSError as exc:
        return Notice(f"The document cannot be read ({exc.strerror}).", uri)



def _drawn(con: duckdb.DuckDBPyConnection, location: Location) -> Source | None:
    uri = location.document_uri
    for draw in document_drawers():
        data = draw(con, location)
        if data is not None and uri:
            return Source(("drawn", uri, data), data, uri)
    return None


def _fetch(uri: str, url: str, hosts: frozenset[str]) -> Source | Notice:
    try:
        data = fetch_remote(url, hosts, max_bytes=MAX_REMOTE_BYTES, timeout=REMOTE_TIMEOUT)
    except DocumentError as exc:
        return Notice(f"Not shown: {exc}.", uri, url)
    return Source(("remote", url, hash(data)), data, uri)


def page_image(
    source: Source, page: int | None, bbox: tuple[float, float, float, float] | None,
    *, zoom: bool = False, window: int | None = None, width: int | None = None,
) -> PageImage | Notice:
    """Page ``page`` (1-based; None: the first) of ``source`` with ``bbox`` drawn, cached.

    With ``zoom`` the image is the box's region with a margin, enlarged. With
    ``window`` (rows of a page :data:`PAGE_WIDTH` wide; a narrower image gets
    as many in proportion) a taller page is cut to that height around the
    box, its full width kept, so the value and what is around it fit a screen.
    With ``width`` a wider image is scaled down to it in the render worker:
    it is the width the page is shown at, which Streamlit would otherwise
    scale to and encode again on the server at every draw.
    Returns a :class:`Notice` when the bytes are no readable PDF or image of
    an allowed format, the page is not in the document, or rendering it would
    take more pixels, memory or time than a page may.
    """
    key = (source.key, page or 1, bbox, zoom, window, width)
    result = PAGES.get(key, lambda: _checked_render(source, page or 1, bbox, zoom, window, width))
    assert isinstance(result, PageImage | Notice)
    return result


def _checked_render(
    source: Source, page: int, bbox: tuple[float, float, float, float] | None, zoom: bool,
    window: int | None = None, width: int | None = None,
) -> PageImage | Notice:
    try:
        document_format(source.data)  # nothing else is handed to the worker
    except DocumentError as exc:
        return Notice(f"Not shown: {exc}.", source.uri)
    return RENDERER.render(source, page, bbox, zoom, window, width)


# --- inside the render worker ------------------------------------------------------------------


def prepare_decoders() -> None:
    """Load the decoders a render uses; the worker calls this before it caps its memory, so
    what it caps is the render.

    Pillow's own guard is off: :func:`_page` checks every image's header against the
    pixel budget right after opening it, before any pixel is decoded, and says why.
    """
    from PIL import JpegImagePlugin, PngImagePlugin, TiffImagePlugin, WebPImagePlugin

    del JpegImagePlugin, PngImagePlugin, TiffImagePlugin, WebPImagePlugin
    Image.MAX_IMAGE_PIXELS = None


def over_memory(uri: str, memory: int) -> Notice:
    """The notice of a render that needed more memory than :data:`RENDER_MEMORY`."""
    return Notice(f"The page needs more than the {memory // 2**20} MB of memory a render may"
                  " take; open the document itself.", uri)


def render_page(
    source: Source, page: int, bbox: tuple[float, float, float, float] | None, zoom: bool,
    window: int | None = None, width: int | None = None,
) -> PageImage | Notice:
    """Render one page with its box, after the size checks; run by the render worker."""
    try:
        image, pages = page_images.render_page(source.data, page, width=PAGE_WIDTH)
    except DocumentError as exc:
        return Notice(f"Not shown: {exc}.", source.uri)
    except page_images.UNREADABLE as exc:
        return Notice(f"The document cannot be read as a PDF or an image ({exc}).", source.uri)
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
    if width is not None and image.width > width:
        image, box = _scaled(image, box, width)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", compress_level=1)
    return PageImage(buffer.getvalue(), image.width, image.height, page, pages, box)


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


def _scaled(
    image: Image.Image, box: tuple[int, int, int, int] | None, width: int
) -> tuple[Image.Image, tuple[int, int, int, int] | None]:
    """``image`` scaled down to ``width`` (bilinear, as Streamlit scales it); the box too."""
    scale = width / image.width
    scaled = image.resize((width, max(1, round(image.height * scale))), Image.Resampling.BILINEAR)
    if box is None:
        return scaled, None
    x0, y0, x1, y1 = (round(v * scale) for v in box)
    return scaled, (x0, y0, x1, y1)


def _windowed(
    image: Image.Image, box: tuple[int, int, int, int], height: int
) -> tuple[Image.Image, tuple[int, int, int, int]]:
    """``height`` rows of the page centred on the box (inside the page); the box moved too."""
    middle = (box[1] + box[3]) // 2
    top = min(max(0, middle - height // 2), image.height - height)
    moved = (box[0], box[1] - top, box[2], box[3] - top)
    return image.crop((0, top, image.width, top + height)), moved


# --- the server's side of the worker ------------------------------------------------------------


class Renderer:
    """The render worker of this process: started on first use, restarted after a failure.

    One render at a time (the lock): the server's memory for rendering is one
    worker's, whatever the number of reviewers.
    """

    def __init__(self, memory: int = RENDER_MEMORY, timeout: float = RENDER_TIMEOUT) -> None:
        self.memory = memory
        self.timeout = timeout
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None

    def render(
        self, source: Source, page: int, bbox: tuple[float, float, float, float] | None,
        zoom: bool, window: int | None = None, width: int | None = None,
    ) -> PageImage | Notice:
        """``page`` of ``source`` rendered in the worker, or the notice of why not."""
        from fieldtrust.dashboard.render_worker import write_frame

        request = json.dumps({"uri": source.uri, "page": page, "bbox": bbox, "zoom": zoom,
                              "window": window, "width": width})
        with self._lock:
            process = self._started()
            assert process.stdin is not None
            try:
                write_frame(process.stdin, request.encode())
                write_frame(process.stdin, source.data)
                process.stdin.flush()
                deadline = time.monotonic() + self.timeout
                header = self._frame(process, deadline)
                png = self._frame(process, deadline)
            except (OSError, TimeoutError) as exc:
                self.stop()
                if isinstance(exc, TimeoutError):
                    return Notice(f"The page took more than the {self.timeout:.0f} s a render may"
                                  " take; open the document itself.", source.uri)
                return over_memory(source.uri, self.memory)
        reply = json.loads(header)
        if "notice" in reply:
            return Notice(str(reply["notice"]), source.uri)
        box = tuple(reply["box"]) if reply["box"] is not None else None
        return PageImage(png, int(reply["width"]), int(reply["height"]), int(reply["page"]),
                         int(reply["pages"]), box)

    def stop(self) -> None:
        """End the worker (the next render starts another)."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
        if process is not None:
            process.wait()

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None or self._process.poll() is not None:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "fieldtrust.dashboard.render_worker", str(self.memory)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            )
        return self._process

    @staticmethod
    def _frame(process: subprocess.Popen[bytes], deadline: float) -> bytes:
        """One frame of the worker's answer, by ``deadline``; OSError when the worker died."""
        assert process.stdout is not None
        length = int.from_bytes(_read(process, 4, deadline), "big")
        return _read(process, length, deadline)


def _read(process: subprocess.Popen[bytes], size: int, deadline: float) -> bytes:
    assert process.stdout is not None
    descriptor = process.stdout.fileno()
    chunks, left = [], size
    while left:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not select.select([descriptor], [], [], remaining)[0]:
            raise TimeoutError
        chunk = os.read(descriptor, min(left, 1 << 20))
        if not chunk:
            raise OSError("the render worker ended")  # killed at its memory cap, or crashed
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


#: The renderer every page of this server process goes through.
RENDERER = Renderer()
