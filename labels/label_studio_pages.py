"""The page of every Label Studio task, as a PNG the Label Studio server can serve.

Label Studio's ``<Image>`` shows an image by URL, and cannot open a PDF. So
:func:`write_pages` renders each item's page (:func:`fieldtrust.store.pages.page_png`,
the function the review page renders with) into one folder, one file per
(document, page), and gives each item the URL of its page: the folder's URL
prefix and the file's name. Two ways to serve the folder (docs/review.md):

* Label Studio's own local files: start it with
  ``LOCAL_FILES_SERVING_ENABLED=true`` and ``LOCAL_FILES_DOCUMENT_ROOT`` a
  folder holding the pages folder, add a Local Files storage of the pages
  folder to the project, and use the prefix ``/data/local-files/?d=PATH/``
  (PATH: the pages folder under that root; :data:`LOCAL_FILES`);
* any web server the annotators' browsers reach: the prefix is its URL of
  the folder (setting ``label_studio_pages_url``).

How a document's bytes are found is the caller's (``open_document``): files
under the documents root, the demo's drawn documents.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
from fieldtrust.labels.label_studio import TaskPage
from fieldtrust.store.locations import Location
from fieldtrust.store.pages import UNREADABLE, page_png

from fieldtrust.errors import InputError

#: The URL path of Label Studio's local files serving; ``?d=`` takes a path
#: under its ``LOCAL_FILES_DOCUMENT_ROOT``.
LOCAL_FILES = "/data/local-files/?d="


def local_files_prefix(folder: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """The URL prefix of ``folder`` served by Label Studio with document root ``root``.

    Raises
    ------
    InputError
        ``folder`` is not inside ``root``: Label Studio would not serve it.
    """
    pages, base = Path(folder).resolve(), Path(root).resolve()
    if not pages.is_relative_to(base):
        raise InputError(
            f"the pages folder {pages} is not under the Label Studio document root {base}:"
            " write the pages inside it, or serve them elsewhere (label_studio_pages_url)"
        )
    inside = pages.relative_to(base).as_posix()
    return LOCAL_FILES + ("" if inside == "." else quote(inside) + "/")


def write_pages(
    items: pa.Table,
    folder: str | os.PathLike[str],
    *,
    url_prefix: str,
    open_document: Callable[[Location], bytes | None],
) -> dict[str, TaskPage]:
    """Render each item's page into ``folder``; the page of every item that has one.

    Items without a document, or whose document cannot be opened or read,
    get no page (their task says where the value came from in text).

    Raises
    ------
    InputError
        ``folder`` cannot be made or written.
    """
    target = Path(folder)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot make the pages folder {target}: {exc.strerror}") from exc
    done: dict[tuple[str, int], TaskPage | None] = {}
    pages: dict[str, TaskPage] = {}
    for row in items.to_pylist():
        uri = row.get("document_uri")
        if not uri:
            continue
        number = int(row.get("page") or 1)
        key = (str(uri), number)
        if key not in done:
            location = Location(str(row["extraction_id"]), str(row["doc_id"]), str(uri), number,
                                None)
            done[key] = _write_page(location, target, url_prefix, open_document)
        page = done[key]
        if page is not None:
            pages[str(row["extraction_id"])] = page
    return pages


def _write_page(
    location: Location, folder: Path, url_prefix: str,
    open_document: Callable[[Location], bytes | None],
) -> TaskPage | None:
    data = open_document(location)
    if data is None:
        return None
    page = location.page or 1
    try:
        png, width, height = page_png(data, page)
    except (*UNREADABLE, IndexError):
        return None
    digest = hashlib.sha256(f"{location.document_uri}\n{page}".encode()).hexdigest()[:20]
    name = f"{digest}-p{page}.png"
    try:
        (folder / name).write_bytes(png)
    except OSError as exc:
        raise InputError(f"cannot write {folder / name}: {exc.strerror}") from exc
    return TaskPage(url_prefix + quote(name), width, height)
