"""`fieldtrust ingest` and `fieldtrust labels import`: output, exit codes, messages, help."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner, Result

from fieldtrust.cli.main import cli
from fieldtrust.cli.store_cmds import labels_group
from tests.conftest import file_rows

HEADER = ["extraction_id", "doc_id", "doc_type", "field", "value", "confidence", "extracted_at"]
GOOD = [
    ["x1", "d1", "invoice", "total", "12.50", "0.93", "2026-01-05T10:00:00Z"],
    ["x2", "d1", "invoice", "tax", "", "0.5", "2026-01-05T10:00:00Z"],
    ["x3", "d2", "receipt", "date", "2026-01-01", "1", "2026-01-06T09:30:00+02:00"],
]


def write_csv(path: Path, rows: list[list[Any]], header: list[str] = HEADER) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def run(db: Path, *args: str | Path) -> Result:
    return CliRunner().invoke(cli, ["--db", str(db), *[str(a) for a in args]])


def counts(db: Path) -> tuple[int, int, int]:
    (row,) = file_rows(
        db,
        "SELECT (SELECT count(*) FROM extractions), (SELECT count(*) FROM ingest_batches),"
        " (SELECT count(*) FROM labels)",
    )
    return int(row[0]), int(row[1]), int(row[2])


def test_ingest_prints_rows_read_added_and_already_stored(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    first = write_csv(tmp_path / "a.csv", GOOD[:2])
    second = write_csv(tmp_path / "b.csv", GOOD)
    result = run(db, "ingest", first, second)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "a.csv: 2 rows read, 2 added, 0 already stored",
        "b.csv: 3 rows read, 1 added, 2 already stored",
    ]
    assert re.search(r"^\[[\d.]+ s\] reading a\.csv$", result.stderr, re.M)
    assert re.search(r"^\[0/3 rows, [\d.]+ s\] validating b\.csv$", result.stderr, re.M)
    assert counts(db) == (3, 2, 0)


def test_ingest_quiet_prints_no_progress(tmp_path: Path) -> None:
    result = run(tmp_path / "s.duckdb", "ingest", "--quiet", write_csv(tmp_path / "a.csv", GOOD))
    assert result.exit_code == 0
    assert result.stderr == ""
    assert result.stdout == "a.csv: 3 rows read, 3 added, 0 already stored\n"


def test_ingest_json_output(tmp_path: Path) -> None:
    result = run(tmp_path / "s.duckdb", "ingest", "--json", write_csv(tmp_path / "a.csv", GOOD))
    assert result.exit_code == 0
    assert result.stderr == ""
    [entry] = json.loads(result.stdout)
    assert {k: entry[k] for k in ("source", "fmt", "rows_in_file", "rows_added")} == {
        "source": "a.csv",
        "fmt": "csv",
        "rows_in_file": 3,
        "rows_added": 3,
    }


def test_ingest_of_a_large_file_prints_rows_done_lines_off_a_terminal(tmp_path: Path) -> None:
    rows = [[f"x{i}", f"d{i // 3}", "invoice", "total", "1", "0.9", "2026-01-05T10:00:00Z"]
            for i in range(25_000)]
    path = write_csv(tmp_path / "big.csv", rows)
    result = run(tmp_path / "s.duckdb", "ingest", path)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"\[[\d.]+ s\] reading big\.csv", lines[0])
    done = [int(m[1].replace(",", "")) for m in (
        re.fullmatch(r"\[([\d,]+)/25,000 rows, [\d.]+ s\] validating big\.csv", x)
        for x in lines) if m]
    # One line per tenth of the rows checked: the check runs one query per rule.
    assert len(done) >= 5 and done == sorted(done) and done[0] == 0
    assert any(re.fullmatch(r"\[0/25,000 rows, [\d.]+ s\] storing big\.csv", x) for x in lines)
    assert result.stdout == "big.csv: 25,000 rows read, 25,000 added, 0 already stored\n"
    quiet = run(tmp_path / "t.duckdb", "ingest", "--json", path)
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert json.loads(quiet.stdout)[0]["rows_added"] == 25_000


def test_ingesting_again_adds_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    path = write_csv(tmp_path / "a.csv", GOOD)
    assert run(db, "ingest", path).exit_code == 0
    again = run(db, "ingest", path)
    assert again.exit_code == 0
    assert again.stdout == "a.csv: 3 rows read, 0 added, 3 already stored\n"
    assert counts(db) == (3, 1, 0)


#: (id, change to row 2: column -> value, expected message on stderr)
RULES: list[tuple[str, dict[str, str], str]] = [
    ("missing value", {"doc_id": ""}, "row 2, column doc_id: missing (a value is required)"),
    ("not a number", {"confidence": "high"}, "row 2, column confidence: 'high' is not a number"),
    ("above one", {"confidence": "1.2"}, "row 2, column confidence: 1.2 is outside [0, 1]"),
    ("below zero", {"confidence": "-0.1"}, "row 2, column confidence: -0.1 is outside [0, 1]"),
    ("nan", {"confidence": "NaN"}, "row 2, column confidence: NaN is not a number in [0, 1]"),
    (
        "timestamp",
        {"extracted_at": "yesterday"},
        "row 2, column extracted_at: 'yesterday' is not an ISO 8601 timestamp",
    ),
    (
        "duplicate id",
        {"extraction_id": "x1"},
        "row 2, column extraction_id: 'x1' repeats row 1 (ids must be unique within a file)",
    ),
    (
        "status",
        {"value_status": "gone"},
        "row 2, column value_status: 'gone' is not one of present, null, unclear, other",
    ),
    (
        "null with a value",
        {"value_status": "null", "value": "9"},
        "row 2, column value_status: 'null' but the value is '9'",
    ),
    (
        "present without a value",
        {"value_status": "present", "value": ""},
        "row 2, column value: missing, but value_status is 'present'",
    ),
    ("conflict", {"conflict": "perhaps"}, "row 2, column conflict: 'perhaps' is not a boolean"),
    ("unknown column", {"confidance": "0.5"}, "unknown column confidance (known columns:"),
]


@pytest.mark.parametrize(("change", "message"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_a_bad_file_exits_2_with_the_rule_message(
    tmp_path: Path, change: dict[str, str], message: str
) -> None:
    db = tmp_path / "s.duckdb"
    header = HEADER + [c for c in change if c not in HEADER]
    rows = [[*r, *([""] * (len(header) - len(HEADER)))] for r in GOOD]
    for column, value in change.items():
        rows[1][header.index(column)] = value
    bad = write_csv(tmp_path / "bad.csv", rows, header)
    good = write_csv(tmp_path / "good.csv", GOOD[:1])
    result = run(db, "ingest", "--quiet", good, bad)
    assert result.exit_code == 2
    assert result.stderr.startswith("error: bad.csv: rejected, 1 problem; nothing was written\n")
    assert message in result.stderr
    assert result.stdout == ""
    assert counts(db) == (0, 0, 0)


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.csv", "", "no rows: the file is empty"),
        ("header.csv", ",".join(HEADER) + "\n", "no rows: the file holds no data rows"),
        ("notes.txt", "hello\n", "unknown file type '.txt'"),
    ],
)
def test_unusable_files_exit_2(tmp_path: Path, name: str, content: str, message: str) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    result = run(tmp_path / "s.duckdb", "ingest", "--quiet", path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {name}: rejected")
    assert message in result.stderr


def test_a_missing_file_is_a_usage_error(tmp_path: Path) -> None:
    result = run(tmp_path / "s.duckdb", "ingest", tmp_path / "nope.csv")
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_many_problems_show_twenty_and_a_count(tmp_path: Path) -> None:
    rows = [[f"x{i}", "d", "invoice", "total", "1", "2", "2026-01-05"] for i in range(25)]
    result = run(tmp_path / "s.duckdb", "ingest", write_csv(tmp_path / "bad.csv", rows))
    assert result.exit_code == 2
    lines = result.stderr.splitlines()[2:]  # after "[1/3] reading", "[2/3] validating"
    assert lines[0] == "error: bad.csv: rejected, 25 problems; nothing was written"
    assert lines[1] == "  row 1, column confidence: 2 is outside [0, 1]"
    assert lines[20] == "  row 20, column confidence: 2 is outside [0, 1]"
    assert lines[21:] == ["  ... and 5 more"]


# --- labels import ------------------------------------------------------------------


def with_qa_lead(db: Path) -> None:
    """Users of the store: root (admin), carol (qa_lead, who may import labels) and the
    reviewers alice and bob.
    """
    assert run(db, "users", "grant", "root", "admin", "--as", "root").exit_code == 0
    assert run(db, "users", "grant", "carol", "qa_lead", "--as", "root").exit_code == 0
    for reviewer in ("alice", "bob"):
        assert run(db, "users", "grant", reviewer, "reviewer", "--as", "root").exit_code == 0


def test_labels_import_happy_path_and_again(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    assert run(db, "ingest", write_csv(tmp_path / "a.csv", GOOD)).exit_code == 0
    with_qa_lead(db)
    labels = write_csv(
        tmp_path / "labels.csv",
        [["x1", "correct", "", "", ""], ["x2", "incorrect", "bob", "null", "missing_value"],
         ["x3", "", "", "", ""]],
        ["extraction_id", "verdict", "reviewer", "corrected_status", "error_type"],
    )
    result = run(db, "labels", "import", labels, "--reviewer", "alice", "--as", "carol")
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "labels.csv: 3 rows read; added 2 new labels and 0 replacing their reviewer's earlier"
        " label; 0 already stored, 1 without a verdict\n"
    )
    assert file_rows(db, "SELECT extraction_id, reviewer FROM labels ORDER BY 1") == [
        ("x1", "alice"),
        ("x2", "bob"),
    ]
    again = run(db, "labels", "import", labels, "--as", "carol")
    assert again.exit_code == 0
    assert "added 0 new labels" in again.stdout
    assert counts(db) == (3, 1, 2)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (["zz", "correct"], "row 1, column extraction_id: 'zz' is not in the store"),
        (
            ["x1", "right"],
            "row 1, column verdict: 'right' is not one of correct, incorrect, unclear",
        ),
        (
            ["x1", "incorrect", "typo"],
            "row 1, column error_type: 'typo' is not in the taxonomy; pick one of",
        ),
    ],
)
def test_labels_import_rejects_bad_rows_with_exit_2(
    tmp_path: Path, row: list[str], message: str
) -> None:
    db = tmp_path / "s.duckdb"
    assert run(db, "ingest", write_csv(tmp_path / "a.csv", GOOD)).exit_code == 0
    with_qa_lead(db)
    header = ["extraction_id", "verdict", "error_type", "corrected_status"][: len(row)]
    if len(row) == 3:
        row, header = [*row, "null"], [*header, "corrected_status"]
    path = write_csv(tmp_path / "l.csv", [row], header)
    result = run(db, "labels", "import", path, "--reviewer", "alice", "--as", "carol")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: l.csv: rejected, 1 problem; nothing was written")
    assert message in result.stderr
    assert counts(db) == (3, 1, 0)


@pytest.mark.parametrize(("actor", "message"), [
    (None, "importing labels needs to know who you are: give --as NAME"),
    ("root", None),  # an admin may import
    ("dan", "dan (no role) may not import a file of labels"),
])
def test_labels_import_needs_a_qa_lead_or_admin(
    tmp_path: Path, actor: str | None, message: str | None
) -> None:
    db = tmp_path / "s.duckdb"
    assert run(db, "ingest", write_csv(tmp_path / "a.csv", GOOD)).exit_code == 0
    with_qa_lead(db)
    path = write_csv(tmp_path / "l.csv", [["x1", "correct"]], ["extraction_id", "verdict"])
    result = run(db, "labels", "import", path, "--reviewer", "alice",
                 *(["--as", actor] if actor else []))
    if message is None:
        assert result.exit_code == 0, result.output
        assert counts(db) == (3, 1, 1)
        return
    assert result.exit_code == 2
    assert message in result.stderr
    assert counts(db) == (3, 1, 0)


# --- help ---------------------------------------------------------------------------


@pytest.mark.parametrize("command", [["ingest"], ["labels"], ["labels", "import"]])
def test_help_ends_with_an_example(command: list[str]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0
    last = result.stdout.strip().splitlines()[-1].strip()
    assert last.startswith("Example: fieldtrust ")


def test_labels_group_is_exposed_for_other_commands() -> None:
    assert isinstance(labels_group, click.Group)
    assert cli.get_command(click.Context(cli), "labels") is labels_group
    assert "import" in labels_group.commands


@pytest.mark.parametrize("args", [
    ["--db", "{db}", "info", "--json"],
    ["info", "--json", "--db", "{db}"],
    ["info", "--db={db}", "--json"],
])
def test_db_is_accepted_before_or_after_the_command(tmp_path: Path, args: list[str]) -> None:
    db = tmp_path / "s.duckdb"
    assert run(db, "ingest", write_csv(tmp_path / "a.csv", GOOD)).exit_code == 0
    result = CliRunner().invoke(cli, [a.replace("{db}", str(db)) for a in args])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["extractions"] == 3


def test_config_is_accepted_after_the_command(tmp_path: Path) -> None:
    config = tmp_path / "team.toml"
    config.write_text('user = "ann"\ntarget = 0.9\n')
    result = CliRunner().invoke(cli, ["settings", "--config", str(config)])
    assert result.exit_code == 0, result.output
    assert "user = ann" in " ".join(result.output.split())
    assert "target = 0.9 " in " ".join(result.output.split())


def test_options_after_a_double_dash_stay_with_the_command() -> None:
    from fieldtrust.cli.main import hoist_global_options

    assert hoist_global_options(["serve", "--db", "a", "--", "--db", "b"]) == [
        "--db", "a", "serve", "--", "--db", "b"]
