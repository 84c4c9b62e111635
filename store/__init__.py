"""The DuckDB store: schema, connections, access, history chain and the shared reads."""

from fieldtrust.store.connection import (
    before_open,
    connect,
    cursor,
    open_store,
    others_waiting,
    transaction,
    utc_now,
)
from fieldtrust.store.scope import Scope, last_weeks, latest_week

__all__ = [
    "Scope",
    "before_open",
    "connect",
    "cursor",
    "last_weeks",
    "latest_week",
    "open_store",
    "others_waiting",
    "transaction",
    "utc_now",
]
