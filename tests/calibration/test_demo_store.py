"""On the default demo store, the report tells the story the demo plants."""

from __future__ import annotations

import pytest
from fieldtrust.calibration.report import calibration_report

from fieldtrust import store
from tests.demo_template import default_demo_copy


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    # The default demo: what `fieldtrust serve --demo` shows.
    path = default_demo_copy(tmp_path_factory, tmp_path_factory.mktemp("demo") / "demo.duckdb")
    con = store.connect(path, read_only=True)
    try:
        yield calibration_report(con, store.Scope(weeks=store.last_weeks(con, 8)))
    finally:
        con.close()


def test_handwritten_receipt_tax_is_below_target_and_not_a_candidate(report) -> None:  # type: ignore[no-untyped-def]
    tax = report.stratum("handwritten_receipt", "tax")
    assert tax.table.accuracy_high < 0.95
    assert tax.assessment.candidate is False
    assert tax.assessment.reason is not None


def test_some_strata_are_candidates(report) -> None:  # type: ignore[no-untyped-def]
    candidates = [(s.doc_type, s.field) for s in report.strata if s.assessment.candidate]
    assert ("invoice", "currency") in candidates


def test_the_overall_figure_comes_with_the_strata_below_target(report) -> None:  # type: ignore[no-untyped-def]
    summary = report.to_dict()["overall"]
    assert 0.95 < summary["accuracy"] < 0.98
    below = {(s["doc_type"], s["field"]) for s in summary["strata_below_target"]}
    assert ("handwritten_receipt", "tax") in below
