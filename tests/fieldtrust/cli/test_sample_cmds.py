from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner
from fieldtrust.sampling.items_csv import ITEM_COLUMNS, LABEL_COLUMNS, escape_cell

from fieldtrust import store
from fieldtrust.cli.main import cli

WEEK = "2026-W48"
#: Drawing and labels import are checked: the ``world`` qa_lead acts (granted in ``filled``).
AS_LEAD = ("--as", "quinn")


@pytest.fixture
def filled(db_path: Path, world) -> Path:
    con = store.connect(db_path)
    world.grant(con)
    frame = world.frame(WEEK, 3000, seed=1)
    frame.loc[0:4, "value"] = ["=SUM(A1)", "+1", "-12.50", "@cmd", "plain"]
    world.insert(con, frame)
    con.close()
    return db_path


def run(db: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_sample_draws_then_returns(filled: Path) -> None:
    code, out = run(filled, "sample", "--week", WEEK, "--seed", "3", *AS_LEAD)
    assert code == 0, out
    assert f"drew {WEEK}/v1 (seed 3" in out and "inclusion_prob" in out and "total:" in out
    code, out = run(filled, "sample", "--week", WEEK, "--seed", "3", *AS_LEAD)
    assert f"already drawn: {WEEK}/v1" in out and "replaces" not in out
    code, out = run(filled, "sample", "--week", WEEK, "--seed", "4", *AS_LEAD)
    assert f"drew {WEEK}/v2" in out and f"replaces {WEEK}/v1 as the week's current sample" in out


def test_seed_defaults_to_the_setting(filled: Path) -> None:
    _, out = run(filled, "sample", "--week", WEEK, "--json", *AS_LEAD)
    assert json.loads(out)["seed"] == 20261130


def test_sample_json_and_design_file(filled: Path, tmp_path: Path) -> None:
    design = tmp_path / "d.toml"
    design.write_text("[design]\nbase_rate = 0.05\nminimum = 5\n")
    _, out = run(filled, "sample", "--week", WEEK, "--design", str(design), "--json", *AS_LEAD)
    payload = json.loads(out)
    assert payload["created"] is True and payload["design"]["base_rate"] == 0.05
    assert sum(c["n_sample"] for c in payload["cells"]) == payload["n_sample"]
    assert all(c["inclusion_prob"] == c["n_sample"] / c["n_population"] for c in payload["cells"])


def test_out_writes_escaped_csv_for_labelling(filled: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "items.csv"
    design = tmp_path / "all.json"
    design.write_text(json.dumps({"base_rate": 1.0}))  # take everything: the tricky rows too
    code, out = run(
        filled, "sample", "--week", WEEK, "--design", str(design), "--out", str(out_file), *AS_LEAD
    )
    assert code == 0 and "wrote 3000 items" in out
    with out_file.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == [*ITEM_COLUMNS, *LABEL_COLUMNS]
    values = {r["extraction_id"]: r["value"] for r in rows}
    assert values[f"{WEEK}-000000"] == "'=SUM(A1)"
    assert values[f"{WEEK}-000001"] == "'+1"
    assert values[f"{WEEK}-000002"] == "'-12.50"
    assert values[f"{WEEK}-000003"] == "'@cmd"
    assert values[f"{WEEK}-000004"] == "plain"
    assert {r["sample_id"] for r in rows} == {f"{WEEK}/v1"}
    assert {r["verdict"] for r in rows} == {""}


@pytest.mark.parametrize(
    ("value", "expected"),
    [("=1", "'=1"), ("\tx", "'\tx"), ("a=b", "a=b"), (0.5, 0.5), (None, None)],
)
def test_escape_cell(value: object, expected: object) -> None:
    assert escape_cell(value) == expected


def test_preview_and_plan_write_nothing(filled: Path) -> None:
    for args in (("sample", "--week", WEEK, "--preview"), ("plan", "--week", WEEK)):
        code, out = run(filled, *args)
        assert code == 0 and "boosted" in out and "total:" in out
    con = duckdb.connect(str(filled), read_only=True)
    assert con.sql("SELECT count(*) FROM audit_samples").fetchall() == [(0,)]
    con.close()


def test_preview_with_out_is_a_usage_error(filled: Path) -> None:
    code, out = run(filled, "sample", "--week", WEEK, "--preview", "--out", "x.csv")
    assert code == 2 and "--preview writes nothing" in out


def test_errors_are_one_line(filled: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("minimum = 1\n")
    result = CliRunner().invoke(
        cli, ["--db", str(filled), "sample", "--week", WEEK, "--design", str(bad), *AS_LEAD]
    )
    assert result.exit_code == 2
    assert "error:" in result.output and "minimum = 1: use at least 2" in result.output
    result = CliRunner().invoke(
        cli, ["--db", str(filled), "sample", "--week", "2026-W01", *AS_LEAD]
    )
    assert result.exit_code == 2 and "holds no extractions" in result.output


def test_drawing_needs_a_qa_lead(filled: Path) -> None:
    code, out = run(filled, "sample", "--week", WEEK)
    assert code == 2 and "drawing a sample needs to know who you are: give --as NAME" in out
    result = CliRunner().invoke(
        cli, ["--db", str(filled), "sample", "--week", WEEK, "--as", "root"]
    )
    assert result.exit_code == 2
    assert result.stderr.startswith(
        "error: root (role admin) may not draw an audit sample: that needs the role qa_lead;"
    )
    con = duckdb.connect(str(filled), read_only=True)
    assert con.sql("SELECT count(*) FROM audit_samples").fetchall() == [(0,)]
    con.close()


def test_the_sheet_carries_the_document_and_no_confidence_unless_asked(
    filled: Path, tmp_path: Path
) -> None:
    con = store.connect(filled)
    con.execute("UPDATE extractions SET document_uri = 'docs/' || doc_id || '.pdf', page = 2,"
                " source_excerpt = 'Total: ' || value")
    con.close()
    sheet, shown = tmp_path / "sheet.csv", tmp_path / "shown.csv"
    code, out = run(filled, "sample", "--week", WEEK, "--seed", "3", "--out", str(sheet),
                    *AS_LEAD)
    assert code == 0, out
    with sheet.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert "confidence" not in rows[0]
    first = rows[0]
    assert first["document_uri"].startswith("docs/") and first["page"] == "2"
    assert first["source_excerpt"] == "Total: " + first["value"].removeprefix("'")
    code, out = run(filled, "sample", "--week", WEEK, "--seed", "3", "--out", str(shown),
                    "--show-confidence", *AS_LEAD)
    with shown.open(newline="") as handle:
        header = next(csv.reader(handle))
    assert header[header.index("value") + 1] == "confidence"


def _label_first(sheet: Path, n: int) -> list[dict[str, str]]:
    """Fill in the drawn ``sheet`` as a reviewer would: the first ``n`` rows correct, by
    quinn, the rest left blank; every row."""
    with sheet.open(newline="") as handle:
        reader = csv.DictReader(handle)
        columns, rows = reader.fieldnames, list(reader)
    for row in rows[:n]:
        row["verdict"], row["reviewer"] = "correct", "quinn"
    with sheet.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)
    return rows


def test_open_only_leaves_out_the_items_labelled_already(filled: Path, tmp_path: Path) -> None:
    """A redrawn week's sheet re-listed every labelled item with an empty verdict."""
    sheet = tmp_path / "w48.csv"
    run(filled, "sample", "--week", WEEK, "--seed", "3", "--out", str(sheet), *AS_LEAD)
    rows = _label_first(sheet, 10)
    code, out = run(filled, "labels", "import", str(sheet), *AS_LEAD)
    assert code == 0, out
    redrawn = tmp_path / "open.csv"
    code, out = run(filled, "sample", "--week", WEEK, "--seed", "3", "--out", str(redrawn),
                    "--open-only", *AS_LEAD)
    assert code == 0 and f"wrote {len(rows) - 10} items without a label yet" in out
    with redrawn.open(newline="") as handle:
        left = {r["extraction_id"] for r in csv.DictReader(handle)}
    assert left == {r["extraction_id"] for r in rows[10:]}


def test_report_and_queue(filled: Path, world) -> None:
    run(filled, "sample", "--week", WEEK, "--seed", "3", *AS_LEAD)
    con = store.connect(filled)
    world.label(con, f"{WEEK}/v1")
    con.close()
    code, out = run(filled, "report", "--weeks", "2")
    assert code == 0, out
    assert "ALERT" in out or "no alerts" in out
    code, text = run(filled, "report", "--weeks", "2", "--json")
    payload = json.loads(text)
    assert payload["weeks"][-1] == WEEK and payload["trend"] and payload["overall"]
    # Every figure carries its n and its interval (or the [*] of an uninformative one),
    # and says what it covers; the cells are the JSON's numbers.
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("doc type"))
    assert lines[header].split()[:2] == ["doc", "type"] and WEEK in lines[header]
    overall = payload["overall"][-1]
    row = next(line for line in lines if line.startswith("(all strata)"))
    if overall["interval_note"] is None:
        assert row.rstrip().endswith(
            f"{100 * overall['estimate']:.1f} [{100 * overall['lower']:.1f}"
            f"-{100 * overall['upper']:.1f}] n={overall['n']:,}")
    else:
        assert row.rstrip().endswith(f"{100 * overall['estimate']:.1f} [*] n={overall['n']:,}")
    covered = next(line for line in lines if line.startswith("(extractions covered)"))
    assert covered.rstrip().endswith(f"{overall['population']:,.0f}")
    body = lines[header + 2: next(i for i, line in enumerate(lines) if not line.strip())]
    for cell in (c for line in body[2:] for c in re.split(r"\s{2,}", line.strip())[2:]):
        assert re.fullmatch(r"\d+\.\d (\[\d+\.\d-\d+\.\d\]|\[\*\]) n=[\d,]+", cell), cell
    assert len(body) == 2 + len({(r["doc_type"], r["field"]) for r in payload["trend"]})
    code, out = run(filled, "queue", "--limit", "5")
    assert code == 0 and "stated confidence" in out
    code, out = run(filled, "queue", "--limit", "3", "--json")
    assert [r["position"] for r in json.loads(out)["queue"]] == [1, 2, 3]


def test_report_without_labels(filled: Path) -> None:
    code, out = run(filled, "report")
    assert code == 0 and "no audit labels yet" in out


@pytest.mark.parametrize("command", ["sample", "plan", "report", "queue"])
def test_help_has_an_example(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0 and "Example: fieldtrust" in result.output


def test_out_file_round_trips_through_labels_import(filled: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "w48.csv"
    run(filled, "sample", "--week", WEEK, "--seed", "3", "--out", str(out_file), *AS_LEAD)
    _label_first(out_file, 40)
    code, out = run(filled, "labels", "import", str(out_file), *AS_LEAD)
    assert code == 0, out
    con = duckdb.connect(str(filled), read_only=True)
    stored = con.sql(
        "SELECT count(*), count(DISTINCT sample_id), min(reviewer) FROM effective_labels"
    ).fetchall()
    con.close()
    assert stored == [(40, 1, "quinn")]
