"""A small team's walk to a certificate, from the CLI only (issue 24, goal 3).

5,000 extractions of invoices and receipts, two fields each (four strata),
three closed weeks and an open one. invoice/total is 98% accurate above 0.9
(every fiftieth item there wrong), the other strata 90%. Each closed week's
sample draws half of every cell; reviewers label the cells above 0.9 of
invoice/total and nothing else. The current week's rows arrive after the
last draw: open, outside the certificate.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fieldtrust.cli.main import cli

WEEKS = ("2026-W45", "2026-W46", "2026-W47")
OPEN = "2026-W48"
STRATA = (("invoice", "total"), ("invoice", "date"), ("receipt", "total"), ("receipt", "date"))
PER_WEEK = 5000 // 4 // 4  # extractions of one stratum in one week
DESIGN = "bands = [0, 0.9, 0.95, 0.99, 1]\nbase_rate = 0.5\nminimum = 10\nnew_version_weeks = 0\n"


def _log(path: Path, week_index: int, n_per_stratum: int, truth: dict[str, bool],
         seed: int = 0) -> Path:
    """One week of the four strata; ``truth`` gets each extraction's correctness."""
    rng = np.random.default_rng([seed, week_index])
    monday = dt.datetime(2026, 11, 2, 8) + dt.timedelta(days=7 * week_index)
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["extraction_id", "doc_id", "doc_type", "field", "value", "confidence",
                         "extracted_at"])
        for doc_type, field in STRATA:
            confidence = np.round(rng.beta(9, 1, n_per_stratum), 4)
            high = 0
            for i, c in enumerate(confidence):
                key = f"{doc_type}-{field}-{week_index}-{i}"
                if (doc_type, field) == ("invoice", "total") and c >= 0.9:
                    high += 1
                    truth[key] = high % 50 != 0
                else:
                    truth[key] = bool(rng.random() < 0.9)
                at = monday + dt.timedelta(minutes=2 * i)
                writer.writerow([key, f"doc-{key}", doc_type, field, f"{i}.00", c,
                                 at.isoformat() + "Z"])
    return path


def _label(sheet: Path, truth: dict[str, bool]) -> int:
    """Fill the verdicts of invoice/total's items above 0.9; leave every other row blank."""
    with sheet.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    chosen = [r for r in rows if (r["doc_type"], r["field"]) == ("invoice", "total")
              and float(r["confidence"]) >= 0.9]
    for row in chosen:
        row["verdict"] = "correct" if truth[row["extraction_id"]] else "incorrect"
        row["reviewer"] = "quinn"
    keep = [r for r in rows if r["verdict"]]
    with sheet.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(keep)
    return len(chosen)


@pytest.fixture
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    for name in ("FIELDTRUST_DB", "FIELDTRUST_CONFIG", "FIELDTRUST_USER", "FIELDTRUST_CERTIFICATE"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, ["--db", str(tmp_path / "team.duckdb"), *args])
        assert result.exit_code == 0, f"fieldtrust {' '.join(args)}: {result.output}"
        return result.output

    return tmp_path, run


def test_the_small_teams_stratum_certifies_and_the_open_week_does_not_remove_it(team) -> None:
    tmp_path, run = team
    truth: dict[str, bool] = {}
    run("init", "--admin", "root")
    run("users", "grant", "quinn", "qa_lead", "--as", "root")
    # Three closed weeks are all the evidence a young store has: the team's policy asks
    # for three, and the anytime certificate.
    run("policy", "settings", "--certificate", "anytime", "--stability-weeks", "3",
        "--as", "root")
    (tmp_path / "design.toml").write_text(DESIGN)
    labelled = 0
    for w, week in enumerate(WEEKS):
        run("ingest", str(_log(tmp_path / f"{week}.csv", w, PER_WEEK, truth)), "--quiet")
        sheet = tmp_path / f"sample-{week}.csv"
        # The confidence column is shown: this team labels only the items above 0.9.
        run("sample", "--week", week, "--design", "design.toml", "--seed", "1",
            "--out", str(sheet), "--show-confidence", "--as", "quinn")
        labelled += _label(sheet, truth)
        run("labels", "import", str(sheet), "--as", "quinn")
    # Monday: the open week's first rows arrive after the last draw.
    run("ingest", str(_log(tmp_path / f"{OPEN}.csv", 3, PER_WEEK, truth)), "--quiet")

    report = json.loads(run("candidates", "--json"))
    chosen = {(c["doc_type"], c["field"]): c for c in report["candidates"]}
    assert list(chosen) == [("invoice", "total")], report["not_candidates"]
    total = chosen[("invoice", "total")]
    assert total["certificate"] == "anytime" and total["open_weeks"] == [OPEN]
    assert total["closed_weeks"] == list(WEEKS) and total["unaudited_closed_weeks"] == []
    assert 0.85 <= total["threshold"] <= 0.9
    stratum = 4 * PER_WEEK  # the stratum's extractions, the open week's included
    assert labelled / stratum <= 0.25
    assert total["accuracy"] >= 0.97 and total["accuracy_low"] < total["accuracy"]
    assert total["reviewer_misses"] == "reviewer misses not allowed for: no seeds"
    assert "coming 3 weeks" in total["between_week_text"]
    assert report["across_strata"]["certified_shown"] == 1
    assert report["across_strata"]["expected_wrong_certificates"] == pytest.approx(0.05)

    # calibrate shows the same certificate and the same promise.
    calibrated = json.loads(run("calibrate", "--json"))
    strata = {(s["doc_type"], s["field"]): s for s in calibrated["strata"]}
    assert strata[("invoice", "total")]["certified_threshold"] == total["threshold"]
    assert strata[("invoice", "total")]["candidate"] is True
    assert calibrated["across_strata"] == report["across_strata"]

    # The same store under today's one-look certificate: the open week wipes it out.
    run("policy", "settings", "--certificate", "fixed", "--as", "root")
    today = json.loads(run("candidates", "--json"))
    assert today["candidates"] == []
    reasons = {(c["doc_type"], c["field"]): c["reason"] for c in today["not_candidates"]}
    assert reasons[("invoice", "total")] == "unaudited_weeks"
