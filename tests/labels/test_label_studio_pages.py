"""Label Studio tasks carry the document: each item's page as a PNG, its box as a
pre-annotation. Fast checks without a server; tests/labels/test_label_studio.py
shows the same tasks in a real Label Studio."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest
from fieldtrust.labels.label_studio import TaskPage, box_prediction, label_config, write_tasks
from fieldtrust.labels.label_studio_pages import LOCAL_FILES, local_files_prefix, write_pages
from fieldtrust.store.locations import Location
from PIL import Image

from fieldtrust.errors import InputError
from tests.label_studio_store import ingested_store, run

WEEK = "2026-W48"


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _items(rows: list[dict[str, object]]) -> pa.Table:
    base = {"extraction_id": "", "sample_id": f"{WEEK}/v1", "cell": "c", "inclusion_prob": 0.5,
            "doc_id": "", "doc_type": "invoice", "form_version": "v1", "field": "total",
            "value": "1.00", "document_uri": None, "page": None, "source_excerpt": None,
            "bbox_x0": None, "bbox_y0": None, "bbox_x1": None, "bbox_y1": None}
    return pa.Table.from_pylist([{**base, **row} for row in rows])


def test_each_page_is_written_once_and_items_without_a_readable_document_get_none(
    tmp_path: Path,
) -> None:
    documents = {"a.png": _png(600, 800), "broken.png": b"not an image"}
    opened: list[str] = []

    def open_document(location: Location) -> bytes | None:
        opened.append(str(location.document_uri))
        return documents.get(str(location.document_uri))

    items = _items([
        {"extraction_id": "e1", "doc_id": "a", "document_uri": "a.png", "page": 1},
        {"extraction_id": "e2", "doc_id": "a", "document_uri": "a.png", "page": 1},
        {"extraction_id": "e3", "doc_id": "a", "document_uri": "a.png", "page": 2},  # no page 2
        {"extraction_id": "e4", "doc_id": "m", "document_uri": "missing.png", "page": 1},
        {"extraction_id": "e5", "doc_id": "b", "document_uri": "broken.png", "page": 1},
        {"extraction_id": "e6", "doc_id": "n"},  # no document stored
    ])
    pages = write_pages(items, tmp_path / "pages", url_prefix="https://files.example/p/",
                        open_document=open_document)

    assert set(pages) == {"e1", "e2"} and pages["e1"] == pages["e2"]
    assert (pages["e1"].width, pages["e1"].height) == (600, 800)
    assert pages["e1"].url.startswith("https://files.example/p/")
    [written] = list((tmp_path / "pages").iterdir())
    assert pages["e1"].url.endswith(written.name) and Image.open(written).size == (600, 800)
    assert opened.count("a.png") == 2  # once per (document, page), not once per item
    assert "missing.png" in opened and "broken.png" in opened and len(opened) == 4


def test_the_box_is_a_pre_annotation_in_percent_without_a_score() -> None:
    row = {"bbox_x0": 0.1, "bbox_y0": 0.2, "bbox_x1": 0.4, "bbox_y1": 0.3}
    [prediction] = box_prediction(row, TaskPage("/p.png", 900, 1200))
    [region] = prediction["result"]
    assert "score" not in prediction
    assert (region["from_name"], region["to_name"], region["type"]) == (
        "value_box", "page", "rectanglelabels")
    assert (region["original_width"], region["original_height"]) == (900, 1200)
    assert [round(region["value"][k], 9) for k in ("x", "y", "width", "height")] == [
        10.0, 20.0, 30.0, 10.0]
    assert box_prediction({"bbox_x0": 0.1}, TaskPage("/p.png", 900, 1200)) == []


def test_the_config_names_the_image_and_box_the_tasks_fill(tmp_path: Path) -> None:
    config = label_config()
    assert '<Image name="page" value="$image"' in config
    assert '<RectangleLabels name="value_box" toName="page">' in config
    assert "$document_uri" in config and "$source_excerpt" in config
    items = _items([{"extraction_id": "e1", "doc_id": "a", "document_uri": "a.png", "page": 1,
                     "bbox_x0": 0.1, "bbox_y0": 0.2, "bbox_x1": 0.4, "bbox_y1": 0.3},
                    {"extraction_id": "e2", "doc_id": "n", "source_excerpt": "Total 1.00"}])
    out = tmp_path / "tasks.json"
    assert write_tasks(items, out, pages={"e1": TaskPage("/x/a.png", 600, 800)}) == 2
    with_page, without = json.loads(out.read_text())
    assert with_page["data"]["image"] == "/x/a.png" and with_page["data"]["page"] == "1"
    assert with_page["predictions"][0]["result"][0]["value"]["rectanglelabels"] == [
        "extracted value"]
    assert without["data"]["image"] == "" and "predictions" not in without
    assert without["data"]["source_excerpt"] == "Total 1.00"


def test_local_files_prefix_is_under_the_document_root(tmp_path: Path) -> None:
    (tmp_path / "ls" / "w48 pages").mkdir(parents=True)
    assert local_files_prefix(tmp_path / "ls" / "w48 pages", tmp_path) == (
        LOCAL_FILES + "ls/w48%20pages/")
    assert local_files_prefix(tmp_path, tmp_path) == LOCAL_FILES
    with pytest.raises(InputError, match="is not under the Label Studio document root"):
        local_files_prefix(tmp_path / "ls", tmp_path / "ls" / "w48 pages")


@pytest.fixture
def store_with_documents(tmp_path: Path) -> Path:
    """Eight extractions with their documents (PNGs) under the store's folder; two with none."""
    (tmp_path / "docs").mkdir()
    rows = []
    for i in range(8):
        uri = f"docs/d{i}.png" if i < 6 else ""
        if uri:
            (tmp_path / uri).write_bytes(_png(500, 700))
        rows.append({"doc_id": f"d{i}", "doc_type": "invoice", "field": "total",
                     "value": f"{i}.00", "confidence": 0.5 + i / 20,
                     "extracted_at": "2026-11-24T10:00:00Z", "document_uri": uri,
                     "page": 1 if uri else "", "bbox": "0.1,0.2,0.4,0.3" if uri else "",
                     "source_excerpt": f"Total {i}.00"})
    return ingested_store(tmp_path, rows)


def test_sample_writes_the_pages_beside_the_tasks(store_with_documents: Path) -> None:
    folder = store_with_documents.parent
    design = folder / "all.json"
    design.write_text(json.dumps({"base_rate": 1.0}))
    out = folder / "ls" / "w48.json"
    out.parent.mkdir()
    code, text = run(store_with_documents, "sample", "--week", WEEK, "--design", str(design),
                     "--out", str(out), "--format", "label-studio")
    assert code == 0, text
    tasks = json.loads(out.read_text())
    shown = [t for t in tasks if t["data"]["image"]]
    assert len(tasks) == 8 and len(shown) == 6
    assert all(t["data"]["image"].startswith(LOCAL_FILES + "w48-pages/") for t in shown)
    assert all(t["predictions"][0]["result"][0]["original_width"] == 500 for t in shown)
    assert len(list((folder / "ls" / "w48-pages").glob("*.png"))) == 6
    assert all(t["data"]["source_excerpt"].startswith("Total ") for t in tasks)

    code, text = run(store_with_documents, "sample", "--week", WEEK, "--design", str(design),
                     "--out", str(out), "--format", "label-studio", "--pages",
                     str(folder / "served"), "--pages-url", "https://files.example/w48/")
    assert code == 0, text
    urls = [t["data"]["image"] for t in json.loads(out.read_text()) if t["data"]["image"]]
    assert len(urls) == 6 and all(u.startswith("https://files.example/w48/") for u in urls)
    assert len(list((folder / "served").glob("*.png"))) == 6


def test_pages_options_go_with_label_studio(store_with_documents: Path) -> None:
    code, text = run(store_with_documents, "sample", "--week", WEEK, "--out",
                     str(store_with_documents.parent / "w48.csv"), "--pages-url", "https://x/")
    assert code == 2 and "--pages and --pages-url go with --format label-studio" in text
