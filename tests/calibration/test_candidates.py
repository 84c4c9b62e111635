"""Every reason a stratum is not an automation candidate, from a store built for it.

Under the one-look certificate (``certificate = "fixed"``): these stores' labels are
imported simple random samples, which that certificate reads; the anytime-valid
certificate's reasons come from weekly audit samples (``test_anytime_store.py``).
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import pytest
from calib_store import ONE_LOOK, weeks_from
from calib_store import add_stratum as _add_stratum
from fieldtrust.calibration.candidates import REASONS, automation_candidates
from fieldtrust.calibration.report import calibration_report
from fieldtrust.store.scope import Scope

from fieldtrust import store

WEEKS = tuple(weeks_from("2026-W10", 4))


@pytest.fixture(scope="module")
def reasons_store(tmp_path_factory):
    """One stratum per outcome, labels imported (a simple random sample of each stratum)."""
    path = tmp_path_factory.mktemp("reasons") / "store.duckdb"
    con = store.connect(path)
    add_stratum = partial(_add_stratum, con)
    for i, week in enumerate(WEEKS):
        # Candidate: 0.5% errors, every week, one form version.
        add_stratum("invoice", "total", week, n=3000, labelled=400, errors=2, seed=i)
        # Accuracy below target everywhere: the most confident labels are the wrong ones.
        add_stratum("receipt", "tax", week, n=1000, labelled=200, errors=60, errors_on="top")
        # Too few labels: 20 a week, 80 in all, below n_min = 100.
        add_stratum("order", "number", week, n=1000, labelled=20, errors=0)
        # Unstable: perfect for three weeks, then 150 errors in 2,000 labels: 2.5%
        # over the window certifies, 7.5% in the last week is significantly worse.
        bad = i == len(WEEKS) - 1
        add_stratum("invoice", "date", week, n=3000, labelled=2000,
                    errors=150 if bad else 0, seed=40 + i)
        # New form version: v1 well labelled, v2 appears last week with 10 labels.
        add_stratum("invoice", "vendor", week, n=3000, labelled=400, errors=1, seed=20 + i)
    add_stratum("invoice", "vendor", WEEKS[-1], n=500, labelled=10, errors=0,
                form_version="v2", low=0.97)
    # No coverage: extractions only before the weeks looked at.
    add_stratum("invoice", "currency", "2026-W05", n=500, labelled=100, errors=0)
    con.close()
    reader = store.connect(path, read_only=True)
    yield reader
    reader.close()


EXPECTED = {
    ("invoice", "total"): None,
    ("receipt", "tax"): "accuracy_below_target",
    ("order", "number"): "too_few_labels",
    ("invoice", "date"): "unstable_week",
    ("invoice", "vendor"): None,  # a candidate for v1 only: v2 has no evidence of its own
    ("invoice", "currency"): "no_coverage",
}


def test_each_reason_comes_from_its_store(reasons_store) -> None:
    assessments = automation_candidates(reasons_store, Scope(weeks=WEEKS), ONE_LOOK)
    got = {(a.doc_type, a.field): a.reason for a in assessments}
    assert got == EXPECTED
    vendor = next(a for a in assessments if a.field == "vendor")
    assert vendor.covered_versions == ("v1",)
    assert not next(v for v in vendor.form_versions if v.form_version == "v2").covered
    assert vendor.evidence["form_versions"] == ["v1"]
    assert [a.candidate for a in assessments][:1] == [True]  # candidates first
    for a in assessments:
        assert a.reason is None or a.reason_text.startswith(REASONS[a.reason])
        assert a.candidate == (a.reason is None)


def test_candidate_evidence_is_what_an_approval_freezes(reasons_store) -> None:
    by_name = {(a.doc_type, a.field): a for a in automation_candidates(
        reasons_store, Scope(weeks=WEEKS), ONE_LOOK)}
    evidence = by_name[("invoice", "total")].evidence
    assert evidence["threshold"] == by_name[("invoice", "total")].threshold
    assert evidence["labels_above"] >= 100
    assert evidence["accuracy_low"] >= 0.95
    assert evidence["accuracy"] >= evidence["accuracy_low"]
    assert evidence["weeks"] == list(WEEKS)
    assert [w["week"] for w in evidence["weeks_checked"]] == list(WEEKS)
    assert all(not w["below_target"] for w in evidence["weeks_checked"])
    assert evidence["form_versions"] == ["v1"]
    assert [v["form_version"] for v in evidence["form_versions_checked"]] == ["v1"]
    assert evidence["target"] == 0.95 and evidence["confidence"] == 0.95


def test_unstable_week_names_the_week(reasons_store) -> None:
    by_name = {(a.doc_type, a.field): a for a in automation_candidates(
        reasons_store, Scope(weeks=WEEKS), ONE_LOOK)}
    weeks = by_name[("invoice", "date")].weeks_checked
    assert [w.week for w in weeks if w.below_target] == [WEEKS[-1]]
    assert by_name[("invoice", "date")].threshold is not None  # certified, yet not stable


def test_new_version_needs_labels_of_its_own(reasons_store) -> None:
    by_name = {(a.doc_type, a.field): a for a in automation_candidates(
        reasons_store, Scope(weeks=WEEKS), ONE_LOOK)}
    versions = {v.form_version: v for v in by_name[("invoice", "vendor")].form_versions}
    assert versions["v2"].labels_above == 10
    assert not versions["v2"].covered and versions["v1"].covered
    assert by_name[("invoice", "vendor")].covered_versions == ("v1",)


def test_too_few_labels_says_how_many_more(reasons_store) -> None:
    by_name = {(a.doc_type, a.field): a for a in automation_candidates(
        reasons_store, Scope(weeks=WEEKS), ONE_LOOK)}
    order = by_name[("order", "number")]
    assert order.labels_needed == 20  # 80 perfect labels; n_min = 100
    assert by_name[("receipt", "tax")].labels_needed is None


def test_stability_looks_at_the_last_k_weeks_only(reasons_store) -> None:
    # Stability over the last 2 weeks still sees the bad week; a scope ending
    # before it makes invoice/date a candidate.
    early = automation_candidates(reasons_store, Scope(weeks=WEEKS[:3]),
                                  replace(ONE_LOOK, stability_weeks=2))
    assert {(a.doc_type, a.field): a.reason for a in early}[("invoice", "date")] is None


def test_report_carries_the_same_reasons(reasons_store) -> None:
    report = calibration_report(reasons_store, Scope(weeks=WEEKS), ONE_LOOK)
    got = {(s.doc_type, s.field): s.to_dict()["reason"] for s in report.strata}
    assert got == EXPECTED
    assert report.overall.n_candidates == 2
