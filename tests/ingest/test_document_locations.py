"""Document locations: ingest checks of document_uri, page and bbox; uris resolved safely."""

from __future__ import annotations

import csv
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fieldtrust.ingest.extractions import ingest_files
from fieldtrust.store.locations import (
    document_location,
    documents_root,
    relative_uri,
    resolve_document,
    uri_problem,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fieldtrust.errors import DocumentError, ValidationError
from tests.conftest import table_fingerprint

BASE = {
    "extraction_id": "x1", "doc_id": "d1", "doc_type": "invoice", "field": "total",
    "value": "12.50", "confidence": "0.9", "extracted_at": "2026-01-05T10:00:00Z",
}


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    columns = list(dict.fromkeys(k for row in rows for k in row))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, columns)
        writer.writeheader()
        writer.writerows(rows)
    return path


def rows_with(**changes: str) -> list[dict[str, Any]]:
    """Two good rows; the second gets ``changes`` (so the problem is on data row 2)."""
    first = {**BASE, "document_uri": "scans/a.pdf", "page": "1", "bbox": "0.1,0.2,0.3,0.4"}
    second = {**first, "extraction_id": "x2", "field": "tax", **changes}
    return [first, second]


def test_locations_are_stored_typed(con: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    rows = rows_with(document_uri="file:///srv/docs/b.png", page=" 3 ", bbox="[0, 0.5, 1, 1]")
    rows.append({**BASE, "extraction_id": "x3"})  # no location at all
    ingest_files(con, [write_csv(tmp_path / "a.csv", rows)])
    stored = con.execute(
        "SELECT extraction_id, document_uri, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1"
        " FROM extractions ORDER BY extraction_id").fetchall()
    assert stored == [
        ("x1", "scans/a.pdf", 1, 0.1, 0.2, 0.3, 0.4),
        ("x2", "file:///srv/docs/b.png", 3, 0.0, 0.5, 1.0, 1.0),
        ("x3", None, None, None, None, None, None),
    ]
    assert document_location(con, "x2").bbox == (0.0, 0.5, 1.0, 1.0)  # type: ignore[union-attr]
    assert document_location(con, "nope") is None


BAD = [
    ({"page": "0"}, "row 2, column page: 0 is not a page number: pages count from 1"),
    ({"page": "-2"}, "row 2, column page: '-2' is not a page number (a whole number"),
    ({"page": "1.5"}, "row 2, column page: '1.5' is not a page number (a whole number"),
    ({"page": "two"}, "row 2, column page: 'two' is not a page number"),
    ({"bbox": "0.1,0.2,0.3"}, "row 2, column bbox: '0.1,0.2,0.3' is not a bbox: write four"),
    ({"bbox": "a,b,c,d"}, "row 2, column bbox: 'a,b,c,d' is not a bbox"),
    ({"bbox": "0.1,0.2,nan,0.4"}, "row 2, column bbox: '0.1,0.2,nan,0.4' is not a bbox"),
    ({"bbox": "0.5,0.2,0.3,0.4"}, "row 2, column bbox: '0.5,0.2,0.3,0.4' does not fit the page"),
    ({"bbox": "0.1,0.4,0.3,0.4"}, "row 2, column bbox: '0.1,0.4,0.3,0.4' does not fit the page"),
    ({"bbox": "-0.1,0.2,0.3,0.4"}, "row 2, column bbox: '-0.1,0.2,0.3,0.4' does not fit"),
    ({"bbox": "0.1,0.2,1.2,0.4"}, "row 2, column bbox: '0.1,0.2,1.2,0.4' does not fit"),
    ({"page": "", "bbox": "0.1,0.2,0.3,0.4"}, "row 2, column bbox: '0.1,0.2,0.3,0.4' has no page"),
    ({"document_uri": "../../etc/passwd"},
     "row 2, column document_uri: '../../etc/passwd' climbs out of the documents root"),
    ({"document_uri": "scans/../../etc/passwd"}, "climbs out of the documents root with '..'"),
    ({"document_uri": "scans/%2e%2e/%2e%2e/etc/passwd"}, "climbs out of the documents root"),
    ({"document_uri": "..\\..\\boot.ini"}, "climbs out of the documents root"),
    ({"document_uri": "/etc/passwd"},
     "row 2, column document_uri: '/etc/passwd' is an absolute path; write it relative"),
    ({"document_uri": "file:../../etc/passwd"}, "'file:../../etc/passwd' climbs out"),
    ({"document_uri": "file:///srv/docs/../../etc/passwd"}, "climbs out of the documents root"),
    ({"document_uri": "file://fileserver/share/a.pdf"}, "is a file: uri on another machine"),
    ({"document_uri": "javascript:alert(1)"},
     "'javascript:alert(1)' has the scheme javascript:, but a document uri is a relative path"),
    ({"document_uri": "C:\\scans\\a.pdf"}, "has the scheme c:"),
    ({"document_uri": "https:///a.pdf"}, "'https:///a.pdf' is an http(s) uri without a host"),
    ({"document_uri": "scans/a\x07.pdf"}, "holds a control character"),
]


@pytest.mark.parametrize(("changes", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_location_is_refused_naming_row_column_and_value(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, changes: dict[str, str], message: str
) -> None:
    before = table_fingerprint(con)
    with pytest.raises(ValidationError) as caught:
        ingest_files(con, [write_csv(tmp_path / "bad.csv", rows_with(**changes))])
    assert message in str(caught.value)
    assert all(p.startswith("row 2, ") for p in caught.value.problems)
    assert table_fingerprint(con) == before


URIS = [
    "scans/a.pdf", "a b/ü.png", "..a/b..c.pdf", "file:///srv/a.pdf", "file://localhost/srv/a",
    "file:scans/a.pdf", "https://docs.example.com/a.pdf?x=1", "HTTP://example.com/a",
    "../x", "/x", "file:/../x", "ftp://example.com/a", "http://", "data:text/plain,x",
    "file://host/x", "a/%2E%2E/b", "x\ty", "%a2.pdf", "%252e%252e/x", "a%5c..%5cb",
]


def _ingest_accepts(con: duckdb.DuckDBPyConnection, path: Path) -> bool:
    """Whether ingest takes the file (False: it rejects it with a ValidationError)."""
    try:
        ingest_files(con, [path])
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("uri", URIS)
def test_ingest_and_the_viewer_hold_a_uri_to_the_same_rules(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, uri: str
) -> None:
    path = write_csv(tmp_path / "u.csv", rows_with(document_uri=uri))
    assert _ingest_accepts(con, path) == (uri_problem(uri) is None)


# --- resolving: refused, and never opened ---------------------------------------------


_OPENED: list[str] = []
_WATCHING: list[bool] = [False]


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _WATCHING[0] and event == "open" and args and isinstance(args[0], str | bytes | Path):
        _OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)  # hooks cannot be removed; this one only records while watching


@pytest.fixture
def opened() -> Iterator[list[str]]:
    """Every path the code under test opens (Python's audit 'open' events)."""
    _OPENED.clear()
    _WATCHING[0] = True
    yield _OPENED
    _WATCHING[0] = False


@pytest.fixture
def root(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    (docs / "scans").mkdir(parents=True)
    (docs / "scans" / "a.pdf").write_bytes(b"%PDF-1.4 inside")
    (tmp_path / "secret.txt").write_text("outside the root")
    (docs / "scans" / "out.pdf").symlink_to(tmp_path / "secret.txt")
    (docs / "scans" / "in.pdf").symlink_to(docs / "scans" / "a.pdf")
    return docs


@pytest.mark.parametrize("uri", [
    "../../etc/passwd", "../secret.txt", "/etc/passwd", "scans/out.pdf", "file:../secret.txt",
    "file:///{root}/../secret.txt", "file://{outside}", "scans/%2e%2e/../secret.txt",
])
def test_what_resolves_outside_the_root_is_refused_and_never_opened(
    root: Path, opened: list[str], uri: str
) -> None:
    uri = uri.format(root=str(root).lstrip("/"), outside=root.parent / "secret.txt")
    with pytest.raises(DocumentError, match="it is not opened"):
        resolve_document(uri, root=root)
    assert opened == []


def test_inside_the_root_resolves_to_the_file_symlinks_followed(
    root: Path, opened: list[str]
) -> None:
    target = (root / "scans" / "a.pdf").resolve()
    assert resolve_document("scans/a.pdf", root=root).path == target
    assert resolve_document("scans/in.pdf", root=root).path == target
    assert resolve_document(target.as_uri(), root=root).path == target
    assert resolve_document("file:scans/a.pdf", root=root).path == target
    assert opened == []  # resolving reads metadata, never a file


def test_remote_uris_are_links_unless_their_host_is_allowed(root: Path) -> None:
    assert resolve_document("https://docs.example.com/a.pdf", root=root).kind == "link"
    allowed = resolve_document("https://Docs.Example.com/a.pdf", root=root,
                               remote_hosts=frozenset({"docs.example.com"}))
    assert (allowed.kind, allowed.url) == ("remote", "https://Docs.Example.com/a.pdf")


def test_the_root_defaults_to_the_store_folder(tmp_path: Path) -> None:
    db = tmp_path / "s" / "store.duckdb"
    assert documents_root("", db) == (tmp_path / "s").resolve()
    assert documents_root("docs", db) == (tmp_path / "s" / "docs").resolve()
    assert documents_root(str(tmp_path / "elsewhere"), db) == (tmp_path / "elsewhere").resolve()


def test_uris_are_written_relative_to_the_root_when_inside(root: Path, tmp_path: Path) -> None:
    assert relative_uri(root / "scans" / "a.pdf", root) == "scans/a.pdf"
    outside = tmp_path / "secret.txt"
    assert relative_uri(outside, root) == outside.resolve().as_uri()
    assert uri_problem(relative_uri(outside, root)) is None


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet="./\\%2eE:afilehtps ~\t", min_size=1, max_size=14))
def test_ingest_and_the_viewer_agree_on_any_uri(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, uri: str
) -> None:
    if not uri.strip():
        return  # blank: no uri at all
    path = write_csv(tmp_path / "h.csv", rows_with(document_uri=uri))
    assert _ingest_accepts(con, path) == (uri_problem(uri) is None), uri
