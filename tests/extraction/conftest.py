"""Fixtures of the extraction tests: the sample documents, loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
from fieldtrust.extraction.documents import Document, load_document

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def invoice_txt() -> Document:
    return load_document(FIXTURES / "invoice.txt")


@pytest.fixture
def receipt_txt() -> Document:
    return load_document(FIXTURES / "receipt_no_tax.txt")


@pytest.fixture
def receipt_png() -> Document:
    return load_document(FIXTURES / "receipt.png")


@pytest.fixture
def invoice_pdf() -> Document:
    return load_document(FIXTURES / "invoice.pdf")
