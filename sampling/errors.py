"""Errors raised by the sampling package."""

from __future__ import annotations

from fieldtrust.store.errors import FieldtrustError


class SamplingError(FieldtrustError, ValueError):
    """A sample cannot be drawn, found or estimated from as asked."""


class DesignError(SamplingError):
    """A sampling design is invalid; the message names the key, the value and the fix."""
