"""The demo's people, in one place, and making a demo store ready to explore.

:data:`DEMO_USERS` are the people of every role the demo store is built with
(the simulated reviewers act as them) and the dashboard's demo mode offers.
:func:`ensure_demo_ready` adds them, and fitted recalibration maps, where a
demo store lacks them. Only a demo store is touched: one whose ``demo_truth``
table holds the demo generator's hidden truth. A real store's users are
granted by its admin and its maps fitted by ``fieldtrust recalibrate``.
Everything goes through the library (:mod:`fieldtrust.store.access`,
:mod:`fieldtrust.calibration.recalibrate`), checked and append-only like any
other write.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import duckdb

from fieldtrust import store
from fieldtrust.calibration.recalibrate import fit_recalibration
from fieldtrust.demo.truth import truth_rows
from fieldtrust.store.access import bootstrap_admin, current_roles, grant_role, require
from fieldtrust.store.signing import create_key
from fieldtrust.store.sql import quote_ident

#: root grants roles, quinn draws samples and adjudicates, maya decides on automation.
ADMIN, QA_LEAD, MANAGER = "root", "quinn", "maya"
#: The simulated reviewers.
REVIEWERS: tuple[str, ...] = ("ana", "ben", "chloe")
#: (user, role), the admin first: every demo person.
DEMO_USERS: tuple[tuple[str, str], ...] = (
    (ADMIN, "admin"),
    (QA_LEAD, "qa_lead"),
    (MANAGER, "manager"),
    *((name, "reviewer") for name in REVIEWERS),
)


def ensure_demo_ready(path: str | os.PathLike[str]) -> list[str]:
    """Demo users and recalibration maps where missing; what was added (empty: nothing).

    Does nothing on a store without demo truth (a real store).
    """
    con = store.connect(path)
    try:
        if truth_rows(con) == 0:
            return []
        added = [f"user {name}" for name in _ensure_users(con)]
        if _count(con, "recalibration_maps") == 0:
            fitted = fit_recalibration(con)
            added += [f"map {r.doc_type}/{r.field}" for r in fitted]
        return added
    finally:
        con.close()


def demo_signing_key(path: str | os.PathLike[str]) -> Path | None:
    """The demo store's own signing key, ``STORE.demo-signing.key`` (made on first use); None
    for a real store, whose decisions are signed with the team's key only.

    So that a manager can approve in ``fieldtrust serve --demo`` without setting
    up a key first. It signs this demo store's decisions and nothing else: a
    real store's ``verify`` trusts only the keys its settings name.
    """
    con = store.connect(path, read_only=True)
    try:
        if _count(con, "demo_truth") == 0:
            return None
    finally:
        con.close()
    key = Path(f"{path}.demo-signing.key")
    if not key.exists():
        create_key(key)
    return key


def grant_demo_roles(con: duckdb.DuckDBPyConnection, reviewers: Sequence[str]) -> None:
    """Give the demo people, with ``reviewers`` as the reviewers, their roles (grants checked)."""
    if not current_roles(con, ADMIN):
        bootstrap_admin(con, ADMIN)
    wanted = [(QA_LEAD, "qa_lead"), (MANAGER, "manager"), *((r, "reviewer") for r in reviewers)]
    for name, role in wanted:
        if role not in current_roles(con, name):
            grant_role(con, ADMIN, name, role)
    for name in reviewers:
        require(con, name, "label")


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {quote_ident(table)}").fetchall()
    return int(row[0][0])


def _ensure_users(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Grant the demo users their roles where missing; the names granted now."""
    granted = []
    admin = ADMIN
    if not current_roles(con, admin):
        if _count(con, "user_roles") > 0:
            return []  # someone else administers this store: leave it alone
        bootstrap_admin(con, admin)
        granted.append(admin)
    for name, role in DEMO_USERS[1:]:
        if not current_roles(con, name):
            grant_role(con, admin, name, role)
            granted.append(name)
    return granted
