"""Access control: roles, the permission table, and role grants.

Permission checks live here, in the library, so the CLI, the dashboard and any
script get the same answer. Grants are append-only rows in ``user_roles``; a
user's current role is their latest grant, and the role ``none`` takes every
permission away. Reading (reports, exports, the policy) needs no role: access
to the store file is the gate for that.

Bootstrap: while ``user_roles`` is empty anyone may make the first grant, and
it must be ``admin`` (:func:`bootstrap_admin`, or ``fieldtrust users grant
NAME admin --as NAME``). From then on only an admin grants roles, and the last
admin cannot be demoted.
"""

from __future__ import annotations

import datetime as dt
import unicodedata
from dataclasses import dataclass
from types import MappingProxyType

import duckdb
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.errors import AccessError, PermissionDenied
from fieldtrust.store.retry import first_row, write_with_retry

#: Roles a user can hold; ``none`` (revoked) is also grantable.
ROLES: tuple[str, ...] = ("reviewer", "qa_lead", "manager", "admin")

#: What each action means, in the words error messages use.
ACTIONS: MappingProxyType[str, str] = MappingProxyType(
    {
        "label": "record a verdict (as themselves)",
        "supersede_others": "correct another reviewer's label",
        "adjudicate": "adjudicate a disagreement",
        "draw_sample": "draw an audit sample",
        "import_labels": "import a file of labels",
        "decide": "approve, reject or revoke automation",
        "grant_roles": "grant roles",
        "set_policy": "change the policy settings approvals are held to",
    }
)

#: The permission table: action -> roles allowed to do it. Data, not code, so
#: the docs and the parametrised test read the same table.
PERMISSIONS: MappingProxyType[str, frozenset[str]] = MappingProxyType(
    {
        "label": frozenset({"reviewer", "qa_lead"}),
        "supersede_others": frozenset({"qa_lead"}),
        "adjudicate": frozenset({"qa_lead"}),
        "draw_sample": frozenset({"qa_lead"}),
        # Imports write labels in other people's names, like a qa_lead's corrections;
        # an admin may restore labels kept outside the store (a backup, another tool).
        "import_labels": frozenset({"qa_lead", "admin"}),
        "decide": frozenset({"manager", "admin"}),
        "grant_roles": frozenset({"admin"}),
        "set_policy": frozenset({"admin"}),
    }
)

_MAX_NAME = 100


@dataclass(frozen=True)
class RoleGrant:
    """One row of ``user_roles``: ``user_name`` was given ``role`` by ``granted_by``."""

    user_name: str
    role: str
    granted_by: str
    granted_at: dt.datetime


def user_name(name: object, *, what: str = "user name") -> str:
    """``name`` stripped; an :class:`AccessError` when it is empty, too long or holds a line
    break, tab or other control character (anywhere, even at an end).
    """
    if not isinstance(name, str) or not name.strip():
        raise AccessError(f"{what} {name!r} is empty: give the person's user name")
    cleaned = name.strip()
    if len(cleaned) > _MAX_NAME or any(unicodedata.category(ch) == "Cc" for ch in name):
        raise AccessError(
            f"{what} {cleaned[:40]!r} is not a usable name: at most {_MAX_NAME} characters,"
            " one line, no tabs or control characters"
        )
    return cleaned


def current_role(con: duckdb.DuckDBPyConnection, user: str) -> str | None:
    """The user's role from their latest grant; None when never granted or revoked."""
    row = first_row(con.execute(
        "SELECT role FROM user_roles WHERE user_name = ?"
        " ORDER BY granted_at DESC LIMIT 1",
        [user_name(user)],
    ).fetchall())
    if row is None or row[0] == "none":
        return None
    return str(row[0])


def allowed(role: str | None, action: str) -> bool:
    """Whether ``role`` may do ``action`` (by the :data:`PERMISSIONS` table)."""
    if action not in PERMISSIONS:
        raise AccessError(f"unknown action {action!r}; known: {', '.join(PERMISSIONS)}")
    return role is not None and role in PERMISSIONS[action]


def require(con: duckdb.DuckDBPyConnection, actor: str, action: str) -> str:
    """Return ``actor``'s role if it allows ``action``; raise :class:`PermissionDenied` if not."""
    actor = user_name(actor, what="acting user")
    role = current_role(con, actor)
    if allowed(role, action):
        assert role is not None
        return role
    needed = [r for r in ROLES if r in PERMISSIONS[action]]  # least privilege first
    held = f"role {role}" if role else "no role"
    raise PermissionDenied(
        f"{actor} ({held}) may not {ACTIONS[action]}: that needs the role"
        f" {' or '.join(needed)}; an admin can grant it with"
        f" `fieldtrust users grant {actor} {needed[0]} --as ADMIN`"
    )


def grant_role(con: duckdb.DuckDBPyConnection, actor: str, user: str, role: str) -> RoleGrant:
    """Give ``user`` the role ``role`` (``none`` revokes), acting as ``actor``.

    Only an admin may grant, except the very first grant of a store, which
    anyone may make and which must be ``admin`` (bootstrap). The last admin
    cannot be demoted, so the store always has someone who can grant roles.

    Raises
    ------
    PermissionDenied
        ``actor`` is not an admin, or the grant would leave no admin.
    AccessError
        ``role`` is not one of :data:`ROLES` or ``none``.
    """
    actor = user_name(actor, what="acting user")
    user = user_name(user)
    if role not in (*ROLES, "none"):
        raise AccessError(f"role {role!r} is not one of {', '.join(ROLES)}, none")

    def work(tx: duckdb.DuckDBPyConnection) -> RoleGrant:
        row = first_row(tx.execute("SELECT count(*) FROM user_roles").fetchall())
        if row is not None and row[0] == 0:
            if role != "admin":
                raise PermissionDenied(
                    f"the store has no users yet: the first grant must make an admin"
                    f" (e.g. `fieldtrust users grant {actor} admin --as {actor}`), not {role}"
                )
        else:
            require(tx, actor, "grant_roles")
            _refuse_removing_last_admin(tx, user, role)
        granted_at = _after_latest(tx, user)
        inserted = tx.execute(
            "INSERT INTO user_roles (user_name, role, granted_by, granted_at) VALUES (?, ?, ?, ?)"
            " RETURNING *",
            [user, role, actor, granted_at],
        )
        chain_returned(tx, "user_roles", inserted)
        return RoleGrant(user, role, actor, granted_at)

    return write_with_retry(con, work, what=f"granting {role} to {user}")


def bootstrap_admin(con: duckdb.DuckDBPyConnection, name: str) -> RoleGrant:
    """Make ``name`` the first admin of a store that has no users yet."""
    return grant_role(con, name, name, "admin")


def list_users(con: duckdb.DuckDBPyConnection) -> list[RoleGrant]:
    """Every user's latest grant (``none`` included), sorted by user name."""
    rows = con.execute(
        "SELECT user_name, role, granted_by, granted_at FROM ("
        " SELECT *, row_number() OVER (PARTITION BY user_name ORDER BY granted_at DESC) AS rank_"
        " FROM user_roles) WHERE rank_ = 1 ORDER BY user_name"
    ).fetchall()
    return [RoleGrant(*row) for row in rows]


def role_history(con: duckdb.DuckDBPyConnection) -> list[RoleGrant]:
    """Every grant ever made, oldest first."""
    rows = con.execute(
        "SELECT user_name, role, granted_by, granted_at FROM user_roles"
        " ORDER BY granted_at, user_name"
    ).fetchall()
    return [RoleGrant(*row) for row in rows]


def _refuse_removing_last_admin(con: duckdb.DuckDBPyConnection, user: str, role: str) -> None:
    if role == "admin" or current_role(con, user) != "admin":
        return
    admins = [g for g in list_users(con) if g.role == "admin"]
    if len(admins) <= 1:
        raise PermissionDenied(
            f"{user} is the last admin: grant admin to someone else before changing {user}'s role"
        )


def _after_latest(con: duckdb.DuckDBPyConnection, user: str) -> dt.datetime:
    # Grants in the same microsecond would make "latest" ambiguous: keep them ordered.
    row = first_row(con.execute(
        "SELECT max(granted_at) FROM user_roles WHERE user_name = ?", [user]
    ).fetchall())
    now = utc_now()
    if row is not None and row[0] is not None and row[0] >= now:
        return row[0] + dt.timedelta(microseconds=1)  # type: ignore[no-any-return]
    return now
