"""Errors the governance package raises on purpose (all are ``FieldtrustError``)."""

from __future__ import annotations

from fieldtrust.store.errors import FieldtrustError


class DecisionError(FieldtrustError, ValueError):
    """A decision that cannot be recorded as given; nothing was written."""
