"""The Label Studio round trip against a real Label Studio server on 127.0.0.1.

Label Studio is installed by ``.ci/run`` into a virtualenv of its own
(``.ls-venv``), so its pinned dependencies never touch fieldtrust's. The test
makes two Label Studio users with API tokens (``label-studio init``), starts
the server, creates a project with fieldtrust's labelling config through the
REST API, imports the tasks ``fieldtrust sample --format label-studio`` wrote,
posts annotations as both users (one cancelled), exports the project as JSON
and imports the export into fieldtrust, then checks every label.

Without ``.ls-venv`` the test skips, except in CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fieldtrust.labels.label_studio import label_config

from tests.beside import CHROMIUM
from tests.label_studio_server import ANN, BOB, api_call, api_get
from tests.label_studio_store import ingested_store, run

WEEK = "2026-W48"

# One Label Studio server for the run (tests/conftest.py): the tests using it share a worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("label_studio")]


def _choice(name: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": "value", "type": "choices",
            "value": {"choices": [value]}}


def _text(name: str, value: str) -> dict[str, Any]:
    return {"from_name": name, "to_name": "value", "type": "textarea",
            "value": {"text": [value]}}


#: The value's box on every page, as fractions (x0, y0, x1, y1).
BOX = (0.1, 0.2, 0.4, 0.3)


def _store(tmp_path: Path) -> Path:
    """30 extractions, each on page 1 of its own scanned page (a PNG) with the value's box."""
    from PIL import Image, ImageDraw

    (tmp_path / "docs").mkdir()
    rows = []
    for i in range(30):
        image = Image.new("RGB", (800, 1000), "white")
        ImageDraw.Draw(image).text((90, 210), f"Total {100 + i}.00 EUR", fill="black")
        image.save(tmp_path / "docs" / f"d{i}.png")
        rows.append({"doc_id": f"d{i}", "doc_type": "invoice", "field": "total",
                     "value": f"{100 + i}.00", "confidence": 0.55 + i / 100,
                     "extracted_at": "2026-11-24T10:00:00Z", "document_uri": f"docs/d{i}.png",
                     "page": 1, "bbox": ",".join(str(v) for v in BOX),
                     "source_excerpt": f"Total {100 + i}.00 EUR"})
    return ingested_store(tmp_path, rows, "ann", "bob")


def _shows_the_page(base: str, project: int, task: int) -> tuple[int, int]:
    """Sign in as ann in headless Chromium and open the task: the page image's pixel size."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{base}/user/login/", timeout=120_000)
            page.fill("input[name=email]", ANN[0])
            page.fill("input[name=password]", ANN[1])
            page.click("button[type=submit]")
            # Label Studio 1.23 lands on its home page, older ones on the projects.
            page.wait_for_url(lambda url: "/user/login" not in url, timeout=120_000)
            page.goto(f"{base}/projects/{project}/data?task={task}", timeout=120_000)
            image = page.locator("img[src*='local-files']").first
            image.wait_for(state="attached", timeout=120_000)
            page.wait_for_function(
                "() => [...document.querySelectorAll(\"img[src*='local-files']\")]"
                ".some(i => i.complete && i.naturalWidth > 0)", timeout=120_000)
            size = image.evaluate("i => [i.naturalWidth, i.naturalHeight]")
            return int(size[0]), int(size[1])
        finally:
            browser.close()


@pytest.mark.usefixtures("chromium")
def test_tasks_annotated_in_label_studio_come_back_as_labels(
    label_studio: tuple[str, Path], tmp_path: Path
) -> None:
    base, root = label_studio
    db = _store(tmp_path)
    tasks_file, config_file = root / "w48.json", tmp_path / "config.xml"
    code, out = run(db, "sample", "--week", WEEK, "--out", str(tasks_file), "--format",
                    "label-studio", "--label-config", str(config_file))
    assert code == 0, out
    tasks = json.loads(tasks_file.read_text())
    assert len(tasks) >= 6 and all("confidence" not in t["data"] for t in tasks)
    assert config_file.read_text() == label_config()
    first = tasks[0]
    assert first["data"]["image"].startswith("/data/local-files/?d=w48-pages/")
    [box] = first["predictions"][0]["result"]
    assert box["type"] == "rectanglelabels" and box["to_name"] == "page"
    assert [round(box["value"][k], 6) for k in ("x", "y", "width", "height")] == [
        10.0, 20.0, 30.0, 10.0]
    assert "score" not in first["predictions"][0]  # nothing beside the box to anchor on

    project = api_call(base, "POST", "/api/projects/", ANN[2],
                   {"title": "fieldtrust W48", "label_config": config_file.read_text()})
    api_call(base, "POST", "/api/storages/localfiles/", ANN[2],
         {"project": project["id"], "title": "pages", "path": str(root / "w48-pages"),
          "use_blob_urls": False})
    imported = api_call(base, "POST", f"/api/projects/{project['id']}/import", ANN[2], tasks)
    assert imported["task_count"] == len(tasks)
    listed = api_call(base, "GET", f"/api/tasks/?project={project['id']}&page_size=100", ANN[2])
    by_extraction = {t["data"]["extraction_id"]: t["id"] for t in listed["tasks"]}
    ids = [t["data"]["extraction_id"] for t in tasks]
    assert set(by_extraction) == set(ids)

    # The server serves the page, and the labelling screen shows it with its box.
    status, kind, body = api_get(base, first["data"]["image"], ANN[2])
    assert (status, kind) == (200, "image/png")
    from PIL import Image

    served = Image.open(io.BytesIO(body))
    assert served.size == (box["original_width"], box["original_height"]) == (800, 1000)
    stored_task = api_call(base, "GET", f"/api/tasks/{by_extraction[ids[0]]}", ANN[2])
    assert stored_task["predictions"][0]["result"][0]["value"]["rectanglelabels"] == [
        "extracted value"]
    assert _shows_the_page(base, project["id"], by_extraction[ids[0]]) == (800, 1000)

    # ann labels five items (one cancelled), bob reviews two of them blind. The choices
    # are the review page's words.
    plan = [
        (ANN, ids[0], [_choice("verdict", "Correct")], False, 3.5),
        (ANN, ids[1], [_choice("verdict", "Incorrect"), _text("corrected_value", "112.50"),
                       _choice("error_type", "Misread characters")], False, 9.25),
        (ANN, ids[2], [_choice("verdict", "Unreadable")], False, 4.0),
        (ANN, ids[3], [_choice("verdict", "Incorrect"),
                       _choice("corrected_status", "Absent")], False, 2.0),  # no error type
        (ANN, ids[4], [], True, 1.0),  # skipped in Label Studio
        (BOB, ids[0], [_choice("verdict", "Correct")], False, 2.5),
        (BOB, ids[1], [_choice("verdict", "Correct")], False, 3.0),
    ]
    posted = {}
    for (_, _, token), extraction, result, cancelled, lead in plan:
        answer = api_call(base, "POST", f"/api/tasks/{by_extraction[extraction]}/annotations/",
                      token, {"result": result, "was_cancelled": cancelled, "lead_time": lead})
        posted[(token, extraction)] = answer
    user_id = {ANN[2]: posted[(ANN[2], ids[0])]["completed_by"],
               BOB[2]: posted[(BOB[2], ids[0])]["completed_by"]}

    export = api_call(base, "GET", f"/api/projects/{project['id']}/export?exportType=JSON", ANN[2])
    export_file = tmp_path / "export.json"
    export_file.write_text(json.dumps(export))

    # A task that is not fieldtrust's is refused by its row, and nothing is written.
    foreign = tmp_path / "mixed.json"
    foreign.write_text(json.dumps([*export, {"id": 999, "data": {"text": "hello"},
                                             "annotations": []}]))
    code, out = run(db, "labels", "import", str(foreign), "--format", "label-studio")
    assert code == 2
    assert f"row {len(export) + 1} (task 999): not a fieldtrust task" in out
    assert _labels(db) == []

    # Label Studio's users are no store users until mapped: refused by name, with the task.
    code, out = run(db, "labels", "import", str(export_file), "--format", "label-studio")
    assert code == 2
    assert f"Label Studio user {user_id[ANN[2]]} is not a reviewer of this store" in out
    assert "(task " in out and _labels(db) == []
    mapping = ["--reviewer-map", f"{user_id[ANN[2]]}=ann", "--reviewer-map",
               f"{user_id[BOB[2]]}=bob"]
    code, out = run(db, "labels", "import", str(export_file), "--format", "label-studio",
                    *mapping, "--dry-run")
    assert code == 0, out
    assert "would add 6 new labels and 0 replacing" in out and _labels(db) == []

    code, out = run(db, "labels", "import", str(export_file), "--format", "label-studio",
                    *mapping)
    assert code == 0, out
    assert "added 6 new labels" in out and "1 cancelled Label Studio annotations skipped" in out
    assert "1 'incorrect' rows lack an error type or a corrected value" in out

    words = {"Correct": "correct", "Incorrect": "incorrect", "Unreadable": "unclear"}
    expected = []
    for (_, _, token), extraction, result, cancelled, lead in plan:
        if cancelled:
            continue
        picked = {r["from_name"]: (r["value"].get("choices") or r["value"]["text"])[0]
                  for r in result}
        verdict = words[picked["verdict"]]
        corrected = picked.get("corrected_value")
        status = {"Absent": "null"}.get(picked.get("corrected_status", ""),
                                        "present" if corrected else None)
        error_type = "misread_characters" if "error_type" in picked else (
            "not_recorded" if verdict == "incorrect" else None)
        answered = posted[(token, extraction)]
        created = dt.datetime.fromisoformat(
            (answered.get("updated_at") or answered["created_at"]).replace("Z", "+00:00")
        ).replace(tzinfo=None)
        expected.append((
            extraction, tasks[ids.index(extraction)]["data"]["sample_id"], verdict, corrected,
            status, error_type, "bob" if token == BOB[2] else "ann",
            "second" if token == BOB[2] else "primary", created, lead,
        ))
    assert sorted(_labels(db)) == sorted(expected)

    # Exported again after more work: what was imported is already stored, nothing doubles.
    again = tmp_path / "again.json"
    again.write_text(json.dumps(export, indent=1))
    code, out = run(db, "labels", "import", str(again), "--format", "label-studio", *mapping)
    assert code == 0 and "added 0 new labels and 0 replacing" in out and "6 already stored" in out

    # The double reviews are agreement and adjudication material, as in the dashboard.
    code, out = run(db, "adjudicate", "--queue", "--json")
    assert code == 0, out
    queue = json.loads(out)
    assert [(q["extraction_id"], q["primary_verdict"], q["second_verdict"]) for q in queue] \
        == [(ids[1], "incorrect", "correct")]
    code, out = run(db, "verify")
    assert code == 0 and "history intact" in out


def _labels(db: Path) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(
            "SELECT l.extraction_id, l.sample_id, l.verdict, l.corrected_value,"
            " l.corrected_status, l.error_type, l.reviewer, l.review_round, l.labeled_at,"
            " t.lead_time_seconds FROM labels l LEFT JOIN label_lead_times t USING (label_id)"
        ).fetchall()
    finally:
        con.close()
