"""A team's first hour on its own data, from the CLI only: one person, one name.

The walk docs/quickstart.md shows: make the store with its first admin, say
who you are once (FIELDTRUST_USER), ingest the extraction log, take the
qa_lead role too, draw each week's audit sample to a file, fill its verdict
column as a reviewer would, import it, calibrate, and approve the candidate.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import random
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from fieldtrust.cli.main import cli

WEEKS = ("2026-W45", "2026-W46", "2026-W47", "2026-W48")


def _extraction_log(path: Path) -> Path:
    """Four weeks of invoice totals read with high confidence (and, it will turn out, right)."""
    rng = random.Random(1)
    monday = dt.datetime(2026, 11, 2, 9)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["doc_id", "doc_type", "field", "value", "confidence", "extracted_at"])
        for week in range(len(WEEKS)):
            for i in range(400):
                at = monday + dt.timedelta(days=7 * week, minutes=i)
                value = f"{rng.randint(10, 999)}.00"
                writer.writerow([f"inv-{week}-{i}", "invoice", "total", value,
                                 round(rng.uniform(0.9, 0.999), 3), at.isoformat() + "Z"])
    return path


def _fill(path: Path, verdict: str) -> int:
    """Fill the verdict column of a sample file, as a reviewer does in a spreadsheet."""
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        row["verdict"] = verdict
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def test_the_first_hour_ends_in_an_approval(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("FIELDTRUST_DB", "FIELDTRUST_CONFIG", "FIELDTRUST_USER"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, list(args), env={"FIELDTRUST_USER": "ann"})
        assert result.exit_code == 0, f"fieldtrust {' '.join(args)}: {result.output}"
        assert not re.search(r"\bnan\b", result.output, re.IGNORECASE), result.output
        return result.output

    out = run("init", "--admin", "ann")
    assert "ann is now the admin of this store" in out
    assert "fieldtrust ingest" in out and "users grant ann qa_lead" in out
    assert "fieldtrust sample --week" in out
    log = _extraction_log(tmp_path / "extractions.csv")
    assert "1,600 added" in run("ingest", str(log), "--quiet")

    before = json.loads(run("calibrate", "--json"))
    assert before["overall"]["accuracy"] is None
    assert before["strata"][0]["reason"] == "no_labels"
    assert "no accuracy yet" in run("calibrate")

    assert "ann now holds: qa_lead, admin" in run("users", "grant", "ann", "qa_lead")
    # A quarter of each week: enough design-based labels above the threshold in every
    # week for the stability check (50 by default, docs/statistics.md).
    (tmp_path / "design.toml").write_text("base_rate = 0.25\nminimum = 10\n")
    # How many labels, and when: before any label the planner assumes the policy's
    # prior_error; with three weeks labelled (all right) the 25% design certifies at once.
    out = run("plan", "--week", WEEKS[-1], "--design", "design.toml",
              "--goal", "invoice/total within 4 weeks")
    assert "what it can certify" in out and "goal invoice/total within 4 weeks: label" in out
    labelled = 0
    for week in WEEKS:
        if week == WEEKS[-1]:
            plan = json.loads(run("plan", "--week", week, "--design", "design.toml", "--json"))
            (row,) = plan["certify"]["strata"]
            assert (row["threshold"], row["certify_week"]) == (0.9, 1), row
        sheet = tmp_path / f"{week}.csv"
        assert "wrote" in run("sample", "--week", week, "--design", "design.toml",
                              "--out", str(sheet))
        labelled += _fill(sheet, "correct")
        out = run("labels", "import", str(sheet), "--reviewer", "ann")
        assert "labels added" in out and " 0 without a verdict" in out

    candidates = json.loads(run("candidates", "--json"))["candidates"]
    assert [(c["doc_type"], c["field"]) for c in candidates] == [("invoice", "total")]
    threshold = candidates[0]["threshold"]
    out = run("decide", "approve", "--doc-type", "invoice", "--field", "total",
              "--comment", "certified on four weekly audits")
    assert "approve" in out and "ann" in out
    policy = json.loads(run("policy", "show", "--json"))
    assert [(p["doc_type"], p["field"], p["status"], p["threshold"], p["decided_by"])
            for p in policy] == [("invoice", "total", "active", threshold, "ann")]
    users = json.loads(run("users", "list", "--json"))
    assert users == [{"user_name": "ann", "roles": ["qa_lead", "admin"]}]
    assert labelled > 59
