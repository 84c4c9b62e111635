"""Fixtures of the extraction tests: the sample documents, loaded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fieldtrust.extraction.documents import Document, load_document

FIXTURES = Path(__file__).parent / "fixtures"


def _loaded(name: str) -> Callable[[], Document]:
    """A fixture loading the sample document ``name``; it takes the name it is assigned to."""

    @pytest.fixture
    def document() -> Document:
        """The sample document, loaded."""
        return load_document(FIXTURES / name)

    return document


invoice_txt = _loaded("invoice.txt")
receipt_txt = _loaded("receipt_no_tax.txt")
receipt_png = _loaded("receipt.png")
invoice_pdf = _loaded("invoice.pdf")
