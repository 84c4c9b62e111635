"""One table type crosses the library's surface: every public table is a ``pyarrow.Table``.

Each public function of calibration/ and sampling/ that returns a table is
called on one small real store (the :class:`tests.conftest.Builder` sample,
labelled), and its result must be Arrow, not pandas: a pandas frame leaking
out of a report fails here. Results with a JSON form give it through
``to_dict()``, equal to their tables' rows.
"""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pyarrow as pa
import pytest
from fieldtrust.calibration.bins import reliability_bins
from fieldtrust.calibration.population import load_strata
from fieldtrust.calibration.report import calibration_report
from fieldtrust.calibration.table import calibration_table, stratum_bins
from fieldtrust.calibration.thresholds import threshold_curve, threshold_table
from fieldtrust.governance.revocation import policy_review
from fieldtrust.sampling.audit_report import audit_report
from fieldtrust.sampling.cells import count_cells, plan_cells
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.estimates import (
    audit_labels,
    estimate_labels,
    estimate_table,
    weekly_estimates,
)
from fieldtrust.sampling.planner import DesignPreview, attribute_sampling_table, preview_design
from fieldtrust.store.access import list_users, role_history
from fieldtrust.store.bar import Bar

from tests.conftest import CELLS, SAMPLE, WEEK
from tests.decided import approve_as_stated


@pytest.fixture
def labelled(review_store: duckdb.DuckDBPyConnection, builder) -> duckdb.DuckDBPyConnection:
    """The review store with a primary verdict on each of its 12 items (one wrong per cell)."""
    builder.labels([
        {"extraction_id": f"e{c}{k}", "sample_id": SAMPLE, "reviewer": "alice",
         "verdict": "incorrect" if k == 3 else "correct",
         "corrected_status": "null" if k == 3 else None}
        for c in range(len(CELLS)) for k in range(4)
    ])
    return review_store


def _arrow(table: object, *, rows: int | None = None) -> pa.Table:
    assert isinstance(table, pa.Table), type(table)
    assert not isinstance(table, pd.DataFrame)
    if rows is not None:
        assert table.num_rows == rows
    return table


def test_calibration_tables_are_arrow(labelled: duckdb.DuckDBPyConnection) -> None:
    bins = _arrow(reliability_bins([0.2, 0.9, 0.95], [0, 1, 1], n_bins=2), rows=2)
    assert bins.column("n").to_pylist() == [2, 1]
    stratum = next(s for s in load_strata(labelled) if s.field == "total")
    _arrow(stratum_bins(stratum, n_bins=3), rows=3)
    table = _arrow(calibration_table(labelled), rows=2)
    assert sorted(table.column("field").to_pylist()) == ["tax", "total"]
    assert sorted(table.column("n_labeled").to_pylist()) == [4, 8]
    curve = _arrow(threshold_table(stratum.design, stratum.labels, Bar(n_min=1)))
    assert curve.schema.field("certified").type == pa.bool_()
    _arrow(threshold_curve(labelled, "invoice", "total", bar=Bar(n_min=1)), rows=curve.num_rows)
    report = calibration_report(labelled, bar=Bar(n_min=1))
    for s in report.strata:
        _arrow(s.bins, rows=10)
    shown = report.stratum("invoice", "total").to_dict(include_bins=True)["bins"]
    assert shown == report.stratum("invoice", "total").bins.to_pylist()


def test_an_empty_store_gives_typed_empty_tables(con: duckdb.DuckDBPyConnection) -> None:
    table = _arrow(calibration_table(con), rows=0)
    assert table.schema.field("accuracy").type == pa.float64()
    trend = _arrow(weekly_estimates(con), rows=0)
    assert trend.schema.field("n").type == pa.int64()
    report = audit_report(con)
    _arrow(report.trend, rows=0)
    _arrow(report.overall, rows=0)
    assert report.to_dict() == {"weeks": [], "trend": [], "overall": [], "alerts": [],
                                "alert_note": ""}


def test_sampling_tables_are_arrow(labelled: duckdb.DuckDBPyConnection) -> None:
    design = Design(minimum=2)
    counts = _arrow(count_cells(labelled, WEEK, design))
    assert sum(counts.column("n_population").to_pylist()) == 12
    cells = _arrow(plan_cells(labelled, WEEK, design), rows=counts.num_rows)
    assert cells.column_names[: counts.num_columns] == counts.column_names
    # Two cells of the fixture are established high-confidence cells of total and tax.
    estimates = _arrow(estimate_table(labelled), rows=2)
    assert estimates.column("n").to_pylist() == [4, 8]
    assert estimates.column("estimate").to_pylist() == pytest.approx([0.75, 0.75])
    weekly = _arrow(weekly_estimates(labelled), rows=2)
    assert weekly.column("week").to_pylist() == [WEEK, WEEK]
    again = estimate_labels(labelled, audit_labels(labelled))
    assert _arrow(again).equals(estimates)
    sizes = _arrow(attribute_sampling_table((0.05,), (0,)), rows=1)
    assert sizes.to_pylist() == [{"tolerable_rate": 0.05, "0 deviations": 59}]


def test_the_preview_and_the_audit_report_hold_arrow_and_own_their_json(
    labelled: duckdb.DuckDBPyConnection,
) -> None:
    preview = preview_design(labelled, WEEK, Design(minimum=2, budget=3))
    assert isinstance(preview, DesignPreview)
    _arrow(preview.cells)
    assert preview.n_population == 12 and preview.budget == 3
    assert preview.over_budget is (preview.n_sample > 3)
    shown = json.loads(json.dumps(preview.to_dict()))
    assert shown["cells"] == preview.cells.to_pylist()
    assert list(shown)[:5] == ["week", "n_population", "n_sample", "budget", "over_budget"]

    report = audit_report(labelled, weeks=1)
    _arrow(report.trend, rows=2)
    _arrow(report.overall, rows=1)
    out = report.to_dict()
    assert out["weeks"] == [WEEK]
    # The JSON rows are the table's rows, each with why its interval says nothing (or null).
    assert [{k: v for k, v in row.items() if k != "interval_note"} for row in out["trend"]] \
        == report.trend.to_pylist()
    for row in out["trend"]:  # a handful of labels: the interval spans over half of [0, 1]
        assert row["upper"] - row["lower"] > 0.5
        assert row["interval_note"] == f"no usable interval on {row['n']} labels"
    assert out["overall"][0]["estimate"] == pytest.approx(0.75)


def test_users_and_policy_own_their_json(labelled: duckdb.DuckDBPyConnection) -> None:
    users = {u.user_name: u.to_dict() for u in list_users(labelled)}
    assert users["carol"] == {"user_name": "carol", "roles": ["qa_lead"]}
    assert users["ned"] == {"user_name": "ned", "roles": []}
    changes = [c.to_dict() for c in role_history(labelled)]
    assert {"user_name": "ned", "change": "grant", "role": "reviewer"}.items() <= \
        changes[0].items()
    approve_as_stated(labelled, "mona", "invoice", "total", 0.95)
    [row] = [r.to_dict() for r in policy_review(labelled)]
    assert row["doc_type"] == "invoice" and row["status"] == "active"
    assert row["last_action"] == "approve" and row["decided_by"] == "mona"
    assert row["revocation"] is None
