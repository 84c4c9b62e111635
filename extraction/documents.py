"""Turn a file into the content blocks of a Messages API request.

PDFs go as a base64 ``document`` block, images as a base64 ``image`` block
with their media type, text files as a text block. The kind is read from
the file's first bytes, not its name, so a mislabelled ``scan.pdf`` that is
really a PNG is still sent correctly. Files the API would refuse (too big,
unsupported type) fail here, before anything is sent.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fieldtrust.errors import DocumentError

#: The API rejects a base64 image over 5 MB and a request over 32 MB.
MAX_IMAGE_BYTES = 5 * 1024 * 1024
MAX_PDF_BYTES = 30 * 1024 * 1024
MAX_TEXT_BYTES = 1024 * 1024

#: File name endings looked at when a directory is given.
SUPPORTED_SUFFIXES = (".pdf", ".png", ".jpg", ".jpeg", ".gif", ".webp", ".txt", ".md")

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"%PDF-", "application/pdf"),
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


@dataclass(frozen=True)
class Document:
    """A file ready to send: its id, where it came from and its content blocks."""

    doc_id: str
    path: str
    sha256: str
    media_type: str
    blocks: tuple[dict[str, Any], ...]


def media_type_of(data: bytes) -> str:
    """The media type the bytes are, by their signature; text/plain for UTF-8 text."""
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return "application/octet-stream"
    return "text/plain"


def doc_id_for(path: Path, sha256: str) -> str:
    """A readable, content-unique id: the file stem and 12 hex of its hash."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", path.stem)[:60] or "doc"
    return f"{stem}-{sha256[:12]}"


def identify(path: str | os.PathLike[str]) -> str:
    """The doc_id of the file at ``path``, read in chunks (the content is not kept).

    Raises
    ------
    DocumentError
        The file cannot be read.
    """
    file = Path(path)
    digest = hashlib.sha256()
    try:
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    except OSError as exc:
        raise DocumentError(f"{file}: cannot read the file ({exc.strerror})") from exc
    return doc_id_for(file, digest.hexdigest())


def load_document(path: str | os.PathLike[str]) -> Document:
    """Read ``path`` and build its content blocks.

    Raises
    ------
    DocumentError
        The file is missing, empty, too large for the API, or of a type the
        API cannot read.
    """
    file = Path(path)
    try:
        data = file.read_bytes()
    except OSError as exc:
        raise DocumentError(f"{file}: cannot read the file ({exc.strerror})") from exc
    if not data:
        raise DocumentError(f"{file}: the file is empty")
    sha = hashlib.sha256(data).hexdigest()
    media_type = media_type_of(data)
    blocks = (_block(file, data, media_type),)
    return Document(doc_id_for(file, sha), str(file), sha, media_type, blocks)


def _block(file: Path, data: bytes, media_type: str) -> dict[str, Any]:
    size = len(data)
    if media_type == "application/pdf":
        _check_size(file, size, MAX_PDF_BYTES, "a PDF")
        return {"type": "document", "source": _base64(data, media_type), "title": file.name}
    if media_type.startswith("image/"):
        _check_size(file, size, MAX_IMAGE_BYTES, "an image")
        return {"type": "image", "source": _base64(data, media_type)}
    if media_type == "text/plain":
        _check_size(file, size, MAX_TEXT_BYTES, "a text file")
        text = data.decode("utf-8")
        if not text.strip():
            raise DocumentError(f"{file}: the file holds only whitespace")
        return {"type": "text", "text": f"<document name={file.name!r}>\n{text}\n</document>"}
    raise DocumentError(
        f"{file}: not a PDF, PNG, JPEG, GIF, WebP or UTF-8 text file;"
        " convert it to one of those first"
    )


def _check_size(file: Path, size: int, limit: int, what: str) -> None:
    if size > limit:
        raise DocumentError(
            f"{file}: {size / 1e6:.1f} MB is over the API's {limit / 1e6:.0f} MB limit for"
            f" {what}; split or downscale it"
        )


def _base64(data: bytes, media_type: str) -> dict[str, str]:
    return {"type": "base64", "media_type": media_type, "data": base64.b64encode(data).decode()}


def expand_paths(paths: list[str | os.PathLike[str]]) -> list[Path]:
    """Files named, and the supported files inside directories named, in order.

    A directory contributes its non-hidden files with a supported ending,
    sorted, recursively. A path that does not exist raises DocumentError.
    """
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix.lower() in SUPPORTED_SUFFIXES
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        elif path.is_file():
            found.append(path)
        else:
            raise DocumentError(f"{path}: no such file or directory")
    return found
