"""Error report, policy export and labels export (history, formula escaping)."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
from decided import approve_as_stated
from fieldtrust.governance.acts import revoke
from fieldtrust.governance.policy import export_policy, policy_json
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.errors_report import error_report
from fieldtrust.labels.export import export_labels
from fieldtrust.labels.verdicts import record_verdict, supersede
from fieldtrust.store.scope import Scope

import fieldtrust
from fieldtrust.errors import InputError


def test_error_report_counts_and_shares_per_form_version(
    review_store: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    builder.extractions([
        {"extraction_id": f"t{i}", "field": "tax", "form_version": "v3"} for i in range(10)
    ])
    rows = [{"extraction_id": f"t{i}", "reviewer": "alice", "verdict": "incorrect",
             "corrected_status": "null", "error_type": "total_copied_into_tax"}
            for i in range(6)]
    rows += [{"extraction_id": "t6", "reviewer": "alice", "verdict": "incorrect",
              "corrected_value": "1", "corrected_status": "present",
              "error_type": "misread_characters"},
             {"extraction_id": "t7", "reviewer": "alice", "verdict": "correct"},
             {"extraction_id": "t8", "reviewer": "alice", "verdict": "unclear"}]
    builder.labels(rows)
    # One error on form v1 of the total, later adjudicated as correct: it must not count.
    record_verdict(review_store, actor="alice", extraction_id="e00", verdict="incorrect",
                   corrected_value="2", error_type="normalisation")
    record_verdict(review_store, actor="alice", extraction_id="e01", verdict="incorrect",
                   corrected_value="2", error_type="normalisation")
    adjudicate(review_store, "carol", "e00", "correct")
    report = error_report(review_store).to_pylist()
    assert report == [
        {"doc_type": "invoice", "field": "tax", "form_version": "v3",
         "error_type": "total_copied_into_tax", "n_errors": 6, "share_of_errors": 6 / 7,
         "n_labelled": 8, "share_of_labelled": 6 / 8},
        {"doc_type": "invoice", "field": "tax", "form_version": "v3",
         "error_type": "misread_characters", "n_errors": 1, "share_of_errors": 1 / 7,
         "n_labelled": 8, "share_of_labelled": 1 / 8},
        {"doc_type": "invoice", "field": "total", "form_version": "v1",
         "error_type": "normalisation", "n_errors": 1, "share_of_errors": 1.0,
         "n_labelled": 2, "share_of_labelled": 0.5},
    ]
    assert error_report(review_store, Scope(form_versions=("v1",))).num_rows == 1


def test_policy_export_lists_the_active_approvals(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    total = approve_as_stated(review_store, "mona", "invoice", "total", 0.95, "ok")
    approve_as_stated(review_store, "mona", "invoice", "tax", 0.95, "ok")
    revoke(review_store, "mona", "invoice", "tax", "v3 copies totals")
    policy = export_policy(review_store)
    assert policy["thresholds"] == [{
        "doc_type": "invoice", "field": "total", "threshold": 0.95, "comparison": ">=",
        "form_versions": ["v1"],
        # Approved on a stated certification without a chart: every extractor.
        "extractor_versions": ["*"],
        "segments": [{"form_version": "v1", "extractor_version": "*"}],
        "target": 0.95, "confidence": 0.95, "approved_by": "mona",
        "approved_at": total.decided_at.isoformat(), "evidence_id": total.evidence_id,
        "decision_id": total.decision_id,
    }]
    assert policy["format"] == 4
    # The segment's status is apart from the thresholds verify compares: unwatched.
    assert policy["monitoring"] == [{
        "doc_type": "invoice", "field": "total", "decision_id": total.decision_id,
        "form_version": "v1", "extractor_version": "*", "status": "not monitored",
        "reason": "approved before monitoring: no chart was frozen with the approval;"
                  " re-approve to monitor it"}]
    assert set(policy["signature"]) == {"algorithm", "key_id", "value"}
    assert policy["rule"].startswith(
        "Automate an extraction of doc_type/field when its stated confidence is >= threshold"
        " and its (form version, extractor version) is one of segments, unless monitoring"
        " lists that segment as suspended; send every other extraction to a human.")
    assert policy["fieldtrust_version"] == fieldtrust.__version__
    assert policy["schema_version"] == review_store.execute(
        "SELECT max(name) FROM schema_migrations").fetchone()[0]  # type: ignore[index]
    generated = dt.datetime.fromisoformat(policy["generated_at"].rstrip("Z"))
    assert abs(generated - dt.datetime.now(dt.UTC).replace(tzinfo=None)) < dt.timedelta(minutes=5)
    assert json.loads(policy_json(policy)) == policy


def _exported_history(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[str, str]:
    """Three labels, one superseded, exported to ``path``: the old and new label ids."""
    first = record_verdict(con, actor="alice", extraction_id="e00", verdict="incorrect",
                           corrected_value="=HYPERLINK(\"http://x\")", error_type="other",
                           error_detail="@SUM(A1)")
    second = supersede(con, actor="alice", label_id=first.label_id, verdict="incorrect",
                       corrected_value="-12.50", error_type="normalisation")
    record_verdict(con, actor="bob", extraction_id="e01", verdict="correct")
    assert export_labels(con, path) == 3
    return first.label_id, second.label_id


def test_labels_export_csv_keeps_history_and_escapes_formulas(
    review_store: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = tmp_path / "labels.csv"
    first, second = _exported_history(review_store, path)
    with path.open(newline="") as handle:
        rows = {r["label_id"]: r for r in csv.DictReader(handle)}
    assert set(rows) >= {first, second}
    old, new = rows[first], rows[second]
    assert (old["superseded_by"], old["effective"]) == (second, "false")
    assert (new["supersedes"], new["effective"], new["superseded_by"]) == (first, "true", "")
    assert old["corrected_value"] == "'=HYPERLINK(\"http://x\")"
    assert old["error_detail"] == "'@SUM(A1)"
    assert new["corrected_value"] == "'-12.50"
    assert (new["doc_type"], new["field"], new["form_version"]) == ("invoice", "total", "v1")
    assert all(not v.startswith(("=", "+", "-", "@", "\t", "\r"))
               for r in rows.values() for v in r.values())


def test_labels_export_parquet_keeps_values_exact(
    review_store: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    path = tmp_path / "labels.parquet"
    first, second = _exported_history(review_store, path)
    rows = {r["label_id"]: r for r in pq.read_table(path).to_pylist()}
    assert rows[second]["corrected_value"] == "-12.50"
    assert rows[first]["superseded_by"] == second
    assert rows[first]["effective"] is False and rows[second]["effective"] is True
    assert sum(r["effective"] for r in rows.values()) == 2


def test_labels_export_needs_a_known_extension(
    review_store: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    with pytest.raises(InputError, match=r"use a \.csv or \.parquet file"):
        export_labels(review_store, tmp_path / "labels.xlsx")
