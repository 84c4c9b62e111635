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
from typing import Literal

import streamlit as st
from fieldtrust.dashboard import data, layout, render
from fieldtrust.store.locations import allowed_hosts, documents_root

log = logging.getLogger("fieldtrust.dashboard")

#: Pixels a whole page is shown at (an A4 page is then about 800 pixels tall).
PAGE_SHOWN_WIDTH = 560


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
    settings = data.settings()
    path = data.db_path()
    with data.reading(path) as con:
        source = render.open_document(
            con, location, root=documents_root(settings.documents_root, path),
            remote_hosts=allowed_hosts(settings.documents_remote_hosts), store_key=path,
        )
    if isinstance(source, render.Notice):
        return source
    zoom = st.toggle("Zoom to the value", key=zoom_key, disabled=location.bbox is None)
    image = render.page_image(source, location.page, location.bbox,
                              zoom=zoom and location.bbox is not None)
    if isinstance(image, render.Notice):
        return image
    # A whole page fits the screen beside the value; the zoom takes the column's width.
    width: Literal["stretch"] | int = "stretch" if zoom else min(image.width, PAGE_SHOWN_WIDTH)
    st.image(image.png, width=width, alt=f"page {image.page} of the document")
    where = f"Page {image.page} of {image.pages} · {layout.code_span(location.document_uri)}"
    if location.bbox is None:
        where += " · the value's place on the page is not known (no bbox stored)"
    elif location.page is None:
        where += " · no page stored: the first page is shown"
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
