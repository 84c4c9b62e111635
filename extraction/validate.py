"""Checks on a tool input that the schema cannot express.

Two kinds, treated differently by the loop:

* **format problems** (:func:`format_problems`): a value breaks a rule the
  prompt states (date not ISO, confidence outside [0, 1], an empty string).
  The model is asked again a small number of times; if it keeps breaking the
  rule the document fails with kind ``validation``.
* **conflicts** (:func:`conflicts`): well-formed values that disagree with
  each other (the line items do not add up to the stated total). The model is
  asked to re-read once; a conflict that persists is real (documents do print
  wrong totals) and is stored with the conflict flag for a human to review,
  never "fixed" and never looped on.

The computed total is computed here, by code, never asked of the model.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from fieldtrust.extraction.schemas import CATEGORIES, UNCLEAR, DocSchema, FieldSpec

_DECIMAL = re.compile(r"-?\d+(\.\d+)?")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_CURRENCY = re.compile(r"[A-Z]{3}")

#: Largest gap between stated and computed totals still taken as equal.
TOTAL_TOLERANCE = Decimal("0.01")


@dataclass(frozen=True)
class Conflict:
    """Values that disagree: which fields, what is wrong, and the code's own figure."""

    fields: tuple[str, ...]
    message: str
    computed_value: str | None = None


def format_problems(schema: DocSchema, tool_input: Mapping[str, Any]) -> list[str]:
    """Every format rule ``tool_input`` breaks, one readable line each (empty: none)."""
    problems: list[str] = []
    unknown = sorted(set(tool_input) - set(schema.field_names))
    if unknown:
        problems.append(f"unknown fields {', '.join(unknown)}: record only the schema's fields")
    for spec in schema.fields:
        entry = tool_input.get(spec.name)
        if not isinstance(entry, Mapping):
            problems.append(f"{spec.name}: missing; give value (null if absent) and confidence")
            continue
        problems.extend(_confidence_problems(spec.name, entry.get("confidence")))
        problems.extend(_page_problems(spec.name, entry.get("page")))
        if spec.kind == "line_items":
            problems.extend(_line_item_problems(entry.get("items")))
        elif spec.kind == "category":
            problems.extend(_category_problems(entry))
        else:
            problems.extend(_value_problems(spec, entry.get("value")))
    return problems


def _confidence_problems(name: str, confidence: object) -> list[str]:
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        return [f"{name}.confidence: {confidence!r} is not a number between 0 and 1"]
    if not 0.0 <= float(confidence) <= 1.0:
        return [f"{name}.confidence: {confidence} is outside [0, 1]"]
    return []


def _page_problems(name: str, page: object) -> list[str]:
    # Inputs recorded before the schema asked for a page have none: no page, no problem.
    if page is None:
        return []
    if isinstance(page, bool) or not isinstance(page, int) or page < 0:
        return [f"{name}.page: {page!r} is not a page number (1 for the first page, 0 if null)"]
    return []


def _value_problems(spec: FieldSpec, value: object) -> list[str]:
    where = f"{spec.name}.value"
    if value is None or value == UNCLEAR:
        return []
    if not isinstance(value, str):
        return [f"{where}: {value!r} is not a string; give text, null or '{UNCLEAR}'"]
    if not value.strip():
        return [f"{where}: empty string; use null if absent or '{UNCLEAR}' if unreadable"]
    if spec.kind == "date":
        return _date_problems(where, value)
    if spec.kind == "amount" and not _DECIMAL.fullmatch(value):
        return [f"{where}: {value!r} is not a decimal string like '1234.50'"]
    if spec.kind == "currency" and not _CURRENCY.fullmatch(value):
        return [f"{where}: {value!r} is not an ISO 4217 code like 'EUR'"]
    return []


def _date_problems(where: str, value: str) -> list[str]:
    if not _DATE.fullmatch(value):
        return [f"{where}: {value!r} is not an ISO date yyyy-mm-dd"]
    try:
        dt.date.fromisoformat(value)
    except ValueError:
        return [f"{where}: {value!r} is not a calendar date"]
    return []


def _category_problems(entry: Mapping[str, Any]) -> list[str]:
    value, detail = entry.get("value"), entry.get("detail")
    if value is None:
        return [f"category.value: null; choose a category, 'other' or '{UNCLEAR}'"]
    if value != UNCLEAR and value not in CATEGORIES:
        return [f"category.value: {value!r} is not one of {', '.join(CATEGORIES)}"]
    if value == "other" and not (isinstance(detail, str) and detail.strip()):
        return ["category.detail: 'other' needs a detail saying what the spending is"]
    return []


def _line_item_problems(items: object) -> list[str]:
    if items is None:
        return []
    if not isinstance(items, list):
        return [f"line_items.items: {type(items).__name__} is not a list or null"]
    problems: list[str] = []
    for index, item in enumerate(items, start=1):
        where = f"line_items.items[{index}]"
        if not isinstance(item, Mapping):
            problems.append(f"{where}: not an object")
            continue
        value = item.get("amount")
        if value != UNCLEAR and not (isinstance(value, str) and _DECIMAL.fullmatch(value)):
            problems.append(f"{where}.amount: {value!r} is not a decimal string")
    return problems


def amount(value: object) -> Decimal | None:
    """``value`` as a Decimal when it is a well-formed amount, else None."""
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        return None
    try:
        return Decimal(value)
    except InvalidOperation:  # pragma: no cover - the pattern already rules this out
        return None


def line_items_sum(tool_input: Mapping[str, Any]) -> Decimal | None:
    """Sum of the line amounts; None when there are none or one is unreadable."""
    items = (tool_input.get("line_items") or {}).get("items")
    if not isinstance(items, list) or not items:
        return None
    amounts = [amount(item.get("amount")) if isinstance(item, Mapping) else None for item in items]
    if any(a is None for a in amounts):
        return None
    return sum((a for a in amounts if a is not None), Decimal(0))


def _value(tool_input: Mapping[str, Any], name: str) -> object:
    entry = tool_input.get(name)
    return entry.get("value") if isinstance(entry, Mapping) else None


def conflicts(tool_input: Mapping[str, Any]) -> list[Conflict]:
    """Well-formed values that disagree with each other (call after format checks).

    The stated total must equal the line items' sum, either as is (prices
    that include tax) or plus the stated tax, within :data:`TOTAL_TOLERANCE`.
    Nothing is checked when a needed value is null or unclear: an absent
    value is not a conflict.
    """
    found: list[Conflict] = []
    total = amount(_value(tool_input, "total"))
    tax = amount(_value(tool_input, "tax"))
    computed = line_items_sum(tool_input)
    if total is not None and computed is not None:
        candidates = [computed] if tax is None else [computed, computed + tax]
        if all(abs(total - c) > TOTAL_TOLERANCE for c in candidates):
            with_tax = "" if tax is None else f" ({_fmt(computed + tax)} with tax {_fmt(tax)})"
            found.append(
                Conflict(
                    ("total", "line_items"),
                    f"line items sum to {_fmt(computed)}{with_tax}, stated total is {_fmt(total)}",
                    _fmt(computed),
                )
            )
    if tax is not None and total is not None and tax == total and total != 0:
        found.append(
            Conflict(
                ("tax",),
                f"tax equals the stated total ({_fmt(total)}); record the tax line as printed,"
                " or null if the document has no tax line",
            )
        )
    return found


def _fmt(value: Decimal) -> str:
    return format(value, "f")
