"""Where a value came from, as stored: the document, its page and the value's box on it.

Extractions may carry three optional columns (docs/ingest.md): ``document_uri``
(a path relative to the documents root, a ``file:`` uri, or an ``http(s)``
uri; nothing else: no bare absolute path, no other scheme, no ``..``),
``page`` (1-based) and ``bbox`` (``x0,y0,x1,y1`` as fractions of the page,
origin top left; stored as four columns ``bbox_x0`` ... ``bbox_y1``).

Ingest checks the text of every uri (:mod:`fieldtrust.ingest.location_rules`,
in SQL); what a uri names is only decided when someone opens the item, by
:func:`resolve_document`. It refuses anything that resolves outside the
documents root (``..``, a symlink out, an absolute path elsewhere) and never
opens what it refuses; a remote uri is only ever a link unless its host is on
the allow-list. :func:`uri_problem` is the same text check in Python, so a
uri written to the store by other means is held to it too.

Some documents are never files: the demo draws its documents from the
store's rows. A package that draws documents names its function as an entry
point of group :data:`DRAWERS` (the demo does, in pyproject.toml), and
whoever shows a document (the dashboard's viewer, the Label Studio pages)
asks each of :func:`document_drawers` for a missing file, so no production
code imports the demo.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from urllib.parse import unquote, urlsplit

import duckdb

from fieldtrust.errors import DocumentError

#: The ingest columns of a location, and the stored columns they become.
LOCATION_COLUMNS = ("document_uri", "page", "bbox")
LOCATION_STORED_COLUMNS = ("document_uri", "page", "bbox_x0", "bbox_y0", "bbox_x1", "bbox_y1")

#: The entry-point group of document drawers: ``draw(con, location) -> bytes | None``.
DRAWERS = "fieldtrust.document_drawers"

SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
_CLIMB = re.compile(r"(^|[/\\])\.\.([/\\]|$)")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


# --- the text of a uri ----------------------------------------------------------------


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` is not an acceptable document uri, or None when it is.

    The same rules as ingest applies
    (:func:`fieldtrust.ingest.location_rules.location_rules`): a relative
    path without ``..``, a ``file:`` uri on this machine without ``..``, or
    an ``http(s)`` uri with a host.
    """
    text = uri.strip(" ")  # as ingest trims: spaces only
    if _CONTROL.search(text):
        return "holds a control character"
    match = SCHEME.match(text)
    if match is None:
        if text.startswith(("/", "\\")):
            return ("is an absolute path; write it relative to the documents root, or as a"
                    " file: uri")
        if _CLIMB.search(_dots_and_slashes(text)):
            return "climbs out of the documents root with '..'"
        return None
    scheme = match.group(1).lower()
    if scheme in ("http", "https"):
        return None if urlsplit(text).hostname else "is an http(s) uri without a host"
    if scheme != "file":
        return (f"has the scheme {scheme}:, but a document uri is a relative path, a file:"
                " uri or an http(s) uri")
    lowered = text.lower()
    if lowered.startswith("file://") and not lowered.startswith(("file:///", "file://localhost/")):
        return "is a file: uri on another machine; only file:///... on this one is read"
    if _CLIMB.search(_dots_and_slashes(text)):
        return "climbs out of the documents root with '..'"
    return None


def _dots_and_slashes(text: str) -> str:
    """``text`` with the escapes that can spell '..' or a separator decoded (%2e, %2f, %5c)."""
    lowered = text.lower()
    return lowered.replace("%2e", ".").replace("%2f", "/").replace("%5c", "\\")


# --- what an item points at -----------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """Where one extraction's value came from, as stored (any part may be missing)."""

    extraction_id: str
    doc_id: str
    document_uri: str | None
    page: int | None
    bbox: tuple[float, float, float, float] | None


_LOCATION_SQL = (
    "SELECT doc_id, document_uri, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1"
    " FROM {table} WHERE extraction_id = $id LIMIT 1"
)


def document_location(con: duckdb.DuckDBPyConnection, extraction_id: str) -> Location | None:
    """The stored location of ``extraction_id`` (None: no such extraction).

    Read from the sampled copy (``sampled_extractions``, a few per cent of
    the rows) when the item was drawn or labelled; else from ``extractions``.
    """
    params = {"id": extraction_id}
    row = con.execute(_LOCATION_SQL.format(table="sampled_extractions"), params).fetchone()
    if row is None:
        row = con.execute(_LOCATION_SQL.format(table="extractions"), params).fetchone()
    if row is None:
        return None
    doc_id, uri, page, x0, y0, x1, y1 = row
    box = (x0, y0, x1, y1)
    bbox = (float(x0), float(y0), float(x1), float(y1)) if None not in box else None
    return Location(extraction_id, str(doc_id), uri, None if page is None else int(page), bbox)


@dataclass(frozen=True)
class Resolved:
    """What a document uri names, once checked.

    ``kind`` is ``'file'`` (``path`` is a file inside the documents root that
    may be opened), ``'remote'`` (``url`` on an allowed host, may be fetched)
    or ``'link'`` (``url`` to show as a link only, never fetched).
    """

    kind: str
    uri: str
    path: Path | None = None
    url: str | None = None


def documents_root(setting: str, store_path: str | os.PathLike[str] | None) -> Path:
    """The documents root: the ``documents_root`` setting, else the store file's folder.

    A relative setting is taken from the store's folder too, so the store and
    its documents can move together.
    """
    base = Path(store_path).resolve().parent if store_path and str(store_path) != ":memory:" \
        else Path.cwd()
    if not setting:
        return base
    root = Path(setting).expanduser()
    return (root if root.is_absolute() else base / root).resolve()


def allowed_hosts(setting: str) -> frozenset[str]:
    """Host names of the ``documents_remote_hosts`` setting (comma-separated), lower case."""
    return frozenset(h.strip().lower() for h in setting.split(",") if h.strip())


def resolve_document(
    uri: str, *, root: str | os.PathLike[str], remote_hosts: frozenset[str] = frozenset()
) -> Resolved:
    """Decide whether ``uri`` may be opened, and what it is, without opening anything.

    A relative path is taken under ``root``; a ``file:`` uri is its path.
    Either is refused unless it resolves (symlinks followed, by metadata
    only) to a path inside ``root``. An ``http(s)`` uri becomes a link, or a
    ``'remote'`` to fetch when its host is in ``remote_hosts``.

    Raises
    ------
    DocumentError
        The uri breaks a rule of :func:`uri_problem`, or resolves outside ``root``.
    """
    problem = uri_problem(uri)
    if problem is not None:
        raise DocumentError(f"document {uri!r} {problem}; it is not opened")
    text = uri.strip(" ")  # as ingest trims: spaces only
    match = SCHEME.match(text)
    scheme = match.group(1).lower() if match else ""
    if scheme in ("http", "https"):
        host = (urlsplit(text).hostname or "").lower()
        return Resolved("remote" if host in remote_hosts else "link", text, url=text)
    base = Path(root).resolve()
    if scheme == "file":
        parts = urlsplit(text)
        candidate = Path(unquote(parts.path))
        if not candidate.is_absolute():  # file:relative/path
            candidate = base / candidate
    else:
        candidate = base / unquote(text)
    # realpath reads link targets (metadata), never the file: safe on what it refuses.
    resolved = Path(os.path.realpath(candidate))
    if not resolved.is_relative_to(base):
        raise DocumentError(
            f"document {uri!r} resolves outside the documents root {base}; it is not opened"
            " (set documents_root to the folder that holds your documents)"
        )
    return Resolved("file", text, path=resolved)


def relative_uri(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """``path`` as a document uri: relative to ``root`` when inside it, else a file: uri."""
    resolved = Path(path).resolve()
    base = Path(root).resolve()
    if resolved.is_relative_to(base):
        return resolved.relative_to(base).as_posix()
    return resolved.as_uri()


# --- documents drawn, not stored ------------------------------------------------------


Drawer = Callable[[duckdb.DuckDBPyConnection, Location], bytes | None]


@functools.cache
def document_drawers() -> tuple[Drawer, ...]:
    """The installed document drawers (entry points of :data:`DRAWERS`), loaded once."""
    return tuple(entry.load() for entry in entry_points(group=DRAWERS))
