"""docs/demo.md against the default demo store: what the page promises is what the demo shows.

The page's section "What the default store shows" must be what the reports
compute (:mod:`fieldtrust.demo.claims`), and the stories the page tells by hand
must agree with it and with the hidden truth: the worst stratum it names is
the worst the labels find, every candidate is one it calls truly ready, and
nothing the truth puts below the target is a candidate. When the statistics
change what certifies, regenerating the section (the command the page gives)
is all it takes: this test reads the page, not numbers of its own.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from fieldtrust import store
from fieldtrust.demo.claims import DemoClaims, claims_text, demo_claims, section
from tests.demo_template import default_demo_copy

PAGE = Path(__file__).resolve().parents[1] / "docs" / "demo.md"


# One worker runs this module: its module fixtures are built once, not once a worker.
pytestmark = pytest.mark.xdist_group("demo_claims")


@pytest.fixture(scope="module")
def default_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[duckdb.DuckDBPyConnection]:
    """The store `fieldtrust demo` builds with its defaults (seed 7, 300,000 rows)."""
    folder = tmp_path_factory.mktemp("demo-claims")
    path = default_demo_copy(tmp_path_factory, folder / "demo.duckdb")
    con = store.connect(path, read_only=True)
    yield con
    con.close()


@pytest.fixture(scope="module")
def claims(default_store: duckdb.DuckDBPyConnection) -> DemoClaims:
    return demo_claims(default_store)


def _story(number: int) -> str:
    """The text of item ``number`` of the page's "What is planted" list."""
    planted = PAGE.read_text(encoding="utf-8").split("## What is planted", 1)[1]
    planted = planted.split("\n## ", 1)[0]
    match = re.search(rf"^{number}\. (.*?)(?=^\d+\. |\Z)", planted, re.MULTILINE | re.DOTALL)
    assert match, f"docs/demo.md has no planted story {number}"
    return match.group(1)


def test_the_page_s_section_is_what_the_reports_compute(claims: DemoClaims) -> None:
    shown = section(PAGE.read_text(encoding="utf-8"))
    computed = claims_text(claims)
    assert shown == computed, (
        "docs/demo.md's 'What the default store shows' is stale: run `fieldtrust --db demo.duckdb"
        " demo` and `python -m fieldtrust.demo.claims demo.duckdb docs/demo.md`\n" + computed)


def test_the_worst_stratum_of_the_story_is_the_worst_the_labels_find(claims: DemoClaims) -> None:
    assert _story(1).startswith("**Handwritten receipts, tax:")
    worst = next(s for s in claims.report.strata if s.table.n_labeled)
    assert (worst.doc_type, worst.field) == ("handwritten_receipt", "tax")
    assert ("handwritten_receipt", "tax") not in claims.candidates  # "no threshold certifies"
    assert worst.table.accuracy_high < claims.bar.target  # below target, not only by chance


def test_candidates_are_strata_the_page_calls_ready_and_the_truth_agrees(
    claims: DemoClaims, default_store: duckdb.DuckDBPyConnection
) -> None:
    ready = set(re.findall(r"`(\w+)/(\w+)`", _story(7)))
    assert len(ready) == 5, ready
    assert claims.candidates and set(claims.candidates) <= ready
    # The truth behind "right 99% or more above 0.95", and behind every candidate's
    # certificate: accuracy above its threshold at least the target.
    truth = dict(((d, f), a) for d, f, a in default_store.sql(
        "SELECT e.doc_type, e.field, avg(t.correct::INT) FROM extractions e"
        " JOIN demo_truth t USING (extraction_id) WHERE e.confidence >= 0.95"
        " GROUP BY ALL").fetchall())
    assert all(truth[s] >= 0.99 for s in ready), {s: truth[s] for s in ready}
    for s in claims.report.strata:
        if s.assessment.candidate:
            above = default_store.execute(
                "SELECT avg(t.correct::INT) FROM extractions e JOIN demo_truth t"
                " USING (extraction_id) WHERE e.doc_type = ? AND e.field = ?"
                " AND e.confidence >= ?", [s.doc_type, s.field, s.assessment.threshold]
            ).fetchone()
            assert above is not None and above[0] >= claims.bar.target


def test_the_alerts_the_page_names_are_the_ones_that_fire(claims: DemoClaims) -> None:
    shown = section(PAGE.read_text(encoding="utf-8"))
    line = next(x for x in shown.splitlines() if x.startswith(f"- **Alerts in {claims.week}"))
    named = re.findall(r"(below_target|drop|sustained_drop|new_version) (\w+)/(\w+)", line)
    assert named == claims.alerted
    # Story 4: no new_version alert, the invoice/date drops do; story 6: the unrecorded
    # date drift of printed receipts is a sustained drop. The store agrees.
    assert "no `new_version` alert fires" in _story(4) and "`drop` and `sustained_drop`" in (
        _story(4))
    assert "`sustained_drop` alert" in _story(6)
    assert not [a for a in claims.alerted if a[0] == "new_version"]
    assert {("drop", "invoice", "date"), ("sustained_drop", "invoice", "date"),
            ("sustained_drop", "printed_receipt", "date")} <= set(claims.alerted)
    # Nothing ready for automation raises an alert.
    ready = set(re.findall(r"`(\w+)/(\w+)`", _story(7)))
    assert not {(d, f) for _, d, f in claims.alerted} & ready
