"""Setting the store's policy bar: admins only, chained like every write.

The one writer of ``policy_settings``. The bar itself (its settings, their
defaults and allowed values) and its reader are
:mod:`fieldtrust.store.bar`; each change is a new, chained row and the newest
is in force.
"""

from __future__ import annotations

import uuid

import duckdb
from fieldtrust.store.access import require, user_name
from fieldtrust.store.bar import SETTINGS, PolicyBar, Value, policy_bar, setting_problem
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import write_with_retry

from fieldtrust.errors import InputError


def set_policy_settings(
    con: duckdb.DuckDBPyConnection, actor: str, **changes: Value
) -> PolicyBar:
    """Change some settings of the store's bar (the others keep their value); admins only.

    Parameters
    ----------
    actor
        Who changes them; needs the ``set_policy`` permission (admin).
    **changes
        Any of :data:`fieldtrust.store.bar.SETTINGS`.

    Returns
    -------
    PolicyBar
        The policy now in force.

    Raises
    ------
    PermissionDenied
        ``actor`` is not an admin; nothing is written.
    InputError
        An unknown setting or a value out of range; nothing is written.
    """
    actor = user_name(actor, what="acting user")
    unknown = sorted(set(changes) - set(SETTINGS))
    if unknown:
        raise InputError(
            f"no policy setting {unknown[0]!r}; the settings are {', '.join(SETTINGS)}"
        )

    def work(tx: duckdb.DuckDBPyConnection) -> PolicyBar:
        require(tx, actor, "set_policy")
        for name, value in changes.items():
            problem = setting_problem(name, value)
            if problem:
                raise InputError(f"policy setting {name} = {value!r} {problem}")
        now = utc_now()
        bar = policy_bar(tx).bar.replaced(changes)
        if bar.stability_weeks > bar.weeks:
            raise InputError(
                f"policy setting stability_weeks = {bar.stability_weeks} is longer than the"
                f" window weeks = {bar.weeks}; lower it or widen the window"
            )
        columns = ", ".join(SETTINGS)
        inserted = tx.execute(
            f"INSERT INTO policy_settings (setting_id, {columns}, set_by, set_at)"
            f" VALUES (?, {', '.join('?' for _ in SETTINGS)}, ?, ?) RETURNING *",
            [str(uuid.uuid4()), *bar.values().values(), actor, now],
        )
        chain_returned(tx, "policy_settings", inserted)
        return PolicyBar(bar, actor, now)

    return write_with_retry(con, work, what="changing the policy settings")
