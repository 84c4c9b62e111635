"""Access control: roles, the permission table, and role grants.

Permission checks live here, in the library, so the CLI, the dashboard and any
script get the same answer. A user holds a set of roles: grants are
append-only rows in ``user_roles``, revocations of one role rows in
``role_revocations`` (both chained), and a grant of ``none`` takes every role
away. Reading (reports, exports, the policy) needs no role: access
to the store file is the gate for that.

Bootstrap: while ``user_roles`` is empty anyone may make the first grant, and
it must be ``admin`` (:func:`bootstrap_admin`, or ``fieldtrust users grant
NAME admin --as NAME``). From then on only an admin grants roles, and the last
admin cannot lose the role.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import duckdb
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import first_row, write_with_retry

from fieldtrust.errors import InputError, PermissionDenied

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
        "vouch_history": "vouch for history written before the store signed decisions",
        "acknowledge_source_change": "acknowledge a changed or missing lake file",
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
        "vouch_history": frozenset({"admin"}),
        # The people who run the data: a changed file is theirs to look into.
        "acknowledge_source_change": frozenset({"qa_lead", "admin"}),
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


class UserName(str):
    """A user name as :func:`user_name` checked it: stripped, one line, at most 100 characters.

    The acting user of an act is checked once where the act starts and
    carried as this value; checking a UserName again returns it as it is
    (an approval asks for its actor's roles twice, before certifying and in
    its transaction, and parses the name once).
    """

    __slots__ = ()


def user_name(name: object, *, what: str = "user name") -> UserName:
    """``name`` stripped; an :class:`InputError` when it is empty, too long or holds a line
    break, tab or other control character (anywhere, even at an end).
    """
    if isinstance(name, UserName):
        return name
    if not isinstance(name, str) or not name.strip():
        raise InputError(f"{what} {name!r} is empty: give the person's user name")
    cleaned = name.strip()
    if len(cleaned) > _MAX_NAME or any(unicodedata.category(ch) == "Cc" for ch in name):
        raise InputError(
            f"{what} {cleaned[:40]!r} is not a usable name: at most {_MAX_NAME} characters,"
            " one line, no tabs or control characters"
        )
    return UserName(cleaned)


def signed_in_user(claims: Mapping[str, object]) -> str:
    """The user an OpenID Connect sign-in names: its e-mail, when the provider verified it.

    Role grants name people by e-mail, so the e-mail is the only claim that may
    pick a user, and only with ``email_verified`` true (a boolean, or the text
    ``"true"`` some providers send). Never the display name (``name``) or the
    subject (``sub``): a provider account may call itself ``root``, and an
    unverified e-mail is whatever its owner typed.

    Raises
    ------
    PermissionDenied
        No e-mail claim, or one the provider does not say it verified, or one
        that is not a usable user name.
    """
    email, verified = claims.get("email"), claims.get("email_verified")
    if isinstance(verified, str):
        verified = verified.strip().lower() == "true"
    problem = None
    if not isinstance(email, str) or not email.strip():
        problem = "gave no e-mail address"
    elif verified is not True:
        problem = f"did not say that {email.strip()[:60]!r} is verified"
    else:
        try:
            return user_name(email, what="signed-in e-mail")
        except InputError as exc:
            problem = f"gave an e-mail that is not a usable user name ({exc})"
    raise PermissionDenied(
        f"the identity provider {problem}: fieldtrust signs in only a verified e-mail"
        " address, never a display name; ask your provider's admin to release the email"
        " and email_verified claims (docs/dashboard.md)"
    )


def current_roles(con: duckdb.DuckDBPyConnection, user: str) -> frozenset[str]:
    """The roles ``user`` holds now: each granted and not revoked since (empty: none).

    A role is held when its latest grant in ``user_roles`` is newer than every
    revocation of it (``role_revocations``) and every grant of ``none``
    (which takes every role away).
    """
    # Every act asks this, several times a key press on the review page: two point
    # reads of one user's rows, not :data:`_HELD_SQL`'s correlated subqueries over
    # everyone's (a tenth of a key press's server time).
    latest_grant: dict[str, dt.datetime] = {}
    latest_revocation: dict[str, dt.datetime] = {}
    for kind, role, at in con.execute(_USER_CHANGES_SQL, {"user": user_name(user)}).fetchall():
        (latest_grant if kind == "grant" else latest_revocation)[str(role)] = at
    everything_taken = latest_grant.pop("none", None)
    return frozenset(
        role for role, granted in latest_grant.items()
        if _later(granted, everything_taken) and _later(granted, latest_revocation.get(role))
    )


def _later(granted: dt.datetime, taken: dt.datetime | None) -> bool:
    """Whether a grant at ``granted`` outlives a removal at ``taken`` (one at the same instant
    removes it, as in :data:`_HELD_SQL`)."""
    return taken is None or granted > taken


#: One user's latest grant and latest revocation of each role.
_USER_CHANGES_SQL = """
SELECT 'grant', role, max(granted_at) FROM user_roles WHERE user_name = $user GROUP BY role
UNION ALL
SELECT 'revocation', role, max(revoked_at) FROM role_revocations WHERE user_name = $user
GROUP BY role
"""


def current_role(con: duckdb.DuckDBPyConnection, user: str) -> str | None:
    """The user's roles as one text (``"admin, qa_lead"``), None when they hold none."""
    return roles_text(current_roles(con, user)) or None


def roles_text(roles: frozenset[str] | set[str]) -> str:
    """Roles in :data:`ROLES` order, comma separated ("" for none)."""
    return ", ".join(r for r in ROLES if r in roles)


#: (user_name, role) of every role held now; a WHERE on user_name may follow.
_HELD_SQL = """
SELECT * FROM (
    SELECT DISTINCT g.user_name, g.role FROM user_roles g
    WHERE g.role <> 'none'
      AND NOT EXISTS (SELECT 1 FROM role_revocations r WHERE r.user_name = g.user_name
                      AND r.role = g.role AND r.revoked_at >= g.granted_at)
      AND NOT EXISTS (SELECT 1 FROM user_roles n WHERE n.user_name = g.user_name
                      AND n.role = 'none' AND n.granted_at >= g.granted_at)
      AND g.granted_at = (SELECT max(h.granted_at) FROM user_roles h
                          WHERE h.user_name = g.user_name AND h.role = g.role)
)"""


def allowed(roles: str | frozenset[str] | None, action: str) -> bool:
    """Whether a role, or any of a set of roles, may do ``action`` (:data:`PERMISSIONS`)."""
    if action not in PERMISSIONS:
        raise InputError(f"unknown action {action!r}; known: {', '.join(PERMISSIONS)}")
    held = frozenset() if roles is None else frozenset({roles}) if isinstance(roles, str) \
        else roles
    return bool(held & PERMISSIONS[action])


def require(con: duckdb.DuckDBPyConnection, actor: str, action: str) -> str:
    """Return the role of ``actor``'s that allows ``action`` (the least privileged one);
    raise :class:`PermissionDenied` if none does.
    """
    actor = user_name(actor, what="acting user")
    roles = current_roles(con, actor)
    for role in ROLES:  # least privilege first: the role recorded with the act
        if role in roles and role in PERMISSIONS[action]:
            return role
    needed = [r for r in ROLES if r in PERMISSIONS[action]]  # least privilege first
    held = (f"role{'s' if len(roles) > 1 else ''} {roles_text(roles)}" if roles
            else "no role")
    raise PermissionDenied(
        f"{actor} ({held}) may not {ACTIONS[action]}: that needs the role"
        f" {' or '.join(needed)}; an admin can grant it with"
        f" `fieldtrust users grant {actor} {needed[0]} --as ADMIN`"
    )


def grant_role(con: duckdb.DuckDBPyConnection, actor: str, user: str, role: str) -> RoleGrant:
    """Add ``role`` to the roles ``user`` holds (``none`` takes them all away), as ``actor``.

    Roles are a set: granting qa_lead to an admin keeps them admin, so one
    person can run a trial alone. Only an admin may grant, except the very
    first grant of a store, which anyone may make and which must be ``admin``
    (bootstrap). The last admin cannot lose the role, so the store always has
    someone who can grant roles. :func:`revoke_role` removes one role.

    Raises
    ------
    PermissionDenied
        ``actor`` is not an admin, or the grant would leave no admin.
    InputError
        ``role`` is not one of :data:`ROLES` or ``none``.
    """
    actor = user_name(actor, what="acting user")
    user = user_name(user)
    if role not in (*ROLES, "none"):
        raise InputError(f"role {role!r} is not one of {', '.join(ROLES)}, none")

    def work(tx: duckdb.DuckDBPyConnection) -> RoleGrant:
        row = first_row(tx.execute("SELECT count(*) FROM user_roles").fetchall())
        if row is not None and row[0] == 0:
            if role != "admin":
                raise PermissionDenied(
                    f"the store has no users yet: the first grant must make an admin"
                    f" (e.g. `fieldtrust init --admin {actor}`), not {role}"
                )
        else:
            require(tx, actor, "grant_roles")
            if role == "none":
                _refuse_removing_last_admin(tx, user)
        granted_at = _append_role_change(tx, "user_roles", _GRANT_SQL, user, role, actor)
        return RoleGrant(user, role, actor, granted_at)

    return write_with_retry(con, work, what=f"granting {role} to {user}")


def bootstrap_admin(con: duckdb.DuckDBPyConnection, name: str) -> RoleGrant:
    """Make ``name`` the first admin of a store that has no users yet."""
    return grant_role(con, name, name, "admin")


def first_admin(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Make ``name`` the store's first admin; False when they already are its admin.

    Raises
    ------
    PermissionDenied
        The store already has users and ``name`` is not one of its admins.
    """
    name = user_name(name, what="admin name")
    existing = admins(con)
    if name in existing:
        return False
    if list_users(con):
        raise PermissionDenied(
            f"this store already has users (admins: {', '.join(existing) or 'none'}):"
            f" ask an admin to run `fieldtrust users grant {name} admin`"
        )
    bootstrap_admin(con, name)
    return True


def revoke_role(
    con: duckdb.DuckDBPyConnection, actor: str, user: str, role: str
) -> RoleRevocation:
    """Take ``role`` from ``user`` (their other roles stay), acting as ``actor``, an admin.

    The revocation is a row of its own (``role_revocations``, chained like the
    grants), so the history keeps who held what when.

    Raises
    ------
    PermissionDenied
        ``actor`` is not an admin, or ``user`` is the last admin and ``role`` is admin.
    InputError
        ``role`` is not one of :data:`ROLES`, or ``user`` does not hold it.
    """
    actor = user_name(actor, what="acting user")
    user = user_name(user)
    if role not in ROLES:
        raise InputError(f"role {role!r} is not one of {', '.join(ROLES)}")

    def work(tx: duckdb.DuckDBPyConnection) -> RoleRevocation:
        require(tx, actor, "grant_roles")
        held = current_roles(tx, user)
        if role not in held:
            raise InputError(
                f"{user} does not hold the role {role}"
                f" (holds: {roles_text(held) or 'no role'}); nothing to revoke"
            )
        if role == "admin":
            _refuse_removing_last_admin(tx, user)
        revoked_at = _append_role_change(
            tx, "role_revocations", _REVOKE_SQL, user, role, actor
        )
        return RoleRevocation(user, role, actor, revoked_at)

    return write_with_retry(con, work, what=f"revoking {role} from {user}")


@dataclass(frozen=True)
class RoleRevocation:
    """One row of ``role_revocations``: ``revoked_by`` took ``role`` from ``user_name``."""

    user_name: str
    role: str
    revoked_by: str
    revoked_at: dt.datetime


@dataclass(frozen=True)
class UserRoles:
    """A user and the roles they hold now (empty when every role was taken away)."""

    user_name: str
    roles: tuple[str, ...]

    @property
    def role(self) -> str:
        """The roles as one text, ``none`` when empty (for tables and pickers)."""
        return ", ".join(self.roles) or "none"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``fieldtrust users list --json`` prints for each user)."""
        return {"user_name": self.user_name, "roles": list(self.roles)}


@dataclass(frozen=True)
class RoleChange:
    """One entry of the role history: a grant or a revocation."""

    user_name: str
    change: str  # "grant" or "revoke"
    role: str
    changed_by: str
    changed_at: dt.datetime

    def to_dict(self) -> dict[str, Any]:
        """One row of ``fieldtrust users list --history`` (the time stays a datetime)."""
        return dataclasses.asdict(self)


def list_users(con: duckdb.DuckDBPyConnection) -> list[UserRoles]:
    """Everyone ever granted a role with the roles they hold now, sorted by user name."""
    held: dict[str, set[str]] = {
        str(name): set() for (name,) in con.execute(
            "SELECT DISTINCT user_name FROM user_roles"
        ).fetchall()
    }
    for name, role in con.execute(_HELD_SQL).fetchall():
        held[str(name)].add(str(role))
    return [
        UserRoles(name, tuple(r for r in ROLES if r in held[name])) for name in sorted(held)
    ]


def labelling_users(con: duckdb.DuckDBPyConnection) -> frozenset[str]:
    """Everyone who holds, or once held, a role that may ``label``.

    What a label's reviewer must be when the label comes from a file: a person
    of this store, not a placeholder. Held once is enough, so the labels of a
    reviewer who has left still import from history.
    """
    roles = sorted(PERMISSIONS["label"])
    rows = con.execute(
        "SELECT DISTINCT user_name FROM user_roles WHERE list_contains(?, role)", [roles]
    ).fetchall()
    return frozenset(str(r[0]) for r in rows)


def role_history(con: duckdb.DuckDBPyConnection) -> list[RoleChange]:
    """Every grant and revocation ever made, oldest first."""
    rows = con.execute(
        "SELECT user_name, 'grant' AS change, role, granted_by, granted_at FROM user_roles"
        " UNION ALL"
        " SELECT user_name, 'revoke', role, revoked_by, revoked_at FROM role_revocations"
        " ORDER BY 5, 1, 2"
    ).fetchall()
    return [RoleChange(*row) for row in rows]


def admins(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The users holding the admin role now."""
    return [u.user_name for u in list_users(con) if "admin" in u.roles]


def _refuse_removing_last_admin(con: duckdb.DuckDBPyConnection, user: str) -> None:
    if "admin" not in current_roles(con, user):
        return
    if len(admins(con)) <= 1:
        raise PermissionDenied(
            f"{user} is the last admin: grant admin to someone else before taking it from {user}"
        )


_GRANT_SQL = (
    "INSERT INTO user_roles (user_name, role, granted_by, granted_at) VALUES (?, ?, ?, ?)"
    " RETURNING *"
)
_REVOKE_SQL = (
    "INSERT INTO role_revocations (user_name, role, revoked_by, revoked_at)"
    " VALUES (?, ?, ?, ?) RETURNING *"
)


def _append_role_change(
    tx: duckdb.DuckDBPyConnection, table: str, sql: str, user: str, role: str, actor: str
) -> dt.datetime:
    """Insert one chained row (user, role, by, at) of ``table`` with ``sql``; returns its time."""
    at = _after_latest(tx, user)
    chain_returned(tx, table, tx.execute(sql, [user, role, actor, at]))
    return at


def _after_latest(con: duckdb.DuckDBPyConnection, user: str) -> dt.datetime:
    # Changes in the same microsecond would make "latest" ambiguous: keep them ordered.
    row = first_row(con.execute(
        "SELECT max(t_) FROM (SELECT granted_at AS t_ FROM user_roles WHERE user_name = $u"
        " UNION ALL SELECT revoked_at FROM role_revocations WHERE user_name = $u)", {"u": user}
    ).fetchall())
    now = utc_now()
    if row is not None and row[0] is not None and row[0] >= now:
        return row[0] + dt.timedelta(microseconds=1)  # type: ignore[no-any-return]
    return now
