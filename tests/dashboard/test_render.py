"""Rendering a document page for review: the box, the zoom, the cache, every notice."""

from __future__ import annotations

import http.server
import io
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fieldtrust.dashboard import render
from fieldtrust.store.locations import Location
from fpdf import FPDF
from PIL import Image


def _location(uri: str | None, page: int | None = 1,
              bbox: tuple[float, float, float, float] | None = None) -> Location:
    return Location("x1", "d1", uri, page, bbox)


def _red(png: bytes) -> tuple[int, int, int, int] | None:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    mask = Image.eval(image.split()[0], lambda v: 255 if v > 200 else 0)
    green = Image.eval(image.split()[1], lambda v: 255 if v < 60 else 0)
    return Image.composite(mask, Image.new("L", image.size, 0), green).getbbox()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    Image.new("RGB", (400, 600), (250, 250, 250)).save(folder / "receipt.png")
    pdf = FPDF(format="A4")
    pdf.add_page()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.text(20, 30, "page two")
    pdf.output(str(folder / "two.pdf"))
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    return folder


def test_the_box_is_drawn_where_the_bbox_says(root: Path) -> None:
    render.PAGES.clear()
    source = render.open_document(None, _location("receipt.png"), root=root)
    assert isinstance(source, render.Source)
    image = render.page_image(source, 1, (0.25, 0.5, 0.75, 0.6))
    assert isinstance(image, render.PageImage)
    assert (image.width, image.height, image.pages) == (400, 600, 1)
    assert image.box == (100, 300, 300, 360)
    x0, y0, x1, y1 = _red(image.png)  # type: ignore[misc]
    pad = render.BOX_WIDTH
    assert (x0, y0, x1, y1) == (100 - pad, 300 - pad, 300 + pad + 1, 360 + pad + 1)
    assert render.page_image(source, 1, (0.25, 0.5, 0.75, 0.6)) is image  # cached


def test_zoom_shows_the_region_enlarged(root: Path) -> None:
    source = render.open_document(None, _location("receipt.png"), root=root)
    zoomed = render.page_image(source, 1, (0.25, 0.5, 0.5, 0.55), zoom=True)  # type: ignore[arg-type]
    assert isinstance(zoomed, render.PageImage)
    assert zoomed.width == render.ZOOM_WIDTH and zoomed.height < 600
    x0, _, x1, _ = zoomed.box  # type: ignore[misc]
    assert (x1 - x0) / zoomed.width > 0.3  # the value fills a good part of the view


@pytest.mark.parametrize(
    ("bbox", "top"),
    [((0.25, 0.9, 0.5, 0.95), 300), ((0.25, 0.02, 0.5, 0.05), 0), ((0.25, 0.5, 0.5, 0.55), 165)],
    ids=["near_the_bottom", "near_the_top", "in_the_middle"],
)
def test_a_window_keeps_the_box_on_a_page_cut_to_fit_the_screen(
    root: Path, bbox: tuple[float, float, float, float], top: int
) -> None:
    source = render.open_document(None, _location("receipt.png"), root=root)
    assert isinstance(source, render.Source)
    whole = render.page_image(source, 1, bbox)
    # The window counts rows of a page PAGE_WIDTH wide: this 400-pixel image gets 4/9 of it.
    cut = render.page_image(source, 1, bbox, window=675)
    assert isinstance(whole, render.PageImage) and isinstance(cut, render.PageImage)
    assert (cut.width, cut.height) == (400, 300)  # the page's width, the window's height
    assert whole.box is not None and cut.box is not None
    assert cut.box == (whole.box[0], whole.box[1] - top, whole.box[2], whole.box[3] - top)
    assert _red(cut.png) is not None  # the box is drawn inside the window
    # A page that fits is shown whole.
    assert render.page_image(source, 1, bbox, window=1400).height == 600  # type: ignore[union-attr]



def test_a_page_comes_at_the_width_it_is_shown_at_with_its_box_scaled_too(root: Path) -> None:
    # Streamlit scales and encodes a wider image again on the server at every draw:
    # the render worker sends it at the width the viewer shows it at instead.
    source = render.open_document(None, _location("receipt.png"), root=root)
    assert isinstance(source, render.Source)
    full = render.page_image(source, 1, (0.25, 0.5, 0.75, 0.6))
    shown = render.page_image(source, 1, (0.25, 0.5, 0.75, 0.6), width=200)
    assert isinstance(full, render.PageImage) and isinstance(shown, render.PageImage)
    assert Image.open(io.BytesIO(shown.png)).size == (shown.width, shown.height) == (200, 300)
    assert shown.box == (50, 150, 150, 180)  # the box where the scaled page has the value
    red = _red(shown.png)
    assert red is not None
    assert all(abs(drawn - at) <= render.BOX_WIDTH + 1 for drawn, at in
               zip(red, shown.box, strict=True))
    # A narrower page keeps its own width.
    assert render.page_image(source, 1, None, width=560).width == 400  # type: ignore[union-attr]

def test_pdfium_is_never_called_from_two_threads_at_once(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # PDFium crashes or corrupts the process when two threads call it at once, even on
    # different documents, and the server renders for every reviewer's session and
    # ahead of each one's next item. Every render is a request to the one render
    # worker (a process that reads one request, renders it, answers, then reads the
    # next); the server sends the next request only once the last one is answered.
    source = render.open_document(None, _location("two.pdf", 2), root=root)
    assert isinstance(source, render.Source)
    renderer = render.Renderer()
    alone = renderer.render(source, 2, None, False)
    assert isinstance(alone, render.PageImage)
    active, most, workers = [0], [0], set()
    started, frame = renderer._started, render.Renderer._frame
    answered = threading.local()

    def watched_start():  # type: ignore[no-untyped-def]
        active[0] += 1
        most[0] = max(most[0], active[0])
        time.sleep(0.005)  # widen the window two unguarded requests would share
        process = started()
        workers.add(process.pid)
        answered.frames = 0
        return process

    def watched_frame(process, deadline):  # type: ignore[no-untyped-def]
        payload = frame(process, deadline)
        answered.frames += 1
        if answered.frames == 2:  # the header, then the picture: this request is answered
            active[0] -= 1
        return payload

    monkeypatch.setattr(renderer, "_started", watched_start)
    monkeypatch.setattr(renderer, "_frame", watched_frame)
    results: list[bytes] = []

    def draw() -> None:
        for _ in range(5):
            image = renderer.render(source, 2, None, False)
            assert isinstance(image, render.PageImage)
            results.append(image.png)

    threads = [threading.Thread(target=draw) for _ in range(8)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        renderer.stop()
    assert most == [1] and active == [0]
    assert len(workers) == 1  # one worker process rendered all forty
    assert len(results) == 40 and set(results) == {alone.png}


def test_a_pdf_page_is_rendered_and_counted(root: Path) -> None:
    source = render.open_document(None, _location("two.pdf", 2), root=root)
    image = render.page_image(source, 2, None)  # type: ignore[arg-type]
    assert isinstance(image, render.PageImage)
    assert (image.page, image.pages, image.width) == (2, 2, render.PAGE_WIDTH)
    grey = Image.open(io.BytesIO(image.png)).convert("L")
    assert grey.getextrema()[0] < 100  # the text of page two is on it
    missing = render.page_image(source, 3, None)  # type: ignore[arg-type]
    assert isinstance(missing, render.Notice) and "no page 3" in missing.message


@pytest.mark.parametrize(("uri", "message"), [
    (None, "No document is stored"),
    ("nothing/here.pdf", "The document is missing"),
    ("../outside.pdf", "climbs out of the documents root"),
    ("file:///etc/passwd", "resolves outside the documents root"),
    ("broken.pdf", "cannot be read as a PDF or an image"),
])
def test_every_problem_becomes_a_notice_with_the_uri(
    root: Path, uri: str | None, message: str
) -> None:
    shown = render.open_document(None, _location(uri), root=root)
    if isinstance(shown, render.Source):
        shown = render.page_image(shown, 1, None)
    assert isinstance(shown, render.Notice)
    assert message in shown.message
    assert shown.uri == uri


def test_the_cache_is_bounded(root: Path) -> None:
    render.PAGES.clear()
    source = render.open_document(None, _location("receipt.png"), root=root)
    for k in range(render.CACHE_PAGES + 10):
        render.page_image(source, 1, (0.1, 0.1, 0.2 + k / 1000, 0.2))  # type: ignore[arg-type]
    assert len(render.PAGES) == render.CACHE_PAGES


@pytest.fixture
def remote(root: Path) -> Iterator[tuple[str, list[str]]]:
    """A local web server handing out receipt.png; yields its url and the paths asked for."""
    asked: list[str] = []
    body = (root / "receipt.png").read_bytes()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/scan.png", asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_remote_document_is_a_link_unless_its_host_is_allowed(
    root: Path, remote: tuple[str, list[str]]
) -> None:
    url, asked = remote
    render.SOURCES.clear()
    link = render.open_document(None, _location(url), root=root)
    assert isinstance(link, render.Notice) and link.link == url
    assert asked == []  # never fetched
    fetched = render.open_document(None, _location(url), root=root,
                                   remote_hosts=frozenset({"127.0.0.1"}))
    assert isinstance(fetched, render.Source)
    assert fetched.data == (root / "receipt.png").read_bytes()
    assert asked == ["/scan.png"]
