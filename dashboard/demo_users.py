"""The demo store's people, so the demo-mode picker has someone for every role.

Only a demo store gets them: one whose ``demo_truth`` table holds the demo
generator's hidden truth. A real store's users are granted by its admin.
Grants go through :mod:`labels.roles` like any other (append-only, checked).
"""

from __future__ import annotations

import os

import store
from labels.roles import bootstrap_admin, current_role, grant_role

#: (user, role). ``root`` is the admin who grants the others.
DEMO_USERS: tuple[tuple[str, str], ...] = (
    ("root", "admin"),
    ("quinn", "qa_lead"),
    ("maya", "manager"),
    ("ana", "reviewer"),
    ("ben", "reviewer"),
    ("chloe", "reviewer"),
)


def ensure_demo_users(path: str | os.PathLike[str]) -> list[str]:
    """Grant the demo users their roles where missing; return the names granted now.

    Does nothing on a store without demo truth (a real store).
    """
    con = store.connect(path)
    try:
        row = con.execute("SELECT count(*) FROM demo_truth").fetchone()
        if row is None or row[0] == 0:
            return []
        granted = []
        admin = DEMO_USERS[0][0]
        if current_role(con, admin) is None:
            users = con.execute("SELECT count(*) FROM user_roles").fetchone()
            if users is not None and users[0] == 0:
                bootstrap_admin(con, admin)
                granted.append(admin)
            else:
                return []  # someone else administers this store: leave it alone
        for name, role in DEMO_USERS[1:]:
            if current_role(con, name) is None:
                grant_role(con, admin, name, role)
                granted.append(name)
        return granted
    finally:
        con.close()
