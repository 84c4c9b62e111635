"""Changing the policy settings an approval is held to: admins only, chained like every write.

The reader is :func:`fieldtrust.store.policy_settings.current_policy_settings`.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Unpack

import duckdb
from fieldtrust.store.access import require, user_name
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.policy_settings import (
    POLICY_FIELDS,
    PolicyChanges,
    PolicySettings,
    current_policy_settings,
)
from fieldtrust.store.retry import write_with_retry

from fieldtrust.errors import InputError


def _checked(settings: PolicySettings) -> None:
    """A :class:`InputError` naming the setting and value that is out of range."""
    rules = (
        ("target", 0 < settings.target < 1, "strictly between 0 and 1"),
        ("confidence", 0 < settings.confidence < 1, "strictly between 0 and 1"),
        ("n_min", settings.n_min >= 1, "at least 1"),
        ("stability_weeks", settings.stability_weeks >= 1, "at least 1"),
        ("version_share", 0 < settings.version_share <= 1, "in (0, 1]"),
        ("min_week_labels", settings.min_week_labels >= 1, "at least 1"),
        ("prior_error", 0 <= settings.prior_error < 1, "in [0, 1)"),
        ("weeks", settings.weeks >= 1, "at least 1"),
    )
    for name, ok, rule in rules:
        if not ok:
            raise InputError(f"policy setting {name} = {getattr(settings, name)!r} must be {rule}")
    if settings.stability_weeks > settings.weeks:
        raise InputError(
            f"policy setting stability_weeks = {settings.stability_weeks} is longer than the"
            f" window weeks = {settings.weeks}; lower it or widen the window"
        )


def set_policy_settings(
    con: duckdb.DuckDBPyConnection, actor: str, **changes: Unpack[PolicyChanges]
) -> PolicySettings:
    """Change some policy settings (the others keep their current value); admins only.

    Parameters
    ----------
    con
        A read-write store connection.
    actor
        Who changes them; needs the ``set_policy`` permission (admin).
    **changes
        Any of :data:`~fieldtrust.store.policy_settings.POLICY_FIELDS`.

    Returns
    -------
    PolicySettings
        The settings now in force.

    Raises
    ------
    PermissionDenied
        ``actor`` is not an admin; nothing is written.
    InputError
        An unknown setting or a value out of range; nothing is written.
    """
    actor = user_name(actor, what="acting user")
    unknown = sorted(set(changes) - set(POLICY_FIELDS))
    if unknown:
        raise InputError(
            f"no policy setting {unknown[0]!r}; the settings are {', '.join(POLICY_FIELDS)}"
        )

    def work(tx: duckdb.DuckDBPyConnection) -> PolicySettings:
        require(tx, actor, "set_policy")
        now = utc_now()
        new = dataclasses.replace(current_policy_settings(tx), **changes, set_by=actor,
                                  set_at=now)
        _checked(new)
        columns = ", ".join(POLICY_FIELDS)
        inserted = tx.execute(
            f"INSERT INTO policy_settings (setting_id, {columns}, set_by, set_at)"
            f" VALUES (?, {', '.join('?' for _ in POLICY_FIELDS)}, ?, ?) RETURNING *",
            [str(uuid.uuid4()), *(getattr(new, f) for f in POLICY_FIELDS), actor, now],
        )
        chain_returned(tx, "policy_settings", inserted)
        return new

    return write_with_retry(con, work, what="changing the policy settings")
