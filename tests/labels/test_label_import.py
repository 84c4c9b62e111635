"""Labels import: happy path, every rule, idempotence, sample files read back."""

from __future__ import annotations

import csv
import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from fieldtrust.labels.label_import import LabelImportResult, import_labels
from fieldtrust.store.access import bootstrap_admin, grant_role
from fieldtrust.store.labelled import labelled_items
from fieldtrust.store.verify import verify_history

from fieldtrust.errors import ValidationError
from tests.conftest import Builder, named_cases, table_fingerprint

AT = dt.datetime(2026, 1, 5, 9)
QA_LEAD = "quinn"
REVIEWERS = ("rita", "alice", "bob", "carol", "dave")


@pytest.fixture
def stored(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """A store with extractions e1..e4, one audit sample holding e1 and e2, and users:
    root (admin), quinn (qa_lead, who imports) and the reviewers rita, alice, bob,
    carol and dave.
    """
    bootstrap_admin(con, "root")
    grant_role(con, "root", QA_LEAD, "qa_lead")
    for reviewer in REVIEWERS:
        grant_role(con, "root", reviewer, "reviewer")
    Builder(con).extractions([
        {"extraction_id": f"e{i}", "doc_id": f"d{i}", "value": "1", "extracted_at": AT}
        for i in range(1, 5)
    ])
    con.execute(
        "INSERT INTO audit_samples VALUES ('2026-W02/v1', '2026-W02', 1, 7, '{}', 'sha', ?, 'qa')",
        [AT],
    )
    con.executemany(
        "INSERT INTO audit_items VALUES ('2026-W02/v1', ?, 'invoice|total|[0.90,0.95)|established',"
        " 0.5, 0.1, false)",
        [["e1"], ["e2"]],
    )
    con.execute(
        "INSERT INTO audit_cells VALUES ('2026-W02/v1', 'invoice|total|[0.90,0.95)|established',"
        " 'invoice', 'total', '[0.90,0.95)', 'established', 4, 2, 0.5)"
    )
    return con


def run_import(con: duckdb.DuckDBPyConnection, path: Path, **options: Any) -> LabelImportResult:
    """``import_labels`` as the store's qa_lead; rows naming no reviewer are carol's."""
    return import_labels(con, path, actor=QA_LEAD, **{"reviewer_default": "carol", **options})


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else row[c] for c in columns])
    return path


LABELS = [
    {"extraction_id": "e1", "verdict": "correct", "reviewer": "alice",
     "labeled_at": "2026-01-06T10:00:00+01:00"},
    {"extraction_id": "e3", "verdict": "incorrect", "reviewer": "bob",
     "corrected_value": "2", "corrected_status": "present", "error_type": "misread_characters",
     "error_detail": "1 read as 2", "labeled_at": "2026-01-06T10:00:00Z"},
    {"extraction_id": "e4", "verdict": "unclear", "reviewer": "",
     "labeled_at": "2026-01-06 11:00:00"},
]  # fmt: skip

LABEL_SQL = (
    "SELECT extraction_id, sample_id, verdict, corrected_value, corrected_status, error_type,"
    " error_detail, reviewer, review_round, labeled_at, supersedes FROM labels"
    " ORDER BY extraction_id"
)


def test_labels_are_imported_as_written(stored: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = write_csv(tmp_path / "labels.csv", LABELS)
    result = run_import(stored, path, reviewer_default="carol")
    assert result == LabelImportResult(result.batch_id, "labels.csv", 3, 3, 0, 0)
    assert stored.execute(LABEL_SQL).fetchall() == [
        ("e1", None, "correct", None, None, None, None, "alice", "import",
         dt.datetime(2026, 1, 6, 9), None),
        ("e3", None, "incorrect", "2", "present", "misread_characters", "1 read as 2", "bob",
         "import",
         dt.datetime(2026, 1, 6, 10), None),
        ("e4", None, "unclear", None, None, None, None, "carol", "import",
         dt.datetime(2026, 1, 6, 11), None),
    ]  # fmt: skip
    batch = stored.execute(
        "SELECT batch_id, source, source_sha256, rows_in_file, rows_added FROM label_imports"
    ).fetchall()
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    assert batch == [(result.batch_id, "labels.csv", sha, 3, 3)]
    assert stored.execute("SELECT DISTINCT import_batch_id FROM labels").fetchall() == [
        (result.batch_id,)
    ]


def test_label_id_is_the_hash_of_the_label(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    run_import(stored, write_csv(tmp_path / "l.csv", LABELS[:1]))
    expected = hashlib.sha256(b"e1|correct|alice|2026-01-06 09:00:00.000000").hexdigest()
    assert stored.execute("SELECT label_id FROM labels").fetchall() == [(expected,)]


def test_json_lines_are_read_too(stored: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in LABELS), encoding="utf-8")
    assert run_import(stored, path, reviewer_default="carol").rows_added == 3
    assert len(stored.execute(LABEL_SQL).fetchall()) == 3


def test_imported_labels_count_as_a_simple_random_sample(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [
        {"extraction_id": "e3", "verdict": "correct", "labeled_at": "2026-01-06"},
        {"extraction_id": "e4", "verdict": "incorrect", "labeled_at": "2026-01-06",
         "corrected_value": "5", "error_type": "misread_characters"},
    ]
    run_import(stored, write_csv(tmp_path / "l.csv", rows), random_sample=True)
    items = labelled_items(stored).to_pylist()
    # Declared random: two labels of a stratum-week of four extractions, pi = 2 / 4.
    assert [(i["extraction_id"], i["correct"], i["inclusion_prob"], i["provenance"])
            for i in items] == [("e3", 1, 0.5, "random_import"), ("e4", 0, 0.5, "random_import")]
    assert verify_history(stored).intact  # the declaration is chained


def test_undeclared_imports_are_non_random(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [{"extraction_id": "e3", "verdict": "correct", "labeled_at": "2026-01-06"}]
    run_import(stored, write_csv(tmp_path / "l.csv", rows))
    [item] = labelled_items(stored).to_pylist()
    assert (item["provenance"], item["design_based"], item["weight"]) == (
        "non_random", False, None)


def test_sample_file_is_read_back_with_its_sample_id(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    # The layout `fieldtrust sample --out` writes: item columns, then label columns.
    rows = [
        {"extraction_id": "e1", "doc_id": "d1", "doc_type": "invoice", "form_version": "v1",
         "field": "total", "value": "1", "confidence": "0.9", "cell": "c", "inclusion_prob": "0.5",
         "sample_id": "2026-W02/v1", "verdict": "incorrect", "reviewer": "alice",
         "corrected_value": "7", "error_type": "misread_characters",
         "labeled_at": "2026-01-07T08:00:00Z"},
        {"extraction_id": "e2", "doc_id": "d2", "doc_type": "invoice", "form_version": "v1",
         "field": "total", "value": "1", "confidence": "0.9", "cell": "c", "inclusion_prob": "0.5",
         "sample_id": "2026-W02/v1", "verdict": "", "reviewer": "", "corrected_value": "",
         "error_type": "", "labeled_at": ""},
    ]  # fmt: skip
    result = run_import(stored, write_csv(tmp_path / "w02.csv", rows))
    assert (result.rows_in_file, result.rows_added, result.rows_without_verdict) == (2, 1, 1)
    assert stored.execute(
        "SELECT extraction_id, sample_id, verdict, corrected_value, reviewer FROM labels"
    ).fetchall() == [("e1", "2026-W02/v1", "incorrect", "7", "alice")]
    [item] = labelled_items(stored).to_pylist()
    # e1 comes first in PRN order and e2 is not labelled: the prefix is 1 of N_h = 4.
    assert (item["from_audit"], item["inclusion_prob"]) == (True, 0.25)


def test_a_file_written_by_sample_export_reads_back(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    from fieldtrust.sampling.items_csv import ITEM_COLUMNS, write_items_csv

    items = pa.table(
        {c: ["e1", "e2"] if c == "extraction_id" else ["=1+1", "x"] for c in ITEM_COLUMNS}
        | {"sample_id": ["2026-W02/v1", "2026-W02/v1"], "confidence": [0.9, 0.5]}
    )
    path = tmp_path / "w02.csv"
    write_items_csv(items, path)
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[0].update(verdict="Correct", reviewer="alice", labeled_at="2026-01-08T12:00:00Z")
    write_csv(path, rows)  # the reviewer filled in one row; the other stays blank
    result = run_import(stored, path)
    assert (result.rows_added, result.rows_without_verdict) == (1, 1)
    assert stored.execute("SELECT extraction_id, sample_id, verdict FROM labels").fetchall() == [
        ("e1", "2026-W02/v1", "correct")
    ]


def test_formula_escaped_ids_in_a_csv_read_back_as_themselves(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    stored.execute(
        "INSERT INTO extractions (extraction_id, doc_id, doc_type, form_version, field,"
        " value_status, confidence, extracted_at, batch_id)"
        " VALUES ('=HYPERLINK(\"x\")', 'd9', 'invoice', 'v1', 'total', 'null', 0.5, ?, 'b')",
        [AT],
    )
    row = {"extraction_id": '\'=HYPERLINK("x")', "verdict": "correct"}
    assert run_import(stored, write_csv(tmp_path / "l.csv", [row])).rows_added == 1
    assert stored.execute("SELECT extraction_id FROM labels").fetchall() == [('=HYPERLINK("x")',)]
    # Only CSV exports escape so; in JSON Lines the quote is part of the id.
    path = tmp_path / "l.jsonl"
    path.write_text(json.dumps({**row, "reviewer": "bob"}) + "\n", encoding="utf-8")
    with pytest.raises(ValidationError, match=r"row 1, column extraction_id: ''=HYPERLINK"):
        run_import(stored, path)


def test_missing_labeled_at_is_the_import_time(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    run_import(
        stored, write_csv(tmp_path / "l.csv", [{"extraction_id": "e1", "verdict": "correct"}]),
        reviewer_default="rita",
    )
    after = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    row = stored.execute("SELECT reviewer, labeled_at FROM labels").fetchone()
    assert row is not None
    assert row[0] == "rita"
    assert before <= row[1] <= after


# --- rules --------------------------------------------------------------------------

RULE_CASES: list[tuple[str, dict[str, Any], str]] = [
    (
        "unknown id",
        {"extraction_id": "nope"},
        r"row 2, column extraction_id: 'nope' is not in the store; ingest its extraction first",
    ),
    ("blank id", {"extraction_id": ""}, r"row 2, column extraction_id: missing"),
    (
        "bad verdict",
        {"verdict": "wrong"},
        r"row 2, column verdict: 'wrong' is not one of correct, incorrect, unclear",
    ),
    (
        "bad corrected status",
        {"corrected_status": "gone"},
        r"row 2, column corrected_status: 'gone' is not one of present, null, unclear, other",
    ),
    (
        "bad labeled_at",
        {"labeled_at": "last tuesday"},
        r"row 2, column labeled_at: 'last tuesday' is not an ISO 8601 timestamp",
    ),
    (
        "unknown sample",
        {"sample_id": "2026-W09/v1"},
        r"row 2, column sample_id: '2026-W09/v1' is not an audit sample in this store",
    ),
    (
        "not in the sample",
        {"sample_id": "2026-W02/v1"},  # row 2 labels e3, which the sample does not hold
        r"row 2, column sample_id: extraction 'e3' is not an item of sample '2026-W02/v1'",
    ),
    (
        "conflicting repeat",
        {
            "extraction_id": "e1",
            "reviewer": "alice",
            "verdict": "incorrect",
            "labeled_at": "2026-01-06T09:00:00Z",
        },
        r"row 2, column extraction_id: 'e1' is labelled differently on row 1 by the same"
        r" reviewer at the same labeled_at",
    ),
    ("renamed column", {"verdikt": "correct"}, r"unknown column verdikt \(known columns:"),
]


@named_cases(("changes", "pattern"), RULE_CASES)
def test_every_rule_rejects_the_file_with_its_message(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path, changes: dict[str, Any], pattern: str
) -> None:
    rows = [dict(r) for r in LABELS]
    rows[1].update(changes)
    before = table_fingerprint(stored)
    with pytest.raises(ValidationError, match=pattern) as caught:
        run_import(stored, write_csv(tmp_path / "bad.csv", rows))
    assert caught.value.total == 1
    assert table_fingerprint(stored) == before


def test_missing_verdict_column_is_named(stored: duckdb.DuckDBPyConnection, tmp_path: Path) -> None:
    with pytest.raises(
        ValidationError, match=r"missing required column verdict \(columns found: extraction_id\)"
    ):
        run_import(stored, write_csv(tmp_path / "l.csv", [{"extraction_id": "e1"}]))


def test_all_problems_are_reported_together(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [
        {"extraction_id": f"u{i}", "verdict": "maybe" if i % 2 else "correct"} for i in range(30)
    ]
    with pytest.raises(ValidationError) as caught:
        run_import(stored, write_csv(tmp_path / "l.csv", rows))
    assert caught.value.total == 45  # 30 unknown ids, 15 bad verdicts
    assert caught.value.problems[:3] == [
        "row 1, column extraction_id: 'u0' is not in the store; ingest its extraction first,"
        " or check the store",
        "row 2, column verdict: 'maybe' is not one of correct, incorrect, unclear",
        "row 2, column extraction_id: 'u1' is not in the store; ingest its extraction first,"
        " or check the store",
    ]


# --- idempotence --------------------------------------------------------------------


def test_the_same_file_twice_adds_nothing(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = write_csv(tmp_path / "l.csv", LABELS)
    first = run_import(stored, path)
    before = table_fingerprint(stored)
    again = run_import(stored, path)
    assert again == LabelImportResult(first.batch_id, "l.csv", 3, 0, 0, 0)
    assert table_fingerprint(stored) == before


def test_stored_labels_in_another_file_are_not_added_again(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    run_import(stored, write_csv(tmp_path / "a.csv", LABELS[:2]))
    # Same labels in another file (other column order, equal instant), plus one new.
    rows = [
        {"labeled_at": "2026-01-06T09:00:00Z", "reviewer": "alice", "verdict": "correct",
         "extraction_id": "e1"},
        {**LABELS[1], "error_detail": "edited later"},  # same identity: not added
        {**LABELS[2], "reviewer": "dave"},
    ]  # fmt: skip
    result = run_import(stored, write_csv(tmp_path / "b.csv", rows))
    assert (result.rows_added, result.rows_already_stored) == (1, 2)
    assert stored.execute("SELECT count(*) FROM labels").fetchone() == (3,)


def test_a_label_stored_by_review_is_not_imported_twice(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    stored.execute(
        "INSERT INTO labels (label_id, extraction_id, verdict, reviewer, review_round, labeled_at)"
        " VALUES ('r1', 'e1', 'correct', 'alice', 'primary', TIMESTAMP '2026-01-06 09:00:00')"
    )
    result = run_import(stored, write_csv(tmp_path / "a.csv", LABELS[:1]))
    assert (result.rows_added, result.rows_already_stored) == (0, 1)


def test_identical_rows_in_one_file_are_added_once(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    result = run_import(stored, write_csv(tmp_path / "a.csv", [LABELS[0], LABELS[0]]))
    assert (result.rows_in_file, result.rows_added, result.rows_already_stored) == (2, 1, 1)


# --- the rules of recording a verdict, and who may import ---------------------------------

VERDICT_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    (
        "error type not in the taxonomy",
        {"error_type": "typo"},
        ["row 2, column error_type: 'typo' is not in the taxonomy; pick one of misread_characters"],
    ),
    (
        "other without a detail",
        {"error_type": "other", "error_detail": "  "},
        ["row 2, column error_detail: error type 'Other' needs a detail (error_detail)"],
    ),
    (
        "a value with status null",
        {"corrected_status": "null"},
        ["row 2, column corrected_value: 'Absent' (corrected_status null) means there is no"
         " value, but the corrected value is '2'"],
    ),
    (
        "correct with an error type",
        {"verdict": "correct", "corrected_value": "", "corrected_status": "",
         "error_detail": ""},
        ["row 2, column error_type: 'Correct' takes no error type (error_type)"],
    ),
    (
        "a bad error type, even without a correction",
        {"corrected_value": "", "corrected_status": "", "error_type": "typo"},
        ["row 2, column error_type: 'typo' is not in the taxonomy"],
    ),
    (
        "reviewer with a line break",
        {"reviewer": "bob\nsmith"},
        ["row 2, column reviewer: 'bob\\nsmith' is not a usable name: at most 100 characters,"
         " one line"],
    ),
    (
        "reviewer with a control character",
        {"reviewer": "bob\x07"},
        ["row 2, column reviewer: 'bob\\x07' is not a usable name"],
    ),
    (
        "reviewer of 101 characters",
        {"reviewer": "b" * 101},
        ["row 2, column reviewer: '" + "b" * 40 + "' is not a usable name"],
    ),
]  # fmt: skip


@named_cases(("changes", "expected"), VERDICT_CASES)
def test_rows_are_held_to_the_rules_of_recording_a_verdict(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path, changes: dict[str, Any],
    expected: list[str]
) -> None:
    rows = [dict(r) for r in LABELS]
    rows[1].update(changes)
    before = table_fingerprint(stored)
    with pytest.raises(ValidationError) as caught:
        run_import(stored, write_csv(tmp_path / "bad.csv", rows))
    assert str(caught.value).startswith("bad.csv: rejected, ")
    assert caught.value.total == len(expected)
    for problem, fragment in zip(caught.value.problems, expected, strict=True):
        assert problem.startswith(fragment), (problem, fragment)
    assert table_fingerprint(stored) == before


def test_record_verdict_refuses_what_import_refuses(con: duckdb.DuckDBPyConnection) -> None:
    """One rule set: the messages of the import are those of labels.verdicts."""
    from fieldtrust.labels.verdicts import verdict_fields

    from fieldtrust.errors import FieldError

    with pytest.raises(FieldError, match="error_type 'typo' is not in the taxonomy") as err:
        verdict_fields("incorrect", "2", None, "typo", None)
    assert err.value.column == "error_type"


def test_a_huge_bad_value_is_cut_short_in_the_message(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [dict(r) for r in LABELS]
    rows[1]["error_type"] = "x" * 1_000_000
    with pytest.raises(ValidationError) as caught:
        run_import(stored, write_csv(tmp_path / "bad.csv", rows))
    assert len(str(caught.value)) < 1_000
    assert caught.value.problems[0].startswith("row 2, column error_type: 'xxxx")


def test_fields_are_stored_as_record_verdict_cleans_them(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [{"extraction_id": "e3", "verdict": "incorrect", "corrected_value": " 2 ",
             "error_type": "other", "error_detail": "  stamp over the digits  ",
             "reviewer": "bob"},
            {"extraction_id": "e4", "verdict": "unclear", "error_detail": " smudged "}]
    run_import(stored, write_csv(tmp_path / "l.csv", rows))
    assert stored.execute(
        "SELECT extraction_id, corrected_value, corrected_status, error_type, error_detail"
        " FROM labels ORDER BY extraction_id"
    ).fetchall() == [
        ("e3", " 2 ", "present", "other", "stamp over the digits"),
        ("e4", None, None, None, "smudged"),
    ]


@pytest.mark.parametrize(
    ("actor", "allowed"),
    [("quinn", True), ("root", True), ("rita", False), ("nobody", False), ("Quinn", False)],
)
def test_only_a_qa_lead_or_admin_may_import(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path, actor: str, allowed: bool
) -> None:
    from fieldtrust.errors import PermissionDenied

    path = write_csv(tmp_path / "l.csv", LABELS)
    if allowed:
        result = import_labels(stored, path, actor=actor, reviewer_default="carol")
        assert result.rows_added == 3
        assert stored.execute("SELECT imported_by FROM label_imports").fetchall() == [(actor,)]
        return
    before = table_fingerprint(stored)
    with pytest.raises(PermissionDenied, match=rf"{actor} \(.*\) may not import a file of labels:"
                       r" that needs the role qa_lead or admin"):
        import_labels(stored, path, actor=actor)
    assert table_fingerprint(stored) == before


@pytest.mark.parametrize(("option", "value"), [("actor", "quinn\n"), ("actor", ""),
                                               ("reviewer_default", "a\tb")])
def test_a_bad_acting_user_or_default_reviewer_is_refused(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path, option: str, value: str
) -> None:
    from fieldtrust.errors import InputError

    options = {"actor": QA_LEAD, option: value}
    before = table_fingerprint(stored)
    with pytest.raises(InputError, match=r"is not a usable name|is empty"):
        import_labels(stored, write_csv(tmp_path / "l.csv", LABELS), **options)
    assert table_fingerprint(stored) == before


def test_a_verdict_only_qa_sheet_imports_with_not_recorded_details(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """A team's history of extraction id and correct/incorrect, nothing more."""
    path = write_csv(tmp_path / "history.csv", [
        {"extraction_id": "e1", "verdict": "correct"},
        {"extraction_id": "e2", "verdict": "incorrect"},
        {"extraction_id": "e3", "verdict": "incorrect", "corrected_value": "7"},
        {"extraction_id": "e4", "verdict": "incorrect", "error_type": "wrong_field"},
    ])
    result = run_import(stored, path)
    assert (result.rows_added, result.rows_without_details) == (4, 3)
    rows = stored.execute(
        "SELECT extraction_id, verdict, corrected_value, corrected_status, error_type"
        " FROM labels ORDER BY extraction_id"
    ).fetchall()
    assert rows == [
        ("e1", "correct", None, None, None),
        ("e2", "incorrect", None, None, "not_recorded"),
        ("e3", "incorrect", "7", "present", "not_recorded"),
        ("e4", "incorrect", None, None, "wrong_field"),
    ]
    from fieldtrust.labels.errors_report import error_report

    kinds = {r["error_type"]: r["n_errors"] for r in error_report(stored).to_pylist()}
    assert kinds == {"not_recorded": 2, "wrong_field": 1}


def test_a_filled_sample_file_imports_as_written(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    from fieldtrust.sampling.items_csv import write_items_csv
    from fieldtrust.sampling.samples import sample_items

    out = tmp_path / "w02.csv"
    write_items_csv(sample_items(stored, "2026-W02/v1"), out)
    with out.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    rows[0].update(verdict="incorrect", reviewer="rita", corrected_status="null",
                   error_type="other", error_detail="stamp over the total",
                   labeled_at="2026-01-06T10:00:00Z")
    rows[1].update(verdict="correct", reviewer="rita")
    write_csv(out, rows)
    result = run_import(stored, out)
    assert (result.rows_added, result.rows_without_details) == (2, 0)
    stored_rows = stored.execute(
        "SELECT extraction_id, sample_id, verdict, corrected_status, error_type, error_detail"
        " FROM labels ORDER BY extraction_id"
    ).fetchall()
    first = rows[0]["extraction_id"]
    assert ("incorrect" if first == "e1" else "correct") == stored_rows[0][2]
    assert {r[0]: r[3:] for r in stored_rows}[first] == ("null", "other", "stamp over the total")
    assert {r[1] for r in stored_rows} == {"2026-W02/v1"}


# --- re-labelled items, one rule for every format ----------------------------------------


def _dashboard_label(con: duckdb.DuckDBPyConnection, reviewer: str, verdict: str) -> str:
    from fieldtrust.labels.verdicts import record_verdict

    return record_verdict(con, actor=reviewer, extraction_id="e1", verdict=verdict).label_id


def test_another_reviewers_label_refuses_the_row_naming_it_never_its_verdict(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """A CSV used to override a dashboard label silently; Label Studio refused the file."""
    label = _dashboard_label(stored, "rita", "incorrect")
    before = table_fingerprint(stored)
    row = {"extraction_id": "e1", "verdict": "correct", "reviewer": "alice"}
    with pytest.raises(ValidationError) as caught:
        run_import(stored, write_csv(tmp_path / "l.csv", [row]))
    [problem] = caught.value.problems
    assert problem.startswith(
        f"row 1, column extraction_id: 'e1' already has a primary label by rita ({label},"
        " recorded in the dashboard); another reviewer's verdict does not replace it")
    assert "incorrect" not in problem
    assert table_fingerprint(stored) == before


def test_the_same_reviewers_newer_verdict_replaces_theirs_and_is_counted(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    old = _dashboard_label(stored, "rita", "incorrect")
    rows = [{"extraction_id": "e1", "verdict": "correct", "reviewer": "rita"},
            {"extraction_id": "e3", "verdict": "correct", "reviewer": "rita"}]
    result = run_import(stored, write_csv(tmp_path / "l.csv", rows))
    assert (result.rows_added, result.rows_replaced, result.rows_already_stored) == (1, 1, 0)
    assert stored.execute(
        "SELECT verdict, review_round, supersedes, sample_id FROM labels"
        " WHERE extraction_id = 'e1' ORDER BY labeled_at"
    ).fetchall() == [("incorrect", "primary", None, "2026-W02/v1"),
                     ("correct", "primary", old, "2026-W02/v1")]  # still an audit label
    assert stored.execute(
        "SELECT verdict FROM effective_labels WHERE extraction_id = 'e1'"
    ).fetchall() == [("correct",)]
    assert stored.execute("SELECT rows_added FROM label_imports").fetchall() == [(2,)]
    assert verify_history(stored).intact


def test_a_repeat_of_the_current_verdict_is_already_stored_and_an_older_one_refused(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    _dashboard_label(stored, "rita", "correct")
    same = [{"extraction_id": "e1", "verdict": "correct", "reviewer": "rita"}]
    result = run_import(stored, write_csv(tmp_path / "same.csv", same))
    assert (result.rows_added, result.rows_replaced, result.rows_already_stored) == (0, 0, 1)
    older = [{"extraction_id": "e1", "verdict": "incorrect", "reviewer": "rita",
              "labeled_at": "2026-01-06T10:00:00Z"}]
    with pytest.raises(ValidationError, match=r"row 1, column labeled_at: 2026-01-06 10:00:00"
                       r" is older than rita's current label on 'e1'"):
        run_import(stored, write_csv(tmp_path / "older.csv", older))


def test_one_reviewers_history_in_one_file_chains_in_time_order(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [{"extraction_id": "e3", "verdict": "correct", "reviewer": "bob",
             "labeled_at": "2026-01-07T09:00:00Z"},
            {"extraction_id": "e3", "verdict": "incorrect", "reviewer": "bob",
             "labeled_at": "2026-01-06T09:00:00Z"}]
    result = run_import(stored, write_csv(tmp_path / "history.csv", rows))
    assert (result.rows_added, result.rows_replaced) == (1, 1)
    chain = stored.execute(
        "SELECT verdict, label_id, supersedes FROM labels ORDER BY labeled_at").fetchall()
    assert [c[0] for c in chain] == ["incorrect", "correct"]
    assert chain[1][2] == chain[0][1]


def test_a_dry_run_counts_what_it_would_do_and_writes_nothing(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    _dashboard_label(stored, "rita", "incorrect")
    rows = [{"extraction_id": "e1", "verdict": "correct", "reviewer": "rita"},
            {"extraction_id": "e3", "verdict": "correct", "reviewer": "bob"},
            {"extraction_id": "e4", "verdict": ""}]
    path = write_csv(tmp_path / "trial.csv", rows)
    before = table_fingerprint(stored)
    trial = run_import(stored, path, dry_run=True)
    assert table_fingerprint(stored) == before
    assert (trial.dry_run, trial.rows_added, trial.rows_replaced, trial.rows_without_verdict) \
        == (True, 1, 1, 1)
    real = run_import(stored, path)  # the dry run left no trace: the file imports for real
    assert (real.dry_run, real.rows_added, real.rows_replaced) == (False, 1, 1)


def test_every_problem_of_a_file_is_told_in_one_run(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    """A bad id (SQL), a bad error type (the verdict rule), a placeholder reviewer and
    another reviewer's item: one rejection, four problems, by row."""
    _dashboard_label(stored, "rita", "correct")
    rows = [{"extraction_id": "nope", "verdict": "correct", "reviewer": "bob"},
            {"extraction_id": "e3", "verdict": "incorrect", "error_type": "typo",
             "reviewer": "bob"},
            {"extraction_id": "e4", "verdict": "correct", "reviewer": "import"},
            {"extraction_id": "e1", "verdict": "incorrect", "reviewer": "bob"}]
    with pytest.raises(ValidationError) as caught:
        run_import(stored, write_csv(tmp_path / "l.csv", rows))
    assert caught.value.total == 4
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "row 1, column extraction_id", "row 2, column error_type", "row 3, column reviewer",
        "row 4, column extraction_id"]


# --- people, not placeholders ---------------------------------------------------------


def test_a_name_without_a_reviewer_role_is_refused_by_name_with_its_rows(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    rows = [{"extraction_id": f"e{i}", "verdict": "correct", "reviewer": "ann@example.com"}
            for i in (1, 3, 4)]
    with pytest.raises(ValidationError) as caught:
        run_import(stored, write_csv(tmp_path / "l.csv", rows))
    assert caught.value.problems == [
        "row 1, column reviewer: 'ann@example.com' is not a reviewer of this store (rows 1, 2,"
        " 3): map it to the store user who labelled (--reviewer-map ann@example.com=NAME), or"
        " grant that name the role (fieldtrust users grant ann@example.com reviewer --as"
        " ADMIN)"]
    result = run_import(stored, write_csv(tmp_path / "l.csv", rows),
                        reviewer_map={"ann@example.com": "alice"})
    assert result.rows_added == 3
    assert stored.execute("SELECT DISTINCT reviewer FROM labels").fetchall() == [("alice",)]


def test_rows_naming_nobody_need_a_default_reviewer(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = write_csv(tmp_path / "l.csv", [{"extraction_id": "e1", "verdict": "correct"}])
    with pytest.raises(ValidationError, match=r"row 1, column reviewer: blank, and no default"
                       r" reviewer was given"):
        import_labels(stored, path, actor=QA_LEAD)
    with pytest.raises(ValidationError, match=r"'import' is not a reviewer of this store"):
        import_labels(stored, path, actor=QA_LEAD, reviewer_default="import")


def test_a_reviewer_whose_role_was_taken_away_still_imports_from_history(
    stored: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    from fieldtrust.store.access import revoke_role

    revoke_role(stored, "root", "dave", "reviewer")
    row = {"extraction_id": "e3", "verdict": "correct", "reviewer": "dave"}
    assert run_import(stored, write_csv(tmp_path / "l.csv", [row])).rows_added == 1
