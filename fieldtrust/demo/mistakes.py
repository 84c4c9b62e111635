"""What the demo model writes when it is wrong, and why (in the labels taxonomy).

Each mistake returns the extracted value and status, plus the error type a
careful reviewer would record (labels.taxonomy.ERROR_TYPES) and a short
detail; the hidden truth keeps both so simulated reviewers label like people.
"""

from __future__ import annotations

import datetime as dt
from typing import NamedTuple

from fieldtrust.demo.profiles import HANDWRITTEN_TAX_ERRORS, PRINTED_TAX_ERRORS
from fieldtrust.demo.values import (
    BUYERS,
    CURRENCIES,
    MERCHANTS,
    OWN_COMPANY,
    PAYMENTS,
    Documents,
    dropped_decimal,
    misread_digit,
    misread_letter,
    wrong_choice,
)

HANDWRITTEN = 2  # index of handwritten_receipt in profiles.DOC_TYPES


class Mistake(NamedTuple):
    value: str | None
    status: str
    error_type: str
    detail: str


def _date_mistake(truth: str, u: float, v: float) -> Mistake:
    day = dt.date.fromisoformat(truth)
    if u < 0.5 and day.day <= 12 and day.day != day.month:
        swapped = day.replace(month=day.day, day=day.month).isoformat()
        return Mistake(swapped, "present", "normalisation", "day and month swapped")
    shift = (-1, 1, -10, 10, 3)[int(v * 5)]
    return Mistake(
        (day + dt.timedelta(days=shift)).isoformat(), "present", "misread_characters", "day misread"
    )


def _tax_mistake(
    truth: str | None, total: str, rate: float, handwritten: bool, u: float, v: float
) -> Mistake:
    if truth is None:  # the document has no tax line
        if handwritten:
            return Mistake(total, "present", "total_copied_into_tax", "no tax line; total copied")
        made_up = f"{float(total) * rate / (1 + rate):.2f}"
        return Mistake(made_up, "present", "value_not_in_document", "tax computed, not printed")
    copy, misread, _ = HANDWRITTEN_TAX_ERRORS if handwritten else PRINTED_TAX_ERRORS
    if u < copy:
        return Mistake(total, "present", "total_copied_into_tax", "total copied into tax")
    if u < copy + misread:
        return Mistake(misread_digit(truth, v), "present", "misread_characters", "digit misread")
    return Mistake(None, "null", "missing_value", "tax line missed")


def make_mistake(field: str, doc_type: int, docs: Documents, d: int, u: float, v: float) -> Mistake:
    """The wrong reading of ``field`` on document ``d``; ``u``, ``v`` uniform in [0, 1)."""
    if field in ("invoice_number", "po_number"):
        return Mistake(
            misread_digit(docs.number[d], v), "present", "misread_characters", "digit misread"
        )
    if field == "date":
        return _date_mistake(docs.date[d], u, v)
    if field == "delivery_date":
        if u < 0.5:
            return Mistake(
                docs.date[d], "present", "wrong_field", "order date given as delivery date"
            )
        return _date_mistake(docs.delivery_date[d], v, v)
    if field in ("vendor", "merchant", "buyer"):
        party = docs.party[d]
        if field == "vendor" and u < 0.5:
            return Mistake(OWN_COMPANY, "present", "wrong_field", "bill-to company given as vendor")
        if u < 0.7 or field == "vendor":
            return Mistake(
                misread_letter(party, v), "present", "misread_characters", "letter misread"
            )
        names = BUYERS if field == "buyer" else MERCHANTS
        return Mistake(
            wrong_choice(party, names, v), "present", "wrong_field", "another name on the page"
        )
    if field == "currency":
        return Mistake(
            wrong_choice(docs.currency[d], CURRENCIES, v),
            "present",
            "normalisation",
            "wrong currency",
        )
    if field == "total":
        if u < 0.8:
            return Mistake(
                misread_digit(docs.total[d], v), "present", "misread_characters", "digit misread"
            )
        return Mistake(
            dropped_decimal(docs.total[d]), "present", "normalisation", "decimal point lost"
        )
    if field == "payment_method":
        if docs.payment_other[d]:
            return Mistake("card", "present", "other", "voucher read as card")
        return Mistake(
            wrong_choice(docs.payment[d], PAYMENTS, v), "present", "other", "wrong payment method"
        )
    if field == "tax":
        return _tax_mistake(
            docs.tax[d], docs.total[d], float(docs.tax_rate[d]), doc_type == HANDWRITTEN, u, v
        )
    raise AssertionError(f"no mistake model for field {field!r}")  # profiles name no other


def unclear_mistake(truth: str | None) -> Mistake:
    """The model said 'unreadable' but the page was readable (or the field absent)."""
    if truth is None:
        return Mistake(None, "unclear", "other", "field absent, reported unreadable")
    return Mistake(None, "unclear", "missing_value", "readable, reported unreadable")
