"""Roles and identity: the library checks every write, forged names and roles are refused.

The dashboard only hides buttons; what a user may do is decided by the
library from the store's grants. So these tests forge requests the way a
tampered browser session or a buggy page would: a role the store does not
grant, a reviewer name that is not the acting user, a name that only looks
like a granted one; each is refused and the store stays byte-identical.
With sign-in configured (``[auth]`` in secrets), a visitor who has not
signed in sees no data on any page.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
from fieldtrust.dashboard import data, state
from fieldtrust.governance import acts
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.assignment import item_view, next_items, skip
from fieldtrust.labels.verdicts import record_verdict, supersede
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.store.access import grant_role
from rel_store import MANAGER, QA_LEAD, WEEK, as_read
from streamlit.testing.v1 import AppTest

from fieldtrust.errors import InputError, PermissionDenied
from tests.conftest import file_fingerprint, table_fingerprint

APP = str(Path(__file__).resolve().parents[2] / "dashboard" / "app.py")
PAGES = ("app_pages/overview.py", "app_pages/calibration.py", "app_pages/audit.py",
         "app_pages/review.py", "app_pages/automation.py")
AUTH = {
    "redirect_uri": "http://localhost:8501/oauth2callback",
    "cookie_secret": "reliability-suite-cookie-secret-0123456789",
    "client_id": "fieldtrust",
    "client_secret": "not-a-real-secret",
    "server_metadata_url": "https://accounts.example.com/.well-known/openid-configuration",
}
#: Names that are not a granted user, though some look like one.
FORGED_NAMES = ("ANA", "ana\u200b", "\u0430na", "maya'; --", "root OR 1=1", "nobody")


def _first_label(con: duckdb.DuckDBPyConnection, reviewer: str) -> str:
    return str(con.execute(
        "SELECT label_id FROM labels l WHERE reviewer = ? AND review_round = 'primary'"
        " AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)"
        # Not an adjudicated item: the adjudication settles its reviewers' labels.
        " AND NOT EXISTS (SELECT 1 FROM labels a WHERE a.extraction_id = l.extraction_id"
        "                 AND a.review_round = 'adjudication')"
        " ORDER BY label_id LIMIT 1", [reviewer]).fetchall()[0][0])


def _labelled_extraction(con: duckdb.DuckDBPyConnection) -> str:
    return str(con.execute(
        "SELECT min(extraction_id) FROM labels WHERE review_round = 'primary'").fetchall()[0][0])


def _writes(sample_id: str) -> dict[str, Callable[[duckdb.DuckDBPyConnection, str], object]]:
    """Every library write, as ``write(con, actor)``."""
    return {
        "label": lambda con, who: record_verdict(
            con, actor=who, extraction_id="x000001", verdict="correct"),
        "next_items": lambda con, who: next_items(con, who, sample_id, count=1),
        "skip": lambda con, who: skip(con, who, sample_id, "x000001", "unreadable"),
        "supersede_anas_label": lambda con, who: supersede(
            con, actor=who, label_id=_first_label(con, "ana"), verdict="correct"),
        "adjudicate": lambda con, who: adjudicate(
            con, who, _labelled_extraction(con), "correct"),
        "decide": lambda con, who: acts.reject(con, who, "invoice", "tax", "no"),
        "grant": lambda con, who: grant_role(con, who, who, "admin"),
        "draw_sample": lambda con, who: draw_sample(
            con, WEEK, Design(base_rate=0.2), seed=99, actor=who),
    }


#: Who the store says may do each write; everyone else must be refused.
ALLOWED = {
    "label": {"ana", "quinn"},
    "next_items": {"ana", "quinn"},
    "skip": {"ana", "quinn"},  # allowed, but x000001 is assigned to nobody: a InputError
    "supersede_anas_label": {"ana", "quinn"},  # her own label, or the qa_lead
    "adjudicate": {"quinn"},
    "decide": {"maya", "root"},
    "grant": {"root"},
    "draw_sample": {"quinn"},
}
ACTORS = ("ana", "quinn", "maya", "root", *FORGED_NAMES)


@pytest.mark.parametrize("write", sorted(ALLOWED))
def test_every_write_is_checked_against_the_store_grants(
    pcon: duckdb.DuckDBPyConnection, sample_id: str, write: str
) -> None:
    """Everyone without the role is refused and changes nothing; then an allowed user succeeds."""
    action = _writes(sample_id)[write]
    before = table_fingerprint(pcon)
    refused = [actor for actor in ACTORS if actor not in ALLOWED[write]]
    for actor in refused:
        with pytest.raises(PermissionDenied) as raised:
            action(pcon, actor)
        if actor in FORGED_NAMES:
            assert f"{actor.strip()} (no role) may not" in str(raised.value)
        assert table_fingerprint(pcon) == before, f"{actor} changed the store"
    assert len(refused) >= len(FORGED_NAMES) + 2
    allowed_actor = sorted(ALLOWED[write])[0]
    if write == "skip":
        with pytest.raises(InputError, match="not assigned"):
            action(pcon, allowed_actor)
        assert table_fingerprint(pcon) == before
    else:
        action(pcon, allowed_actor)
        assert table_fingerprint(pcon) != before


def test_no_write_takes_a_reviewer_or_role_besides_the_acting_user() -> None:
    """The API cannot be asked to record someone else: the actor is the only name it takes."""
    from fieldtrust.labels import agreement, assignment, verdicts

    writers = [verdicts.record_verdict, verdicts.supersede, agreement.adjudicate,
               assignment.next_items, assignment.skip, acts.approve, acts.reject, acts.revoke,
               draw_sample]
    for writer in writers:
        parameters = inspect.signature(writer).parameters
        assert "actor" in parameters, writer.__name__
        assert parameters["actor"].default is inspect.Parameter.empty, writer.__name__
        assert not set(parameters) & {"reviewer", "role", "decided_by", "as_role", "user",
                                      "labeled_by", "drawn_by"}, writer.__name__


def test_the_recorded_reviewer_and_role_come_from_the_store(
    pcon: duckdb.DuckDBPyConnection, sample_id: str
) -> None:
    item = next_items(pcon, "ben", sample_id, count=1)[0]
    label = record_verdict(pcon, actor=" ben ", extraction_id=item.extraction_id,
                           verdict="correct")
    assert label.reviewer == "ben"
    decision = acts.reject(pcon, "root", "invoice", "date", "not yet")
    assert (decision.decided_by, decision.role) == ("root", "admin")
    # A revoked user keeps their history but loses every permission.
    grant_role(pcon, "root", "ben", "none")
    with pytest.raises(PermissionDenied, match="ben \\(no role\\)"):
        next_items(pcon, "ben", sample_id, count=1)
    with pytest.raises(PermissionDenied):
        item_view(pcon, "ben", sample_id, item.extraction_id)


def test_drawing_a_sample_is_checked_in_the_library(pcon: duckdb.DuckDBPyConnection) -> None:
    before = table_fingerprint(pcon)
    with pytest.raises(PermissionDenied, match=(
            r"ana \(role reviewer\) may not draw an audit sample: that needs the role qa_lead;"
            r" an admin can grant it with `fieldtrust users grant ana qa_lead --as ADMIN`")):
        draw_sample(pcon, WEEK, Design(base_rate=0.2), seed=99, actor="ana")
    # Returning the existing sample is asked too: who may not draw learns it at once.
    current = pcon.execute("SELECT seed, design_json FROM audit_samples").fetchall()[0]
    with pytest.raises(PermissionDenied, match="nobody \\(no role\\)"):
        draw_sample(pcon, WEEK, Design.from_json(current[1]), seed=current[0], actor="nobody")
    with pytest.raises(InputError, match="acting user ' ' is empty"):
        draw_sample(pcon, WEEK, Design(base_rate=0.2), seed=99, actor=" ")
    assert table_fingerprint(pcon) == before
    # The qa_lead draws; the sample records who, as the store spells the name.
    result = draw_sample(pcon, WEEK, Design(base_rate=0.2), seed=99, actor=f" {QA_LEAD} ")
    assert result.created
    assert pcon.execute("SELECT drawn_by FROM audit_samples WHERE sample_id = ?",
                        [result.sample_id]).fetchall() == [(QA_LEAD,)]


# --- the dashboard's write path ------------------------------------------------------------------


@pytest.fixture
def dashboard_db(populated: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point the dashboard (``dashboard.data``) at a private populated store."""
    monkeypatch.setenv("FIELDTRUST_DB", str(populated))
    return populated


@pytest.mark.parametrize(
    ("forged_user", "call"),
    [
        # A reviewer whose session claims the manager role approves.
        ("ana", lambda who: data.write(
            acts.approve, who, "invoice", "tax", "forged", threshold=0.9)),
        # A manager labels (the page would pass their own name: they may not label at all).
        (MANAGER, lambda who: data.write(
            record_verdict, actor=who, extraction_id="x000001", verdict="correct")),
        # A name the store never granted (a case variant of the qa_lead's) adjudicates.
        ("Quinn", lambda who: data.write(adjudicate, who, "x000001", "incorrect",
                                         corrected_status="null", error_type="wrong_field")),
    ],
    ids=["reviewer-approves", "manager-labels", "case-variant-adjudicates"],
)
def test_forged_dashboard_requests_are_refused(
    dashboard_db: Path, forged_user: str, call: Callable[[str], Any]
) -> None:
    before = file_fingerprint(dashboard_db)
    with pytest.raises(PermissionDenied):
        call(forged_user)
    assert file_fingerprint(dashboard_db) == before


def _app(path: Path) -> AppTest:
    return AppTest.from_file(APP, default_timeout=120)


def _all_text(at: AppTest) -> str:
    """Every value and label the run rendered, main area and sidebar."""
    parts: list[str] = []
    for kind in ("title", "header", "subheader", "markdown", "caption", "text", "code", "info",
                 "warning", "error", "success", "metric", "button", "selectbox", "multiselect",
                 "select_slider", "text_input", "text_area", "checkbox", "download_button",
                 "dataframe", "table", "json", "progress", "tabs", "expander"):
        for element in at.get(kind):
            for attribute in ("value", "label", "body", "text", "options"):
                value = getattr(element, attribute, None)
                if value is not None and not callable(value):
                    parts.append(str(value))
    return as_read("\n".join(parts))


def test_with_sign_in_configured_a_visitor_sees_no_data(dashboard_db: Path) -> None:
    at = _app(dashboard_db)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": False}
    # A forged demo-picker value must not help either.
    at.session_state[state.AUTH_DEMO_USER] = MANAGER
    at.run()
    for page in PAGES:
        if page != PAGES[0]:
            at.switch_page(page).run()
        assert not at.exception, page
        shown = _all_text(at)
        assert "Sign in" in shown, page
        for secret in ("x000001", "doc0", "invoice", "receipt", "240", str(dashboard_db),
                       "quinn", "maya", "DEMO MODE", "Weeks"):
            assert secret not in shown, f"{secret!r} shown on {page} before sign-in"
        assert not at.get("dataframe") and not at.get("download_button"), page
        assert not at.get("plotly_chart") and not at.get("vega_lite_chart"), page


def test_a_signed_in_reviewer_cannot_become_a_manager_through_the_demo_picker(
    dashboard_db: Path,
) -> None:
    at = _app(dashboard_db)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": "ana", "email_verified": True}
    at.session_state[state.AUTH_DEMO_USER] = MANAGER
    at.run()
    at.switch_page("app_pages/automation.py").run()
    assert not at.exception
    shown = _all_text(at)
    assert "Signed in as **ana**" in shown and "roles: **reviewer**" in shown
    assert "Decisions need the manager or admin role; you are ana (reviewer)" in shown
    assert not [b for b in at.button if b.label in ("Approve", "Reject", "Revoke")]


@pytest.mark.parametrize("forged", ["\u0430na", "maya'; --"])
def test_the_demo_picker_ignores_a_forged_user_in_the_session(
    dashboard_db: Path, forged: str
) -> None:
    at = _app(dashboard_db)
    at.session_state[state.AUTH_DEMO_USER] = forged  # before the first run, as a tampered session
    at.run()
    assert not at.exception
    picker = at.selectbox(key=state.AUTH_DEMO_USER)
    assert picker.value == QA_LEAD  # the default, a user the store knows
    assert forged not in picker.options
