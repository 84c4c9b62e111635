"""Plausible wrong values for seeds: the kinds of silent error that occur (STATS.md section 13).

A seed measures the reviewers' miss rate only if it is missed as often as a
real error would be, so each wrong value is one a model really makes:

- ``sibling_field``: another field's value of the same document, of the same
  kind (a number for a number, a date for a date): the total in the tax field;
- ``digit_swap``: two neighbouring, different digits exchanged (``1,243`` for
  ``1,423``);
- ``neighbour_date``: the same date a day or two off (``2026-03-14`` for
  ``2026-03-13``).

Pure functions on text: which kind a host gets, and where the swap or the
shift falls, come from a number ``u`` in [0, 1) the caller derives from the
sample's seed, so the same draw makes the same seeds.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: The kinds of seed, as stored in ``seed_items.seed_kind``.
SEED_KINDS: tuple[str, ...] = ("sibling_field", "digit_swap", "neighbour_date")

_NUMBER = re.compile(r"^[^\d]{0,4}-?\d[\d,.' ]*[^\d]{0,4}$")
_ISO_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")
_SHIFTS = (-2, -1, 1, 2)


@dataclass(frozen=True)
class WrongValue:
    """A seed's value: what is shown, the kind of error it mimics, the field it came from."""

    value: str
    kind: str
    source_field: str | None = None


def wrong_value(
    value: str, siblings: Sequence[tuple[str, str]], u: float
) -> WrongValue | None:
    """A plausible wrong value for ``value``, or None when no kind applies.

    Parameters
    ----------
    value
        The host extraction's value (status ``present``).
    siblings
        ``(field, value)`` of the document's other fields.
    u
        A number in [0, 1) that picks the kind among those that apply, then
        the sibling, the digits or the shift.

    Returns
    -------
    WrongValue or None
        Never equal to ``value`` (compared without case and outer spaces).
    """
    options = [
        option
        for option in (_from_sibling(value, siblings, u), _swap_digits(value, u),
                       _shift_date(value, u))
        if option is not None and not _same(option.value, value)
    ]
    if not options:
        return None
    return options[min(int(u * len(options)), len(options) - 1)]


def _same(a: str, b: str) -> bool:
    return a.strip().casefold() == b.strip().casefold()


def _kind_of(text: str) -> str:
    if _ISO_DATE.fullmatch(text.strip()):
        return "date"
    if _NUMBER.match(text.strip()):
        return "number"
    return "text"


def _from_sibling(value: str, siblings: Sequence[tuple[str, str]], u: float) -> WrongValue | None:
    kind = _kind_of(value)
    if kind == "text":  # a name in a name field is too easy to tell from context
        return None
    fitting = sorted((f, v) for f, v in siblings
                     if v is not None and _kind_of(v) == kind and not _same(v, value))
    if not fitting:
        return None
    source, shown = fitting[int(u * 7919) % len(fitting)]  # a prime: not the kind's choice again
    return WrongValue(shown, "sibling_field", source)


def _swap_digits(value: str, u: float) -> WrongValue | None:
    places = [i for i in range(len(value) - 1)
              if value[i].isdigit() and value[i + 1].isdigit() and value[i] != value[i + 1]]
    if not places:
        return None
    i = places[int(u * 104729) % len(places)]
    return WrongValue(value[:i] + value[i + 1] + value[i] + value[i + 2:], "digit_swap")


def _shift_date(value: str, u: float) -> WrongValue | None:
    match = _ISO_DATE.search(value)
    if match is None:
        return None
    try:
        day = dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None
    shifted = day + dt.timedelta(days=_SHIFTS[int(u * 1301) % len(_SHIFTS)])
    return WrongValue(value[:match.start()] + shifted.isoformat() + value[match.end():],
                      "neighbour_date")
