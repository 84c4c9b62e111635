"""Roles and the permission table: every role x action, allowed and refused."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest
from fieldtrust.governance.acts import approve, reject
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.label_import import import_labels
from fieldtrust.labels.verdicts import record_verdict, supersede
from fieldtrust.store.access import (
    ACTIONS,
    PERMISSIONS,
    ROLES,
    bootstrap_admin,
    current_role,
    current_roles,
    first_admin,
    grant_role,
    list_users,
    require,
    revoke_role,
    role_history,
)
from fieldtrust.store.verify import verify_history

from fieldtrust.errors import InputError, PermissionDenied
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
    "vouch_history": {"admin"},
    "acknowledge_source_change": {"qa_lead", "admin"},
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
        if role == "none":  # held a role once, then lost every one
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
        "import_labels": lambda: import_labels(con, _labels_file(), actor=user,
                                               reviewer_default="alice"),
        "set_policy": lambda: set_policy_settings(con, user, n_min=200),
        # The act itself needs history written before signing: tests/reliability.
        "vouch_history": lambda: require(con, user, "vouch_history"),
        # The real call needs a lake: tests/ingest/test_sources.py makes it, roles included.
        "acknowledge_source_change": lambda: require(con, user, "acknowledge_source_change"),
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
    if role == "none":
        grant_role(con, "root", "pat", "reviewer")
    grant_role(con, "root", "pat", role)
    call = _attempt(con, action, "pat")
    if role in EXPECTED[action]:
        before = table_fingerprint(con)
        call()
        if action not in ("draw_sample", "vouch_history", "acknowledge_source_change"):
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


def test_roles_are_a_set_and_history_keeps_every_change(con: duckdb.DuckDBPyConnection) -> None:
    bootstrap_admin(con, "root")
    grant_role(con, "root", "pat", "reviewer")
    grant_role(con, "root", "pat", "qa_lead")
    assert current_roles(con, "pat") == {"reviewer", "qa_lead"}
    assert require(con, "pat", "draw_sample") == "qa_lead"
    assert require(con, "pat", "label") == "reviewer"  # least privilege is recorded
    revoke_role(con, "root", "pat", "reviewer")
    assert current_roles(con, "pat") == {"qa_lead"}
    grant_role(con, "root", "pat", "reviewer")  # granted again after a revocation
    assert current_roles(con, "pat") == {"reviewer", "qa_lead"}
    grant_role(con, "root", "pat", "none")
    assert current_roles(con, "pat") == frozenset()
    assert current_role(con, "pat") is None
    assert [(c.user_name, c.change, c.role) for c in role_history(con)] == [
        ("root", "grant", "admin"), ("pat", "grant", "reviewer"), ("pat", "grant", "qa_lead"),
        ("pat", "revoke", "reviewer"), ("pat", "grant", "reviewer"), ("pat", "grant", "none"),
    ]
    assert [(u.user_name, u.roles) for u in list_users(con)] == [
        ("pat", ()), ("root", ("admin",))
    ]
    assert verify_history(con).intact


def test_one_person_can_administer_and_audit(con: duckdb.DuckDBPyConnection) -> None:
    assert first_admin(con, "ann") is True
    assert first_admin(con, "ann") is False  # running init again changes nothing
    grant_role(con, "ann", "ann", "qa_lead")
    assert current_role(con, "ann") == "qa_lead, admin"
    assert require(con, "ann", "draw_sample") == "qa_lead"
    assert require(con, "ann", "grant_roles") == "admin"
    with pytest.raises(PermissionDenied, match=r"already has users \(admins: ann\)"):
        first_admin(con, "bob")


def test_revoking_a_role_not_held_or_by_a_non_admin_is_refused(
    con: duckdb.DuckDBPyConnection,
) -> None:
    bootstrap_admin(con, "root")
    grant_role(con, "root", "pat", "reviewer")
    with pytest.raises(InputError,
                       match=r"pat does not hold the role manager \(holds: reviewer\)"):
        revoke_role(con, "root", "pat", "manager")
    with pytest.raises(PermissionDenied, match=r"pat \(role reviewer\) may not grant roles"):
        revoke_role(con, "pat", "pat", "reviewer")
    with pytest.raises(InputError, match="role 'none' is not one of"):
        revoke_role(con, "root", "pat", "none")
    assert current_roles(con, "pat") == {"reviewer"}


def test_last_admin_cannot_lose_admin(con: duckdb.DuckDBPyConnection) -> None:
    bootstrap_admin(con, "root")
    with pytest.raises(PermissionDenied, match="root is the last admin"):
        revoke_role(con, "root", "root", "admin")
    with pytest.raises(PermissionDenied, match="root is the last admin"):
        grant_role(con, "root", "root", "none")
    grant_role(con, "root", "root", "manager")  # adding a role is never refused
    assert current_roles(con, "root") == {"admin", "manager"}
    grant_role(con, "root", "ada", "admin")
    revoke_role(con, "ada", "root", "admin")
    assert current_roles(con, "root") == {"manager"}


def test_migration_keeps_replaced_roles_replaced(tmp_path: Path) -> None:
    """Before roles were sets a grant replaced the role: old stores read as they did."""
    from fieldtrust.store.chain import chain_rows

    from fieldtrust import store

    path = tmp_path / "old.duckdb"
    con = store.connect(path)
    con.execute(
        "INSERT INTO user_roles VALUES ('root', 'admin', 'root', TIMESTAMP '2026-01-01'),"
        " ('pat', 'reviewer', 'root', TIMESTAMP '2026-01-02'),"
        " ('pat', 'qa_lead', 'root', TIMESTAMP '2026-01-03'),"
        " ('sam', 'reviewer', 'root', TIMESTAMP '2026-01-04'),"
        " ('sam', 'none', 'root', TIMESTAMP '2026-01-05')"
    )
    chain_rows(con, "user_roles", {"user_name": ["root", "pat", "sam"]})
    # The store as an older fieldtrust left it: no revocations table, 0016 not applied.
    con.execute("DROP TABLE role_revocations")
    con.execute("DELETE FROM schema_migrations WHERE name = '0019_store_role_sets'")
    con.close()
    con = store.connect(path)
    assert current_roles(con, "pat") == {"qa_lead"}
    assert current_roles(con, "sam") == frozenset()
    assert current_roles(con, "root") == {"admin"}
    revoked = [(c.user_name, c.role, c.changed_by, c.changed_at.day)
               for c in role_history(con) if c.change == "revoke"]
    assert revoked == [("pat", "reviewer", "root", 3)]
    assert verify_history(con).intact
    con.close()


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
    with pytest.raises(InputError, match=message):
        grant_role(con, "root", user, role)


def test_a_name_is_checked_once_and_carried_as_a_user_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fieldtrust.store.access as access

    checked = access.user_name("  pat ", what="acting user")
    assert (checked, type(checked)) == ("pat", access.UserName)
    calls = []
    monkeypatch.setattr(access.unicodedata, "category",
                        lambda ch: calls.append(ch) or "Ll")  # type: ignore[func-returns-value]
    assert access.user_name(checked) is checked  # not looked at again
    assert calls == []
    assert access.user_name(" sam ") == "sam" and calls  # plain text is checked


def test_one_user_s_roles_are_the_roles_the_list_of_everyone_gives(
    con: duckdb.DuckDBPyConnection,
) -> None:
    """``current_roles`` reads one user's rows; ``list_users`` the whole history, in SQL.

    Random grants, revocations and grants of ``none`` (which take every role) must
    leave both saying the same for every user, after every change.
    """
    from hypothesis import given, settings
    from hypothesis import strategies as st

    bootstrap_admin(con, "root")
    people = ("pat", "sam", "kim")
    changes = st.lists(st.tuples(st.sampled_from(("grant", "revoke")), st.sampled_from(people),
                                 st.sampled_from((*ROLES, "none"))), max_size=12)

    @settings(max_examples=30, database=None)
    @given(changes)
    def check(steps: list[tuple[str, str, str]]) -> None:
        for kind, person, role in steps:
            try:
                if kind == "grant":
                    grant_role(con, "root", person, role)
                else:
                    revoke_role(con, "root", person, role)
            except (InputError, PermissionDenied):
                continue  # a refused change changes nothing; both must still agree
            listed = {u.user_name: set(u.roles) for u in list_users(con)}
            for name in (*people, "root"):
                assert current_roles(con, name) == listed.get(name, set()), (name, steps)

    check()
