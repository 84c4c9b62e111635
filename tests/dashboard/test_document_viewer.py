"""End to end: a reviewer sees each item's page with its value boxed, and a notice when missing.

`fieldtrust serve` on a private demo store in headless Chromium. Three items
are handed to the reviewer before the server starts, the third pointed at a
document that does not exist: the first two show their (demo-drawn) page with
the highlight where the store says the value is; the third shows the notice
with its uri and excerpt, and can still be labelled.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from fieldtrust.labels.assignment import next_items, skip
from PIL import Image

from fieldtrust import store
from tests.conftest import copy_store
from tests.dashboard.test_browser import (  # noqa: F401 (fixtures)
    _act_as,
    _no_exception,
    _settle,
    _shot,
    page,
    server,
)

pytestmark = [
    pytest.mark.browser,
    pytest.mark.usefixtures("chromium"),  # first: no server starts for a skipped test
]

MISSING = "scans/2026/missing-scan.pdf"


@pytest.fixture
def demo_db(demo_template: Path, tmp_path: Path) -> Path:
    """The demo store with three items assigned to ana, the third's document missing."""
    path = copy_store(demo_template, tmp_path / "demo.duckdb")
    con = store.connect(path)
    try:
        # The first two shown: values printed in a box; the rest given back (skipped).
        items = next_items(con, "ana", count=12)
        boxed = {r[0] for r in con.execute(
            "SELECT extraction_id FROM extractions WHERE bbox_x0 IS NOT NULL"
            " AND value_status = 'present' AND extraction_id IN (SELECT unnest(?::VARCHAR[]))",
            [[i.extraction_id for i in items]]).fetchall()}
        first = [i for i in items if i.extraction_id in boxed][:2]
        third = next(i for i in items if i not in first)
        for item in items:
            if item not in (*first, third):
                skip(con, "ana", item.sample_id, item.extraction_id, "not in this test")
        third = third.extraction_id
        for table in ("extractions", "sampled_extractions"):
            con.execute(f"UPDATE {table} SET document_uri = ? WHERE extraction_id = ?",
                        [MISSING, third])
    finally:
        con.close()
    return path


def _boxes(con: Any) -> list[tuple[str, tuple[float, ...]]]:
    rows = con.execute(
        "SELECT e.doc_id || ' ' || e.field, e.bbox_x0, e.bbox_y0, e.bbox_x1, e.bbox_y1"
        " FROM assignments a JOIN extractions e USING (extraction_id)"
        " WHERE a.reviewer = 'ana' ORDER BY a.assigned_at, a.extraction_id"
    ).fetchall()
    return [(r[0], tuple(r[1:])) for r in rows]


def _red_box(png: bytes) -> tuple[tuple[float, float, float, float], Image.Image]:
    """The highlight's extent as fractions of the image, from its pixels."""
    image = Image.open(io.BytesIO(png)).convert("RGB")
    width, height = image.size
    red = [(x, y) for y in range(height) for x in range(width)
           if (lambda p: p[0] > 180 and p[1] < 90 and p[2] < 120)(image.getpixel((x, y)))]
    assert len(red) > 100, "no highlight box in the screenshot"
    xs, ys = [x for x, _ in red], [y for _, y in red]
    return (min(xs) / width, min(ys) / height, max(xs) / width, max(ys) / height), image


def test_a_reviewer_sees_the_page_with_the_value_boxed_then_the_next_and_a_notice(
    server: tuple[str, Path], page: Any  # noqa: F811 (fixtures imported above)
) -> None:
    url, db = server
    reader = store.connect(db, read_only=True)
    try:
        expected = _boxes(reader)
        excerpt = reader.execute(
            "SELECT source_excerpt FROM extractions WHERE document_uri = ?", [MISSING]
        ).fetchone()[0]
    finally:
        reader.close()
    assert len(expected) == 3 and all(None not in box for _, box in expected[:2])

    page.goto(f"{url}/review")
    _settle(page)
    _act_as(page, "ana (reviewer)")
    # The whole page, so the box can be checked against the stored bbox as fractions of it
    # (a tall page is otherwise cut around the value; tests/dashboard/test_render.py).
    page.get_by_text("Whole page", exact=True).click()
    _settle(page)
    sources = []
    for index in range(2):
        image = page.locator("[data-testid='stImage'] img").first
        image.wait_for()
        size = image.bounding_box()
        assert size["width"] >= 300 and size["height"] >= 300, size
        sources.append(image.get_attribute("src"))
        found, shot = _red_box(image.screenshot())
        _, (x0, y0, x1, y1) = expected[index]
        # The drawn box surrounds the stored bbox (its line sits just outside), closely.
        tolerance = 0.03
        assert found[0] <= x0 + 0.005 and found[2] >= x1 - 0.005, (found, expected[index])
        assert found[1] <= y0 + 0.005 and found[3] >= y1 - 0.005, (found, expected[index])
        assert found[0] > x0 - tolerance and found[2] < x1 + tolerance, (found, expected[index])
        assert found[1] > y0 - tolerance and found[3] < y1 + tolerance, (found, expected[index])
        # Ink inside the box: the value is printed where the box is.
        w, h = shot.size
        inside = shot.crop((int(x0 * w) + 2, int(y0 * h) + 2, int(x1 * w) - 2, int(y1 * h) - 2))
        assert inside.convert("L").getextrema()[0] < 120, "the box holds no printed value"
        assert page.get_by_text("Page 1 of 1").first.is_visible()
        _shot(page, f"viewer-item-{index + 1}")
        page.locator("h1").click()
        page.keyboard.press("1")
        page.get_by_text("Recorded correct").first.wait_for()
        _settle(page)
        _no_exception(page)
    assert sources[0] != sources[1], "the next item's document loaded"

    # The third item's document is missing: a notice with its uri, and labelling goes on.
    page.get_by_text("The document is missing").first.wait_for()
    assert page.get_by_text(MISSING).first.is_visible()
    if excerpt:
        assert page.get_by_text("Text excerpt").first.is_visible()
        assert page.get_by_text(excerpt, exact=True).first.is_visible()
    else:
        assert page.get_by_text("No text excerpt stored either").first.is_visible()
    _shot(page, "viewer-missing-document")
    page.locator("h1").click()
    page.keyboard.press("3")
    page.get_by_text("Recorded unreadable").first.wait_for()  # the form's word for unclear
    _settle(page)
    reader = store.connect(db, read_only=True)
    try:
        verdicts = reader.execute(
            "SELECT l.verdict FROM labels l JOIN assignments a USING (extraction_id, review_round)"
            " WHERE a.reviewer = 'ana' AND l.reviewer = 'ana' ORDER BY l.labeled_at").fetchall()
    finally:
        reader.close()
    assert verdicts == [("correct",), ("correct",), ("unclear",)]
