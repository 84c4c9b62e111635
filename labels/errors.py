"""Errors the labels package raises on purpose (all are ``FieldtrustError``)."""

from __future__ import annotations

from fieldtrust.store.errors import FieldtrustError


class LabelError(FieldtrustError, ValueError):
    """A verdict, assignment or skip that cannot be recorded as given; nothing was written."""


class LabelFieldError(LabelError):
    """A verdict field that cannot be recorded; ``column`` names the field at fault.

    Labels import reports it as ``row N, column COLUMN: ...``.
    """

    def __init__(self, column: str, message: str) -> None:
        super().__init__(message)
        self.column = column


class LabelConflict(FieldtrustError, ValueError):
    """Someone else's label is already there: supersede it instead of adding another."""

