"""The document viewer: the page an extraction was read from, its value boxed.

Used beside the value on the review page, the priority queue and the
adjudication view. It reads the item's location (:mod:`fieldtrust.store.locations`),
finds the document and renders the page (:mod:`fieldtrust.dashboard.render`). When
there is nothing to show (no document, missing, unreadable, refused, a remote
link) it says why, with the uri and the text excerpt: the viewer never stands
between a reviewer and a verdict, and "unclear" stays a verdict.
"""

from __future__ import annotations

import logging
import threading
from typing import Literal

import duckdb
import streamlit as st
from fieldtrust.dashboard import data, layout, render
from fieldtrust.store.locations import Location, allowed_hosts, documents_root
from fieldtrust.store.pages import PAGE_WIDTH

log = logging.getLogger("fieldtrust.dashboard")

#: Pixels a whole page is shown at (an A4 page is then about 800 pixels tall).
PAGE_SHOWN_WIDTH = 560
#: Rows of a rendered page the review page shows around the value: about 540 pixels
#: on screen, so the page, its box and the verdict buttons fit a window 1000 pixels high.
FIT_ROWS = round(540 * PAGE_WIDTH / PAGE_SHOWN_WIDTH)


def show_document(extraction_id: str, excerpt: str | None = None, *, zoom_key: str) -> None:
    """Draw the page of ``extraction_id`` with its value boxed, or a notice and the excerpt."""
    try:
        shown = _page(extraction_id, zoom_key)
    except Exception as exc:  # whatever goes wrong, labelling goes on
        log.exception("document viewer failed for %s", extraction_id)
        shown = render.Notice(f"The document could not be shown ({type(exc).__name__}).", None)
    if isinstance(shown, render.Notice):
        _notice(shown, extraction_id, excerpt)


def _page(extraction_id: str, zoom_key: str) -> render.Notice | None:
    location = data.cached("document_location", extraction_id)
    if location is None:
        return render.Notice("No such extraction in the store.", None)
    with data.reading(data.db_path()) as con:
        source = open_document(con, location)
    if isinstance(source, render.Notice):
        return source
    return _draw(location, source, zoom_key, whole_key=None)


def open_document(
    con: duckdb.DuckDBPyConnection, location: Location
) -> render.Source | render.Notice:
    """The document of ``location`` as the dashboard's settings allow it (cached for demo
    and remote documents); ``con`` is asked only for demo documents."""
    settings = data.settings()
    path = data.db_path()
    return render.open_document(
        con, location, root=documents_root(settings.documents_root, path),
        remote_hosts=allowed_hosts(settings.documents_remote_hosts), store_key=path,
    )


def show_page(
    location: Location, document: render.Source | render.Notice, excerpt: str | None, *,
    zoom_key: str, whole_key: str,
) -> None:
    """Draw ``document`` (opened beforehand) with the value boxed, a tall page cut to fit.

    The review page opens the document on the connection its verdict was written
    on, so drawing needs no store. A page taller than :data:`FIT_ROWS` shows the
    rows around the value unless ``whole_key``'s toggle asks for the whole page.
    """
    try:
        shown = document if isinstance(document, render.Notice) else \
            _draw(location, document, zoom_key, whole_key=whole_key)
    except Exception as exc:  # whatever goes wrong, labelling goes on
        log.exception("document viewer failed for %s", location.extraction_id)
        shown = render.Notice(f"The document could not be shown ({type(exc).__name__}).", None)
    if isinstance(shown, render.Notice):
        _notice(shown, location.extraction_id, excerpt)


def prepare(document: render.Source | render.Notice, location: Location) -> None:
    """Render the page of ``document`` as :func:`show_page` first shows it, in the background.

    For the item a reviewer gets next: when their key is pressed the page is in
    the render cache. PDFium is serialised inside :mod:`~fieldtrust.dashboard.render`.
    """
    if isinstance(document, render.Notice):
        return

    def work() -> None:
        try:
            render.page_image(document, location.page, location.bbox, window=FIT_ROWS,
                              width=PAGE_SHOWN_WIDTH)
        except Exception:  # a page that cannot be drawn says so when it is shown
            log.debug("preparing the page of %s failed", location.extraction_id, exc_info=True)

    threading.Thread(target=work, name="fieldtrust-prepare-page", daemon=True).start()


def _draw(
    location: Location, source: render.Source, zoom_key: str, *, whole_key: str | None
) -> render.Notice | None:
    boxed = location.bbox is not None
    if whole_key is None:
        zoom, whole = st.toggle("Zoom to the value", key=zoom_key, disabled=not boxed), True
    else:
        left, right = st.columns(2)
        zoom = left.toggle("Zoom to the value", key=zoom_key, disabled=not boxed)
        whole = right.toggle("Whole page", key=whole_key, disabled=not boxed or zoom)
    # A whole page fits the screen beside the value, rendered at the width it is shown at;
    # the zoom takes the column's width.
    zoomed = zoom and boxed
    image = render.page_image(source, location.page, location.bbox, zoom=zoomed,
                              window=None if whole else FIT_ROWS,
                              width=None if zoomed else PAGE_SHOWN_WIDTH)
    if isinstance(image, render.Notice):
        return image
    width: Literal["stretch"] | int = "stretch" if zoomed else image.width
    # PNG as rendered: "auto" would have Streamlit decode it and encode a JPEG at every draw.
    st.image(image.png, width=width, output_format="PNG",
             alt=f"page {image.page} of the document")
    where = f"Page {image.page} of {image.pages} · {layout.code_span(location.document_uri)}"
    if location.bbox is None:
        where += " · the value's place on the page is not known (no bbox stored)"
    elif location.page is None:
        where += " · no page stored: the first page is shown"
    elif not whole and not zoom and abs(image.height - FIT_ROWS * image.width
                                        / PAGE_WIDTH) <= 1:  # cut to fit (scaled: rounded)
        where += " · the part of the page around the value (Whole page shows all of it)"
    st.caption(where)
    return None


def _notice(notice: render.Notice, extraction_id: str, excerpt: str | None) -> None:
    # Uris and excerpts come from ingested files: shown as written, never as markdown.
    st.warning(layout.plain(notice.message), icon=":material/description:")
    if notice.uri:
        st.caption(f"Document: {layout.code_span(notice.uri)}")
    if notice.link:
        st.link_button("Open the document in a new tab", notice.link)
    text = excerpt if excerpt is not None else data.cached("source_excerpt", extraction_id)
    if text:
        st.markdown("**Text excerpt**")
        st.text(text)
    else:
        st.caption("No text excerpt stored either: judge from the value, or say unclear.")
