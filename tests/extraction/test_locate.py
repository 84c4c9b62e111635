"""The extractor stores where each value came from: document uri, page, and the quote's box."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from claude_fake import FIXTURES, MODEL, FakeClaude, client_for, invoice_input, tool_reply
from fieldtrust.extraction.loop import extract_paths
from fieldtrust.extraction.sink import StoreSink
from fpdf import FPDF

from fieldtrust import store

#: (x mm, baseline y mm, text) of the test invoice's lines, Helvetica 12 pt on A4.
LINES = [
    (20, 30, "ACME Office Supplies GmbH"),
    (20, 42, "Invoice no. INV-2024-0042"),
    (20, 54, "Date: 2024-04-01"),
    (20, 90, "Paper A4, 10 boxes"), (150, 90, "500.00"),
    (20, 100, "Toner cartridge"), (150, 100, "300.00"),
    (20, 120, "VAT 10%"), (150, 120, "80.00"),
    (20, 135, "Total due"), (140, 135, "EUR 880.00"),
]
A4 = (210.0, 297.0)


def make_invoice(path: Path) -> dict[str, float]:
    """Write a one-page PDF with a text layer; return each line's width in mm."""
    pdf = FPDF(format="A4")
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    widths = {"Invoice no. ": pdf.get_string_width("Invoice no. ")}
    for x, y, text in LINES:
        pdf.text(x, y, text)
        widths[text] = pdf.get_string_width(text)
    pdf.output(str(path))
    return widths


def paged(tool_input: dict, pages: dict[str, tuple[int, str]]) -> dict:
    for field, (page, quote) in pages.items():
        tool_input[field]["page"] = page
        tool_input[field]["source_text"] = quote
    return tool_input


def test_a_pdf_field_gets_its_page_and_the_box_around_its_quote(
    tmp_path: Path, db_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    docs = tmp_path / "inbox"
    docs.mkdir()
    widths = make_invoice(docs / "invoice.pdf")
    tool_input = paged(invoice_input(), {
        "total": (1, "EUR 880.00"), "invoice_number": (1, "INV-2024-0042"),
        "vendor": (1, "ACME  office supplies GmbH"),  # case and spacing forgiven
        "date": (1, "1 April 2024"),  # not on the page as written: no box
        "tax": (1, "80.00"), "currency": (1, "EUR"),
    })
    fake = FakeClaude([tool_reply("record_invoice", tool_input)])
    sink = StoreSink(db_path, documents_root=tmp_path)

    with caplog.at_level(logging.WARNING, logger="fieldtrust.extraction"):
        summary = extract_paths(client_for(fake), [docs / "invoice.pdf"], doc_type="invoice",
                                model=MODEL, sink=sink)

    assert summary.ok == 1
    with store.open_store(db_path) as con:
        rows = {r[0]: r[1:] for r in con.execute(
            "SELECT field, document_uri, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1"
            " FROM extractions").fetchall()}
    assert {r[0] for r in rows.values()} == {"inbox/invoice.pdf"}
    total = rows["total"]
    assert total[1] == 1
    x, baseline, text = LINES[-1]
    x0, y0, x1, y1 = total[2:]
    # The box hugs the printed text: starts where it starts, as wide, around the baseline.
    assert x0 == pytest.approx(x / A4[0], abs=0.004)
    assert x1 == pytest.approx((x + widths[text]) / A4[0], abs=0.006)
    assert y0 < baseline / A4[1] < y1 + 0.002
    assert 2.0 < (y1 - y0) * A4[1] < 5.5  # a 12 pt line is 4.2 mm
    number = rows["invoice_number"]
    assert number[2] == pytest.approx((20 + widths["Invoice no. "]) / A4[0], abs=0.004)
    assert number[3] < 42 / A4[1] < number[5] + 0.002
    assert rows["vendor"][2] == pytest.approx(20 / A4[0], abs=0.004)
    assert rows["tax"][3] < 120 / A4[1] < rows["tax"][5] + 0.002  # the VAT line, not 880.00
    assert rows["date"][1:] == (1, None, None, None, None)
    assert "the quote '1 April 2024' is not on page 1; stored without a bbox" in caplog.text
    assert rows["line_items"][1:] == (None, None, None, None, None)  # no page asked


def test_an_image_keeps_the_page_only_and_an_outside_file_a_file_uri(
    tmp_path: Path, db_path: Path
) -> None:
    image = tmp_path / "elsewhere" / "receipt.png"
    image.parent.mkdir()
    shutil.copy(FIXTURES / "receipt.png", image)
    root = tmp_path / "docs"
    root.mkdir()
    fake = FakeClaude([tool_reply("record_invoice",
                                  paged(invoice_input(), {"total": (1, "EUR 880.00")}))])

    extract_paths(client_for(fake), [image], doc_type="invoice", model=MODEL,
                  sink=StoreSink(db_path, documents_root=root))

    with store.open_store(db_path) as con:
        row = con.execute(
            "SELECT document_uri, page, bbox_x0 FROM extractions WHERE field = 'total'"
        ).fetchone()
    assert row == (image.resolve().as_uri(), 1, None)
