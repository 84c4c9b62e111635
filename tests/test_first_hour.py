"""A team's first hour on its own data, from the CLI only: one person, one name.

The walk docs/quickstart.md shows: make the store with its first admin, say
who you are once (FIELDTRUST_USER), make the key decisions are signed with,
ingest the extraction log, take the
qa_lead role too, draw each week's audit sample to a file, fill its verdict
column as a reviewer would, import it, calibrate, and approve the candidate.
The second test runs the page itself, command by command, on a fresh clone
and virtualenv, and compares what each command prints with what it shows.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
import random
import re
import subprocess
import venv
from pathlib import Path

import pytest
from click.testing import CliRunner
from doc_session import Shell, normalise, session, steps

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
    for name in ("FIELDTRUST_DB", "FIELDTRUST_CONFIG", "FIELDTRUST_USER",
                 "FIELDTRUST_SIGNING_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)
    runner = CliRunner()
    env = {"FIELDTRUST_USER": "ann"}

    def run(*args: str) -> str:
        result = runner.invoke(cli, list(args), env=env)
        assert result.exit_code == 0, f"fieldtrust {' '.join(args)}: {result.output}"
        assert not re.search(r"\bnan\b", result.output, re.IGNORECASE), result.output
        return result.output

    out = run("init", "--admin", "ann")
    assert "ann is now the admin of this store" in out
    key = tmp_path / "keys" / "signing.key"  # outside the store's folder, in a real team
    assert "created signing key" in run("keys", "create", str(key))
    env["FIELDTRUST_SIGNING_KEY_FILE"] = str(key)
    assert "fieldtrust ingest" in out and "users grant ann qa_lead" in out
    assert "fieldtrust sample --week" in out
    log = _extraction_log(tmp_path / "extractions.csv")
    assert "1,600 added" in run("ingest", str(log), "--quiet")

    before = json.loads(run("calibrate", "--json"))
    assert before["overall"]["accuracy"] is None
    # No sample drawn yet: no week has closed, so nothing is evidence yet.
    assert before["strata"][0]["reason"] == "no_closed_week"
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
        assert "new labels and" in out and " 0 without a verdict" in out

    candidates = json.loads(run("candidates", "--json"))["candidates"]
    assert [(c["doc_type"], c["field"]) for c in candidates] == [("invoice", "total")]
    threshold = candidates[0]["threshold"]
    # Certified by the default certificate, valid at every weekly look over the horizon.
    assert candidates[0]["certificate"] == "anytime" and candidates[0]["horizon_weeks"] == 52
    out = run("decide", "approve", "--doc-type", "invoice", "--field", "total",
              "--comment", "certified on four weekly audits")
    assert "approve" in out and "ann" in out
    policy = json.loads(run("policy", "show", "--json"))
    assert [(p["doc_type"], p["field"], p["status"], p["threshold"], p["decided_by"])
            for p in policy] == [("invoice", "total", "active", threshold, "ann")]
    exported = json.loads(run("policy", "export"))
    assert exported["signature"]["algorithm"] == "ed25519"
    assert "history intact" in run("verify")
    users = json.loads(run("users", "list", "--json"))
    assert users == [{"user_name": "ann", "roles": ["qa_lead", "admin"]}]
    assert labelled > 59


# The page itself, run as printed --------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "docs" / "quickstart.md"


def quickstart_shell(tmp: Path, page: str, env: dict[str, str]) -> Shell:
    """A fresh machine for docs/quickstart.md: a clone, a virtualenv, the page's files.

    The page starts in a clone of the repository (its committed state) with a
    fresh virtualenv's ``python`` first on PATH. The test has no package
    index: the dependencies come from the base interpreter's site-packages,
    and the build runs without an isolated environment (on a machine with the
    index, the page's command fetches setuptools itself). The
    extraction log is the one :func:`_extraction_log` writes, the design file
    is what the page's ``cat design.toml`` shows, and each sheet is filled
    with "correct" before its import, as a reviewer would.
    """
    clone = tmp / "fieldtrust"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    venv.create(tmp / "venv", system_site_packages=True, with_pip=True)
    # Its bundled setuptools predates building wheels without the `wheel` package;
    # without it, the build uses this interpreter's (what an isolated build fetches).
    subprocess.run([str(tmp / "venv" / "bin" / "python"), "-m", "pip", "uninstall", "--quiet",
                    "--yes", "setuptools"], check=True, capture_output=True)
    env = {k: v for k, v in env.items()
           if not k.startswith(("FIELDTRUST_", "PIP_", "VIRTUAL_ENV", "PYTHON"))}
    (tmp / "home").mkdir()  # the page's ~ (its signing key goes there), not the tester's
    env.update(PATH=f"{tmp / 'venv' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               HOME=str(tmp / "home"),
               PIP_NO_INDEX="1", PIP_NO_BUILD_ISOLATION="0",
               PIP_DISABLE_PIP_VERSION_CHECK="1", COLUMNS="200")
    shown = {s.command: s.shown for s in steps(page)}

    def before(command: str, shell: Shell) -> None:
        words = command.split()
        if "extractions.csv" in words and not (shell.cwd / "extractions.csv").exists():
            _extraction_log(shell.cwd / "extractions.csv")
        if command == "cat design.toml":
            (shell.cwd / "design.toml").write_text(shown[command] + "\n")
        if words[1:3] == ["labels", "import"]:
            _fill(shell.cwd / words[3], "correct")

    return Shell(clone, env, before)


@pytest.mark.slow  # a clone, a wheel build and about twenty CLI processes: minutes on 2 cores
def test_the_quickstart_runs_as_printed(tmp_path: Path) -> None:
    page = QUICKSTART.read_text(encoding="utf-8")
    commands = [s.command for s in steps(page)]
    assert commands[0] == "python -m pip install ." and "fieldtrust recalibrate" in commands
    assert not any("pip install fieldtrust" in c for c in commands)  # not on the index
    shell = quickstart_shell(tmp_path, page, dict(os.environ))
    for step, printed in session(page, shell):
        if step.shown.strip():
            assert normalise(printed) == normalise(step.shown), (
                f"docs/quickstart.md line {step.line}: `$ {step.command}` printed otherwise"
                " (regenerate: python tests/doc_session.py docs/quickstart.md)\n" + printed)
    # The store the page built is outside the clone, and the CLI came from the virtualenv.
    assert (shell.cwd / "fieldtrust.duckdb").exists() and "fieldtrust" not in shell.cwd.parts[-1:]
    where = subprocess.run(["bash", "-c", "command -v fieldtrust"], env=shell.env,
                           capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(tmp_path / "venv"))


def test_the_readme_installs_the_way_the_quickstart_does() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert first[0].startswith("git clone ")  # in an empty folder, the clone comes first
    assert first[1].startswith("cd fieldtrust")
    assert first[2].startswith("python -m pip install . && fieldtrust serve --demo")
    assert "python -m pip install ." in [s.command for s in steps(QUICKSTART.read_text())]
