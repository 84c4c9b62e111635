"""Fixtures of the dashboard tests: the demo store, built once per test run.

The demo store at its default size is the smallest that has automation
candidates, which the approval tests need. It is the run's default demo
(tests/demo_template.py) with the demo's users and a redraw added, built once
per run and shared by the pytest-xdist workers; every test that writes gets
its own copy.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample

from fieldtrust import store
from fieldtrust.demo.users import ensure_demo_ready
from tests.conftest import copy_store
from tests.demo_template import built_once, default_demo_copy

#: A denser redraw of the newest week (the demo draws 3%), so reviewers have unlabelled
#: items: about two thirds of it, as the demo's reviewers labelled its first 60% of 3%.
REVIEW_DESIGN = Design(base_rate=0.05)
REVIEW_WEEK = "2026-W48"


def _build(path: Path, factory: pytest.TempPathFactory) -> None:
    default_demo_copy(factory, path)
    ensure_demo_ready(path)
    con = store.connect(path)
    try:
        draw_sample(con, REVIEW_WEEK, REVIEW_DESIGN, seed=1, actor="quinn")
    finally:
        con.close()


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo store with demo users, maps and an unlabelled redraw; never written by tests."""
    return built_once(tmp_path_factory, "dashboard-demo.duckdb",
                      lambda path: _build(path, tmp_path_factory))


def settle_disagreements(path: Path) -> int:
    """quinn (qa_lead) settles every disagreement waiting, as the primary reviewer saw it.

    The demo leaves its newest week's disagreements in the adjudication queue,
    and an approval waits for them; a team's QA lead settles them before the
    manager approves. Returns how many were settled.
    """
    from fieldtrust.labels.agreement import adjudicate
    from fieldtrust.store.open_reviews import open_adjudications

    con = store.connect(path)
    try:
        strata = con.execute("SELECT DISTINCT doc_type, field FROM extractions").fetchall()
        waiting = [e for d, f in strata for e in open_adjudications(con, d, f)]
        for extraction_id in waiting:
            verdict, value, status, error_type, detail = con.execute(
                "SELECT verdict, corrected_value, corrected_status, error_type, error_detail"
                " FROM labels l WHERE extraction_id = ? AND review_round = 'primary'"
                " AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)",
                [extraction_id]).fetchall()[0]
            adjudicate(con, "quinn", extraction_id, verdict, corrected_value=value,
                       corrected_status=status, error_type=error_type, error_detail=detail)
    finally:
        con.close()
    return len(waiting)


@pytest.fixture
def demo_db(demo_template: Path, tmp_path: Path) -> Path:
    """A private copy of the demo store (tests write labels and decisions to it)."""
    return copy_store(demo_template, tmp_path / "demo.duckdb")


@pytest.fixture(scope="module")
def shared_demo_db(demo_template: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy per test module, for tests that only render pages (cache hits across tests)."""
    return copy_store(demo_template, tmp_path_factory.mktemp("render") / "demo.duckdb")


@pytest.fixture
def empty_db(db_path: Path) -> Path:
    """A migrated store with no extractions."""
    return db_path


@pytest.fixture
def use_db(monkeypatch: pytest.MonkeyPatch) -> Callable[[Path], None]:
    """Point the dashboard at a store (``use_db(path)``) through FIELDTRUST_DB."""

    def point(path: Path) -> None:
        monkeypatch.setenv("FIELDTRUST_DB", str(path))

    return point


@pytest.fixture(autouse=True)
def demo_dashboard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Dashboards run in-process here are demo dashboards (``fieldtrust serve --demo``).

    Without ``--demo`` (or ``--as NAME``, or ``[auth]``) the dashboard lets nobody in;
    a test of that replaces ``sys.argv`` itself.
    """
    monkeypatch.setattr(sys, "argv", [sys.argv[0], "--demo"])
