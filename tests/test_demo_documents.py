"""The demo's documents: boxes known by construction hold the printed value, mistakes show."""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path

import duckdb
import numpy as np
import pytest
from fieldtrust.extraction.locate import PdfText
from PIL import Image, ImageChops, ImageFont

from fieldtrust import store
from fieldtrust.demo import build_demo
from fieldtrust.demo.drawn_documents import (
    DemoField,
    _handwritten,
    _printed,
    demo_document,
    render_demo,
)
from fieldtrust.demo.page_layout import MONO_ADVANCE, printed_text, value_box

ROWS = 6_000


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    folder = tmp_path_factory.mktemp("demo-docs")
    con = store.connect(folder / "demo.duckdb")
    build_demo(con, seed=11, rows=ROWS, labelled=False)
    assert not (folder / "demo-documents").exists()  # nothing drawn until someone opens one
    yield con
    con.close()


def _docs(con: duckdb.DuckDBPyConnection, doc_type: str, n: int) -> list[str]:
    rows = con.execute(
        "SELECT DISTINCT doc_id FROM extractions WHERE doc_type = ? ORDER BY doc_id LIMIT ?",
        [doc_type, n]).fetchall()
    return [r[0] for r in rows]


def _stored_boxes(con: duckdb.DuckDBPyConnection, doc_id: str) -> dict[str, tuple[float, ...]]:
    rows = con.execute(
        "SELECT field, bbox_x0, bbox_y0, bbox_x1, bbox_y1 FROM extractions"
        " WHERE doc_id = ? AND bbox_x0 IS NOT NULL", [doc_id]).fetchall()
    return {r[0]: tuple(r[1:]) for r in rows}


def test_every_row_points_at_its_document_on_page_one(demo: duckdb.DuckDBPyConnection) -> None:
    rows = demo.execute(
        "SELECT doc_type, count(*), count(*) FILTER (WHERE page = 1),"
        " count(*) FILTER (WHERE document_uri = 'demo-documents/' || doc_id ||"
        "   CASE WHEN doc_type IN ('invoice', 'purchase_order') THEN '.pdf' ELSE '.png' END)"
        " FROM extractions GROUP BY 1").fetchall()
    assert {r[0] for r in rows} == {"invoice", "purchase_order", "printed_receipt",
                                    "handwritten_receipt"}
    assert all(n == paged == pointed for _, n, paged, pointed in rows)


@pytest.mark.parametrize("doc_type", ["invoice", "purchase_order"])
def test_a_pdf_box_is_where_its_text_layer_holds_the_value(
    demo: duckdb.DuckDBPyConnection, doc_type: str
) -> None:
    checked = 0
    for doc_id in _docs(demo, doc_type, 12):
        document = demo_document(demo, doc_id)
        assert document is not None
        pdf = PdfText(render_demo(demo, doc_id).data)  # type: ignore[union-attr]
        for field, box in _stored_boxes(demo, doc_id).items():
            entry = document.fields[field]
            if entry.unreadable:
                continue
            text = printed_text(doc_type, field, entry.text)  # type: ignore[arg-type]
            # The text layer's box (pypdfium2) of one occurrence lies in the stored one, snugly.
            inside = [f for f in pdf.find_all(1, text)
                      if box[0] <= f[0] and f[2] <= box[2] and box[1] <= f[1] and f[3] <= box[3]]
            assert len(inside) == 1, (doc_id, field, box, pdf.find_all(1, text))
            assert (box[2] - box[0]) - (inside[0][2] - inside[0][0]) < 0.02
            checked += 1
        pdf.close()
    assert checked > 40


@pytest.mark.parametrize("doc_type", ["printed_receipt", "handwritten_receipt"])
def test_an_image_value_s_ink_lies_inside_its_box(
    demo: duckdb.DuckDBPyConnection, doc_type: str
) -> None:
    draw = _handwritten if doc_type == "handwritten_receipt" else _printed
    checked = 0
    for doc_id in _docs(demo, doc_type, 10):
        document = demo_document(demo, doc_id)
        assert document is not None
        page = draw(document)
        for field, box in _stored_boxes(demo, doc_id).items():
            # The page without this one value: what differs is the value's ink.
            # (An empty tax, not none: without a tax line its label changes too.)
            gone = DemoField("" if field == "tax" else None)
            blank = dataclasses.replace(document, fields={**document.fields, field: gone})
            w, h = page.size
            x0, y0, x1, y1 = box[0] * w, box[1] * h, box[2] * w, box[3] * h
            # A band of the page around the slot (other text may follow from a value:
            # the net amount from the total, the VAT rate label from the tax).
            band = (max(0, int(x0) - 20), max(0, int(y0) - 8), w, min(h, int(y1) + 8))
            diff = ImageChops.difference(page.crop(band), draw(blank).crop(band))
            ink = diff.convert("L").point(lambda v: 255 if v > 40 else 0).getbbox()
            assert ink is not None, (doc_id, field)
            ink = (ink[0] + band[0], ink[1] + band[1], ink[2] + band[0], ink[3] + band[1])
            assert x0 <= ink[0] and ink[2] <= x1 + 1 and y0 <= ink[1] and ink[3] <= y1 + 1, (
                doc_id, field, (x0, y0, x1, y1), ink)
            checked += 1
    assert checked > 20


def test_the_layout_advance_is_the_font_s() -> None:
    font = ImageFont.truetype("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", 100)
    assert font.getlength("0") == pytest.approx(MONO_ADVANCE * 100, abs=0.01)
    assert value_box("invoice", "v2", "total", "12.50")[2] == pytest.approx(
        (190 + 0.6) / 210, abs=1e-9)  # right-aligned at 190 mm, padded


def test_planted_mistakes_show_on_the_page(demo: duckdb.DuckDBPyConnection) -> None:
    # A misread invoice number: the page's text layer has the true one, not the value read.
    doc_id, value, truth = demo.execute(
        "SELECT e.doc_id, e.value, t.true_value FROM extractions e JOIN demo_truth t"
        " USING (extraction_id) WHERE e.doc_type = 'invoice' AND e.field = 'invoice_number'"
        " AND t.error_type = 'misread_characters' LIMIT 1").fetchone()
    pdf = PdfText(render_demo(demo, doc_id).data)  # type: ignore[union-attr]
    assert pdf.find(1, truth) is not None and pdf.find(1, value) is None
    # The total copied into the tax field: the page's tax line says the true tax.
    doc_id, value, truth = demo.execute(
        "SELECT e.doc_id, e.value, t.true_value FROM extractions e JOIN demo_truth t"
        " USING (extraction_id) WHERE e.doc_type = 'handwritten_receipt' AND e.field = 'tax'"
        " AND t.error_type = 'total_copied_into_tax' AND t.true_value IS NOT NULL"
        " LIMIT 1").fetchone()
    document = demo_document(demo, doc_id)
    assert document.fields["tax"].text == truth != value  # type: ignore[union-attr]
    assert document.fields["total"].text == value  # type: ignore[union-attr]


def test_rendering_is_deterministic_and_images_decode(demo: duckdb.DuckDBPyConnection) -> None:
    for doc_type in ("invoice", "printed_receipt", "handwritten_receipt"):
        doc_id = _docs(demo, doc_type, 1)[0]
        first, again = render_demo(demo, doc_id), render_demo(demo, doc_id)
        assert first == again
        if first.media_type == "image/png":  # type: ignore[union-attr]
            image = Image.open(io.BytesIO(first.data))  # type: ignore[union-attr]
            assert image.size[0] == 480 and np.asarray(image).std() > 5
    assert render_demo(demo, "no-such-document") is None


def test_a_store_without_demo_truth_has_no_demo_documents(tmp_path: Path) -> None:
    con = store.connect(tmp_path / "s.duckdb")
    try:
        assert render_demo(con, "demo-0000001") is None
    finally:
        con.close()


def test_the_dashboard_draws_a_demo_document_through_its_entry_point(
    demo: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    from fieldtrust.dashboard.render import Notice, Source, open_document
    from fieldtrust.store.locations import document_drawers, document_location

    from fieldtrust.demo.drawn_documents import draw_document

    assert draw_document in document_drawers()  # pyproject.toml's fieldtrust.document_drawers
    doc_id = _docs(demo, "invoice", 1)[0]
    (extraction_id,) = demo.execute(
        "SELECT extraction_id FROM extractions WHERE doc_id = ? LIMIT 1", [doc_id]).fetchone()
    location = document_location(demo, extraction_id)
    assert location is not None
    opened = open_document(demo, location, root=tmp_path, store_key="demo-docs")
    assert isinstance(opened, Source)
    assert opened.data == render_demo(demo, doc_id).data  # type: ignore[union-attr]
    assert opened.data.startswith(b"%PDF-")
    # Without a drawer that knows it (another store), the missing file is said so.
    other = dataclasses.replace(location, doc_id="no-such-document")
    assert draw_document(demo, other) is None
    missing = open_document(demo, other, root=tmp_path, store_key="demo-docs-2")
    assert isinstance(missing, Notice) and "missing" in missing.message
