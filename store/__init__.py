"""The DuckDB store: schema, connections, ingest and the shared reads."""

from fieldtrust.store.connection import connect, cursor, open_store, transaction, utc_now
from fieldtrust.store.errors import FieldtrustError, StoreError, StoreLockedError, ValidationError
from fieldtrust.store.scope import Scope, last_weeks, latest_week

__all__ = [
    "FieldtrustError",
    "Scope",
    "StoreError",
    "StoreLockedError",
    "ValidationError",
    "connect",
    "cursor",
    "last_weeks",
    "latest_week",
    "open_store",
    "transaction",
    "utc_now",
]
