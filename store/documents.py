"""What showing a document may cost: its format, its page size, its pixels, where it comes from.

A document named by an ingested uri is whatever its writer made it. A
576-byte PDF can declare a page 60 x 14,400 points, which rendered 900
pixels wide is 194 megapixels (1.7 GB); a 163 KB PNG can be 168 megapixels;
Pillow opens dozens of formats, EPS among them (handed to Ghostscript). So
before anything is decoded:

* :func:`document_format`: only PDF, PNG, JPEG, TIFF and WebP, told by their
  first bytes, whatever the uri's extension says;
* :func:`render_scale` and :func:`check_pixels`: a page at most
  :data:`MAX_PAGE_POINTS` on a side, and at most :data:`PIXEL_BUDGET` pixels
  decoded or rendered, read from the page's size or the image's header;
* :func:`fetch_remote`: a remote document is fetched only from an allowed
  host, and a redirect is followed only to another allowed host, never to
  an address the allow-list does not name (an internal service, say).

The dashboard's renderer (:mod:`fieldtrust.dashboard.render`) applies these,
and renders in a separate process whose memory is capped, for what a check
of sizes cannot foresee.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterable
from typing import IO, Any
from urllib.parse import urlsplit

from fieldtrust.errors import DocumentError

#: The formats a page is shown from, and the first bytes of each.
FORMATS: dict[str, tuple[bytes, ...]] = {
    "PDF": (b"%PDF-",),
    "PNG": (b"\x89PNG\r\n\x1a\n",),
    "JPEG": (b"\xff\xd8\xff",),
    "TIFF": (b"II*\x00", b"MM\x00*"),
    "WEBP": (b"RIFF",),  # and "WEBP" at offset 8
}
#: Pixels decoded or rendered for one page at most (a 600 dpi A4 scan is 35 megapixels).
PIXEL_BUDGET = 40_000_000
#: Longest side of a PDF page, in points (200 inches: the PDF format's own limit).
MAX_PAGE_POINTS = 14_400.0
#: Redirects followed from one remote document at most.
MAX_REDIRECTS = 5


def document_format(data: bytes) -> str:
    """The format of ``data`` (a key of :data:`FORMATS`), told by its first bytes.

    Raises
    ------
    DocumentError
        Any other format: it is never handed to a decoder.
    """
    for name, magics in FORMATS.items():
        if data.startswith(magics) and (name != "WEBP" or data[8:12] == b"WEBP"):
            return name
    shown = data[:8].hex(" ") if data else "nothing"
    raise DocumentError(
        f"the document is not a PDF, PNG, JPEG, TIFF or WebP (it starts with {shown});"
        " it is not shown"
    )


def check_pixels(width: int, height: int, what: str = "the image") -> None:
    """Refuse an image of ``width`` x ``height`` pixels beyond :data:`PIXEL_BUDGET`."""
    if width <= 0 or height <= 0:
        raise DocumentError(f"{what} is {width} x {height} pixels: not an image to show")
    if width * height > PIXEL_BUDGET:
        raise DocumentError(
            f"{what} is {width:,} x {height:,} pixels ({width * height / 1e6:,.0f} megapixels),"
            f" more than the {PIXEL_BUDGET / 1e6:.0f} megapixels a page may take; open the"
            " document itself"
        )


def render_scale(width_pt: float, height_pt: float, width_px: int, *, page: int = 1) -> float:
    """The scale that renders a ``width_pt`` x ``height_pt`` page ``width_px`` pixels wide.

    Raises
    ------
    DocumentError
        A side beyond :data:`MAX_PAGE_POINTS` or not positive, or a render
        beyond :data:`PIXEL_BUDGET` (a page far taller than it is wide).
    """
    what = f"page {page} ({width_pt:,.0f} x {height_pt:,.0f} pt)"
    if not (0 < width_pt <= MAX_PAGE_POINTS and 0 < height_pt <= MAX_PAGE_POINTS):
        raise DocumentError(f"{what} is outside the PDF page sizes (up to"
                            f" {MAX_PAGE_POINTS:,.0f} pt a side); it is not rendered")
    scale = width_px / width_pt
    check_pixels(width_px, round(height_pt * scale), f"{what} rendered {width_px} pixels wide")
    return scale


def fetch_remote(url: str, hosts: Iterable[str], *, max_bytes: int, timeout: float) -> bytes:
    """The bytes at ``url``, at most ``max_bytes``, following redirects among ``hosts`` only.

    Raises
    ------
    DocumentError
        The url, or a redirect, names a host outside ``hosts`` or a scheme
        other than http(s); the reply is an error or over ``max_bytes``; the
        host cannot be reached in ``timeout`` seconds.
    """
    allowed = frozenset(h.lower() for h in hosts)
    _check_remote(url, allowed)
    opener = urllib.request.build_opener(_AllowedRedirects(allowed))
    try:
        with opener.open(url, timeout=timeout) as response:
            data: bytes = response.read(max_bytes + 1)
    except DocumentError:
        raise
    except (OSError, ValueError) as exc:
        raise DocumentError(f"the remote document could not be fetched ({exc})") from exc
    if len(data) > max_bytes:
        raise DocumentError(f"the remote document is over {max_bytes // 2**20} MB; open it in"
                            " your browser")
    return data


def _check_remote(url: str, allowed: frozenset[str]) -> None:
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if parts.scheme.lower() not in ("http", "https") or host not in allowed:
        raise DocumentError(
            f"the remote document leads to {parts.scheme}://{host[:60]}, which is not one of"
            " the documents_remote_hosts; it is not fetched"
        )


class _AllowedRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to an allowed host, and at most :data:`MAX_REDIRECTS` of them."""

    max_redirections = MAX_REDIRECTS

    def __init__(self, allowed: frozenset[str]) -> None:
        self.allowed = allowed

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Any, newurl: str) -> urllib.request.Request | None:
        _check_remote(newurl, self.allowed)
        return super().redirect_request(req, fp, code, msg, headers, newurl)
