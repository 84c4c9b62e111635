"""Make a demo store ready to explore: people for every role, fitted recalibration maps.

Only a demo store is touched: one whose ``demo_truth`` table holds the demo
generator's hidden truth. A real store's users are granted by its admin and
its maps fitted by ``fieldtrust recalibrate``. Everything goes through the
library (:mod:`fieldtrust.labels.roles`, :mod:`fieldtrust.calibration.recalibrate`), checked and
append-only like any other write.
"""

from __future__ import annotations

import os

import duckdb
from fieldtrust.calibration.recalibrate import fit_recalibration
from fieldtrust.labels.roles import bootstrap_admin, current_roles, grant_role
from fieldtrust.store.sql import quote_ident

from fieldtrust import store

#: (user, role). ``root`` is the admin who grants the others.
DEMO_USERS: tuple[tuple[str, str], ...] = (
    ("root", "admin"),
    ("quinn", "qa_lead"),
    ("maya", "manager"),
    ("ana", "reviewer"),
    ("ben", "reviewer"),
    ("chloe", "reviewer"),
)


def ensure_demo_ready(path: str | os.PathLike[str]) -> list[str]:
    """Demo users and recalibration maps where missing; what was added (empty: nothing).

    Does nothing on a store without demo truth (a real store).
    """
    con = store.connect(path)
    try:
        if _count(con, "demo_truth") == 0:
            return []
        added = [f"user {name}" for name in _ensure_users(con)]
        if _count(con, "recalibration_maps") == 0:
            fitted = fit_recalibration(con)
            added += [f"map {r.doc_type}/{r.field}" for r in fitted]
        return added
    finally:
        con.close()


def _count(con: duckdb.DuckDBPyConnection, table: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {quote_ident(table)}").fetchall()
    return int(row[0][0])


def _ensure_users(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Grant the demo users their roles where missing; the names granted now."""
    granted = []
    admin = DEMO_USERS[0][0]
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
