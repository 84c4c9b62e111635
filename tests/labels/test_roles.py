"""Roles and the permission table: every role x action, allowed and refused."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from fieldtrust.governance.acts import approve, reject
from fieldtrust.governance.policy_settings import set_policy_settings
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.label_import import import_labels
from fieldtrust.labels.verdicts import record_verdict, supersede
from fieldtrust.store.access import (
    ACTIONS,
    PERMISSIONS,
    ROLES,
    bootstrap_admin,
    current_role,
    grant_role,
    list_users,
    require,
    role_history,
)
from fieldtrust.store.errors import AccessError, PermissionDenied

from tests.conftest import table_fingerprint

#: Expected table, written out by hand so a change to PERMISSIONS must change the test too.
EXPECTED = {
    "label": {"reviewer", "qa_lead"},
    "supersede_others": {"qa_lead"},
    "adjudicate": {"qa_lead"},
    "draw_sample": {"qa_lead"},
    "import_labels": {"qa_lead", "admin"},
    "decide": {"manager", "admin"},
    "grant_roles": {"admin"},
    "set_policy": {"admin"},
}

ROLE_OR_NONE = [*ROLES, "none"]
PAIRS = [(role, action) for role in ROLE_OR_NONE for action in EXPECTED]


def test_permission_table_is_the_documented_one() -> None:
    assert {a: set(r) for a, r in PERMISSIONS.items()} == EXPECTED
    assert set(ACTIONS) == set(PERMISSIONS)


def test_require_allows_and_refuses_by_table(con: duckdb.DuckDBPyConnection) -> None:
    bootstrap_admin(con, "root")
    for role in ROLE_OR_NONE:
        user = f"pat_{role}"
        grant_role(con, "root", user, "reviewer")
        grant_role(con, "root", user, role)
    for role, action in PAIRS:
        user = f"pat_{role}"
        if role in EXPECTED[action]:
            assert require(con, user, action) == role
            continue
        held = "no role" if role == "none" else f"role {role}"
        needed = " or ".join(r for r in ROLES if r in EXPECTED[action])
        message = (rf"{user} \({held}\) may not {re.escape(ACTIONS[action])}: that needs"
                   rf" the role {needed}; an admin can grant it")
        with pytest.raises(PermissionDenied, match=message):
            require(con, user, action)


def _attempt(con: duckdb.DuckDBPyConnection, action: str, user: str) -> Callable[[], object]:
    """The real library call behind each action, made by ``user``."""
    calls: dict[str, Callable[[], object]] = {
        "label": lambda: record_verdict(con, actor=user, extraction_id="e01", verdict="correct"),
        "supersede_others": lambda: supersede(
            con, actor=user, label_id=_dave_label(con), verdict="unclear"
        ),
        "adjudicate": lambda: adjudicate(con, user, "e02", "correct"),
        "decide": lambda: reject(con, user, "invoice", "total", "too few labels"),
        "grant_roles": lambda: grant_role(con, user, "newcomer", "reviewer"),
        "draw_sample": lambda: require(con, user, "draw_sample"),
        "import_labels": lambda: import_labels(con, _labels_file(), actor=user),
        "set_policy": lambda: set_policy_settings(con, user, n_min=200),
    }
    return calls[action]


def _labels_file() -> Path:
    path = Path(tempfile.mkdtemp()) / "labels.csv"
    path.write_text("extraction_id,verdict\ne01,correct\n", encoding="utf-8")
    return path


def _dave_label(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute("SELECT label_id FROM labels WHERE reviewer = 'dave'").fetchone()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize(("role", "action"), PAIRS)
def test_library_calls_enforce_the_table(
    review_store: duckdb.DuckDBPyConnection,
    role: str,
    action: str,
) -> None:
    con = review_store
    record_verdict(con, actor="dave", extraction_id="e02", verdict="incorrect",
                   corrected_value="12.00", error_type="misread_characters")
    grant_role(con, "root", "pat", "reviewer")
    grant_role(con, "root", "pat", role)
    call = _attempt(con, action, "pat")
    if role in EXPECTED[action]:
        before = table_fingerprint(con)
        call()
        if action != "draw_sample":
            assert table_fingerprint(con) != before, "an allowed action writes a row"
        return
    before = table_fingerprint(con)
    with pytest.raises(PermissionDenied, match=r"pat \(.*\) may not .*needs the role"):
        call()
    assert table_fingerprint(con) == before


def test_reviewer_cannot_approve_and_manager_cannot_label(
    review_store: duckdb.DuckDBPyConnection,
) -> None:
    with pytest.raises(PermissionDenied, match=r"alice \(role reviewer\) may not approve"):
        approve(review_store, "alice", "invoice", "total", "ok", threshold=0.9)
    with pytest.raises(PermissionDenied, match=r"mona \(role manager\) may not record a verdict"):
        record_verdict(review_store, actor="mona", extraction_id="e00", verdict="correct")


def test_unknown_user_has_no_role(review_store: duckdb.DuckDBPyConnection) -> None:
    assert current_role(review_store, "stranger") is None
    with pytest.raises(PermissionDenied, match=r"stranger \(no role\)"):
        require(review_store, "stranger", "label")


def test_bootstrap_first_grant_must_be_admin(con: duckdb.DuckDBPyConnection) -> None:
    with pytest.raises(PermissionDenied, match="first grant must make an admin"):
        grant_role(con, "eve", "eve", "reviewer")
    grant_role(con, "eve", "eve", "admin")
    assert current_role(con, "eve") == "admin"
    # Once there is an admin, bootstrapping again is just an ungranted grant.
    with pytest.raises(PermissionDenied, match=r"mallory \(no role\) may not grant roles"):
        bootstrap_admin(con, "mallory")


def test_grants_are_appended_and_latest_wins(con: duckdb.DuckDBPyConnection) -> None:
    bootstrap_admin(con, "root")
    grant_role(con, "root", "pat", "reviewer")
    grant_role(con, "root", "pat", "qa_lead")
    grant_role(con, "root", "pat", "none")
    assert current_role(con, "pat") is None
    assert [(g.user_name, g.role) for g in role_history(con)] == [
        ("root", "admin"), ("pat", "reviewer"), ("pat", "qa_lead"), ("pat", "none")
    ]
    assert [(g.user_name, g.role, g.granted_by) for g in list_users(con)] == [
        ("pat", "none", "root"), ("root", "admin", "root")
    ]


def test_last_admin_cannot_be_demoted(con: duckdb.DuckDBPyConnection) -> None:
    bootstrap_admin(con, "root")
    with pytest.raises(PermissionDenied, match="root is the last admin"):
        grant_role(con, "root", "root", "manager")
    grant_role(con, "root", "ada", "admin")
    grant_role(con, "ada", "root", "manager")
    assert current_role(con, "root") == "manager"


@pytest.mark.parametrize(
    ("user", "role", "message"),
    [
        ("pat", "superuser", "role 'superuser' is not one of"),
        ("", "reviewer", "user name '' is empty"),
        ("a\nb", "reviewer", "not a usable name"),
    ],
)
def test_bad_grants_are_refused(
    con: duckdb.DuckDBPyConnection, user: str, role: str, message: str
) -> None:
    bootstrap_admin(con, "root")
    with pytest.raises(AccessError, match=message):
        grant_role(con, "root", user, role)
