"""Errors the calibration package raises on purpose."""

from __future__ import annotations

from fieldtrust.store.errors import FieldtrustError


class CalibrationError(FieldtrustError):
    """Root of the calibration package's errors."""


class CalibrationInputError(CalibrationError, ValueError):
    """An argument or input array is unusable; the message names it and what to do."""


def check_fraction(name: str, value: float, hint: str = "") -> float:
    """``value`` as a float, or a :class:`CalibrationInputError` naming it outside (0, 1)."""
    if not 0.0 < value < 1.0:
        raise CalibrationInputError(
            f"{name} {value!r} is not strictly between 0 and 1" + (f"; {hint}" if hint else "")
        )
    return float(value)
