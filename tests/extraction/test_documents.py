"""Files into content blocks: PDF as document, images as image, text as text."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from claude_fake import FIXTURES
from fieldtrust.extraction import documents
from fieldtrust.extraction.documents import expand_paths, identify, load_document, media_type_of

from fieldtrust.errors import DocumentError


def test_pdf_becomes_a_base64_document_block() -> None:
    doc = load_document(FIXTURES / "invoice.pdf")

    [block] = doc.blocks
    assert block["type"] == "document"
    assert block["source"]["type"] == "base64"
    assert block["source"]["media_type"] == "application/pdf"
    assert base64.b64decode(block["source"]["data"]) == (FIXTURES / "invoice.pdf").read_bytes()
    assert block["title"] == "invoice.pdf"


def test_png_becomes_an_image_block_with_its_media_type() -> None:
    [block] = load_document(FIXTURES / "receipt.png").blocks

    assert block["type"] == "image"
    assert block["source"]["media_type"] == "image/png"


def test_text_becomes_a_text_block_holding_the_document() -> None:
    [block] = load_document(FIXTURES / "invoice.txt").blocks

    assert block["type"] == "text"
    assert "令和6年4月1日" in block["text"]
    assert block["text"].startswith("<document name='invoice.txt'>")


def test_the_kind_comes_from_the_bytes_not_the_name(tmp_path: Path) -> None:
    disguised = tmp_path / "scan.pdf"
    disguised.write_bytes((FIXTURES / "receipt.png").read_bytes())

    assert load_document(disguised).blocks[0]["type"] == "image"


@pytest.mark.parametrize(
    ("head", "media_type"),
    [
        (b"%PDF-1.7\n", "application/pdf"),
        (b"\x89PNG\r\n\x1a\n....", "image/png"),
        (b"\xff\xd8\xff\xe0JFIF", "image/jpeg"),
        (b"GIF89a....", "image/gif"),
        (b"RIFF\x00\x00\x00\x00WEBPVP8 ", "image/webp"),
        ("Rechnung für März".encode(), "text/plain"),
        (b"\x00\xff\xfe\x80", "application/octet-stream"),
    ],
)
def test_media_type_by_signature(head: bytes, media_type: str) -> None:
    assert media_type_of(head) == media_type


def test_doc_id_is_readable_and_follows_the_content(tmp_path: Path) -> None:
    one, two = tmp_path / "Invoice 7.txt", tmp_path / "copy.txt"
    one.write_text("same")
    two.write_text("same")

    assert identify(one).startswith("Invoice_7-")
    assert identify(one).split("-")[-1] == identify(two).split("-")[-1]
    assert identify(one) == load_document(one).doc_id


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"  \n\t", "only whitespace"),
        (b"\x00\x01\xfe\xff", "not a PDF, PNG, JPEG, GIF, WebP or UTF-8 text file"),
    ],
)
def test_unusable_files_raise_document_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "doc.bin"
    path.write_bytes(content)

    with pytest.raises(DocumentError, match=message):
        load_document(path)


def test_an_image_over_the_api_limit_is_refused_before_sending(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(documents, "MAX_IMAGE_BYTES", 50)
    big = tmp_path / "big.png"
    big.write_bytes((FIXTURES / "receipt.png").read_bytes() + b"\x00" * 100)

    with pytest.raises(DocumentError, match=r"over the API's 0 MB limit for an image"):
        load_document(big)


def test_expand_paths_lists_supported_files_in_directories(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    for name in ("b.pdf", "a.txt", "sub/c.PNG", "notes.docx", ".hidden/d.txt"):
        (tmp_path / name).write_text("x")

    found = expand_paths([tmp_path])

    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["a.txt", "b.pdf", "sub/c.PNG"]
    with pytest.raises(DocumentError, match="no such file or directory"):
        expand_paths([tmp_path / "missing.pdf"])
