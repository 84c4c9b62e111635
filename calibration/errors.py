"""Errors the calibration package raises on purpose."""

from __future__ import annotations

from fieldtrust.store.errors import FieldtrustError


class CalibrationError(FieldtrustError):
    """Root of the calibration package's errors."""


class CalibrationInputError(CalibrationError, ValueError):
    """An argument or input array is unusable; the message names it and what to do."""
