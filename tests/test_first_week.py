"""A team's first week, end to end: from an extraction log to the policy file production reads.

ann is the store's admin and QA lead; four weeks of invoice totals are her
team's log, in its own column names, with each document's scanned page and
the value's box. She ingests it as it is (a column mapping, the log's extra
column left out), and draws each week's audit sample:

* two weeks in a spreadsheet: the sheet names each item's document and
  hides the stated confidence; a slip in the second (one item marked
  incorrect) is put right in the sheet and imported again, which replaces
  the label;
* one week on the Review page, by rita, a reviewer, through the library's
  one verdict door; her slip is put right with ``fieldtrust labels correct``;
* the newest week in Label Studio (a real server, as
  tests/labels/test_label_studio.py starts it): each task shows the page
  image, served by the server itself, with the value's box; the annotator's
  slip is put right there before the export, and her Label Studio user is
  mapped to ann.

calibrate finds the candidate; the store's segregation-of-duties setting
refuses ann's approval on labels mostly her own, so maya, a manager,
approves; the policy file states the rule. Installing as documented is
walked by tests/test_first_hour.py (the quickstart, run as printed on a
fresh clone and virtualenv).
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from fieldtrust.labels.assignment import next_items
from fieldtrust.labels.verdicts import record_verdict

from fieldtrust import store
from fieldtrust.cli.main import cli
from tests.label_studio_server import ANN, api_call, api_get
from tests.labels.test_label_studio import _choice
from tests.test_first_hour import WEEKS

# The run's one Label Studio server (tests/conftest.py) is on this group's worker.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("label_studio")]

#: The log's own names for fieldtrust's columns, as ``--columns`` maps them.
THEIR_COLUMNS = {"doc_id": "Document", "doc_type": "Kind", "field": "Field name",
                 "value": "Read value", "confidence": "Score", "extracted_at": "Extracted",
                 "document_uri": "Scan", "page": "Page no", "bbox": "Value box"}
PAGES = 8  # scanned pages the documents share, so the test writes few images
BOX = (0.1, 0.2, 0.4, 0.3)


def _run(db: Path, *args: str, user: str = "ann", code: int = 0) -> str:
    result = CliRunner().invoke(cli, [*args, "--db", str(db)], env={"FIELDTRUST_USER": user})
    assert result.exit_code == code, f"fieldtrust {' '.join(args)}: {result.output}"
    return result.output


def _scans(folder: Path) -> None:
    """The scanned pages: white A4-shaped PNGs with a total written where the box is."""
    from PIL import Image, ImageDraw

    folder.mkdir()
    for i in range(PAGES):
        image = Image.new("RGB", (800, 1000), "white")
        ImageDraw.Draw(image).text((90, 210), f"Total {100 + i}.00 EUR", fill="black")
        image.save(folder / f"scan{i}.png")


def _their_log(path: Path) -> Path:
    """Four weeks of invoice totals in the team's own columns, plus one of theirs only."""
    rng = random.Random(1)
    monday = dt.datetime(2026, 11, 2, 9)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*THEIR_COLUMNS.values(), "latency_ms"])
        for week in range(len(WEEKS)):
            for i in range(400):
                at = monday + dt.timedelta(days=7 * week, minutes=i)
                writer.writerow([f"inv-{week}-{i}", "invoice", "total",
                                 f"{rng.randint(10, 999)}.00", round(rng.uniform(0.9, 0.999), 3),
                                 at.isoformat() + "Z", f"scans/scan{i % PAGES}.png", 1,
                                 ",".join(map(str, BOX)), rng.randint(200, 900)])
    return path


def _sheet_rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _write_sheet(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def _labels(db: Path, sql: str, params: list[object] | None = None) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql, params or []).fetchall()
    finally:
        con.close()


#: The labels that stand: none superseded by a later one.
STANDING = ("SELECT extraction_id, verdict, reviewer FROM labels l WHERE NOT EXISTS"
            " (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)")


def test_a_team_s_first_week(label_studio: tuple[str, Path], tmp_path: Path) -> None:
    base, root = label_studio
    db = tmp_path / "fieldtrust.duckdb"
    _run(db, "init", "--admin", "ann")
    _scans(tmp_path / "scans")
    log = _their_log(tmp_path / "extractions.csv")
    mapping = ",".join(f"{ours}={theirs}" for ours, theirs in THEIR_COLUMNS.items())
    _run(db, "ingest", str(log), "--quiet", code=2)  # their names are not ours
    out = _run(db, "ingest", str(log), "--columns", mapping, "--ignore-unknown", "--quiet")
    assert "1,600 added" in out and "latency_ms" in out
    _run(db, "users", "grant", "ann", "qa_lead")
    _run(db, "users", "grant", "rita", "reviewer")
    _run(db, "users", "grant", "maya", "manager")
    design = tmp_path / "design.toml"
    design.write_text("base_rate = 0.25\nminimum = 10\n")

    # Two weeks in a spreadsheet: the sheet says where each value is, not what the model
    # thought of it. In the second, a slip is put right in the sheet and imported again.
    for week in WEEKS[:2]:
        sheet = tmp_path / f"{week}.csv"
        _run(db, "sample", "--week", week, "--design", str(design), "--out", str(sheet))
        rows = _sheet_rows(sheet)
        assert "confidence" not in rows[0]
        assert {r["document_uri"] for r in rows} <= {f"scans/scan{i}.png" for i in range(PAGES)}
        for row in rows:
            row["verdict"] = "correct"
        slipped = rows[0]
        if week == WEEKS[1]:
            slipped.update(verdict="incorrect", corrected_value="1.00",
                           error_type="misread_characters")
        _write_sheet(sheet, rows)
        out = _run(db, "labels", "import", str(sheet), "--reviewer", "ann")
        assert f"added {len(rows)} new labels" in out and " 0 without a verdict" in out
    slipped.update(verdict="correct", corrected_value="", error_type="")
    _write_sheet(sheet, rows)
    out = _run(db, "labels", "import", str(sheet), "--reviewer", "ann")
    assert "added 0 new labels and 1 replacing their reviewer's earlier label" in out

    # One week on the Review page: rita's verdicts go through the page's door; her slip
    # is put right from the CLI, a superseding row in the history.
    sample = json.loads(_run(db, "sample", "--week", WEEKS[2], "--design", str(design),
                             "--json"))["sample_id"]
    con = store.connect(db)
    try:
        items = next_items(con, "rita", sample, count=1_000)
        for i, item in enumerate(items):
            wrong = i == len(items) - 1
            record_verdict(con, actor="rita", extraction_id=item.extraction_id,
                           verdict="incorrect" if wrong else "correct",
                           corrected_value="9.99" if wrong else None,
                           error_type="misread_characters" if wrong else None)
    finally:
        con.close()
    last = items[-1].extraction_id
    recent = _run(db, "labels", "recent", "--limit", "1", user="rita")
    assert items[-1].doc_id in recent and "incorrect" in recent
    fixed = _run(db, "labels", "correct", "last", "correct", user="rita")
    assert f"{last}: correct (was incorrect) by rita" in fixed and "supersedes" in fixed

    # The newest week in Label Studio, each task with its page and the value's box.
    tasks_file, config_file = root / "first-week.json", tmp_path / "config.xml"
    _run(db, "sample", "--week", WEEKS[-1], "--design", str(design), "--out", str(tasks_file),
         "--format", "label-studio", "--label-config", str(config_file))
    tasks = json.loads(tasks_file.read_text())
    first = tasks[0]
    assert first["data"]["image"].startswith("/data/local-files/?d=first-week-pages/")
    [box] = first["predictions"][0]["result"]
    assert box["type"] == "rectanglelabels" and box["to_name"] == "page"
    project = api_call(base, "POST", "/api/projects/", ANN[2],
                   {"title": f"fieldtrust {WEEKS[-1]}", "label_config": config_file.read_text()})
    api_call(base, "POST", "/api/storages/localfiles/", ANN[2],
         {"project": project["id"], "title": "pages", "path": str(root / "first-week-pages"),
          "use_blob_urls": False})
    assert api_call(base, "POST", f"/api/projects/{project['id']}/import", ANN[2],
                tasks)["task_count"] == len(tasks)
    status, kind, _ = api_get(base, first["data"]["image"], ANN[2])
    assert (status, kind) == (200, "image/png")  # the server shows the page itself
    listed = api_call(base, "GET",
                  f"/api/tasks/?project={project['id']}&page_size={len(tasks)}", ANN[2])
    task_ids = {t["data"]["extraction_id"]: t["id"] for t in listed["tasks"]}
    answers = {}
    for extraction_id, task_id in task_ids.items():
        answers[extraction_id] = api_call(
            base, "POST", f"/api/tasks/{task_id}/annotations/", ANN[2],
            {"result": [_choice("verdict", "Correct")], "lead_time": 2.0})
    # A slip: one item marked incorrect, then put right in Label Studio before the export.
    slipped_task = next(iter(task_ids))
    api_call(base, "PATCH", f"/api/annotations/{answers[slipped_task]['id']}/", ANN[2],
         {"result": [_choice("verdict", "Incorrect")]})
    api_call(base, "PATCH", f"/api/annotations/{answers[slipped_task]['id']}/", ANN[2],
         {"result": [_choice("verdict", "Correct")]})
    export = api_call(base, "GET", f"/api/projects/{project['id']}/export?exportType=JSON", ANN[2])
    export_file = tmp_path / "export.json"
    export_file.write_text(json.dumps(export))
    annotator = answers[slipped_task]["completed_by"]
    out = _run(db, "labels", "import", str(export_file), "--format", "label-studio",
               "--reviewer-map", f"{annotator}=ann")
    assert f"added {len(tasks)} new labels" in out

    standing = _labels(db, STANDING)
    assert {verdict for _, verdict, _ in standing} == {"correct"}  # every slip put right
    assert len(standing) == len({e for e, _, _ in standing})  # one standing label an item
    by_reviewer = dict(_labels(db, f"SELECT reviewer, count(*) FROM ({STANDING}) GROUP BY 1"))
    assert set(by_reviewer) == {"ann", "rita"} and by_reviewer["rita"] == len(items)

    # Calibrate: one candidate, certified on the four weeks.
    candidates = json.loads(_run(db, "candidates", "--json"))["candidates"]
    assert [(c["doc_type"], c["field"]) for c in candidates] == [("invoice", "total")]
    threshold = candidates[0]["threshold"]

    # Segregation of duties: ann gave most of the labels; the store allows her 60%.
    total = sum(by_reviewer.values())
    assert by_reviewer["ann"] / total > 0.6
    _run(db, "policy", "settings", "--max-own-label-share", "0.6", "--as", "ann")
    refused = _run(db, "decide", "approve", "--doc-type", "invoice", "--field", "total",
                   "--comment", "first week", code=2)
    assert f"ann gave {by_reviewer['ann']:,} of the {total:,} labels" in refused
    out = _run(db, "decide", "approve", "--doc-type", "invoice", "--field", "total",
               "--comment", "first week: four weekly audits", user="maya")
    assert "by maya" in out and "warning" not in out

    policy = json.loads(_run(db, "policy", "export"))
    (row,) = policy["thresholds"]
    assert (row["doc_type"], row["field"], row["threshold"], row["approved_by"]) == (
        "invoice", "total", threshold, "maya")
    assert (row["comparison"], row["target"], row["confidence"]) == (">=", 0.95, 0.95)
    assert row["form_versions"] == ["unknown"]
    assert ">= threshold" in policy["rule"]
    assert "history intact" in _run(db, "verify")
