"""Semantic validation: format rules and conflicts, computed by code."""

from __future__ import annotations

from decimal import Decimal

import pytest
from claude_fake import entry, invoice_input, line, receipt_input
from fieldtrust.extraction.schemas import INVOICE, RECEIPT
from fieldtrust.extraction.validate import conflicts, format_problems, line_items_sum
from hypothesis import given
from hypothesis import strategies as st


@pytest.mark.parametrize(
    ("override", "problem"),
    [
        ({"date": entry("令和6年4月1日")},
         "date.value: '令和6年4月1日' is not an ISO date yyyy-mm-dd"),
        ({"date": entry("2024-02-30")}, "date.value: '2024-02-30' is not a calendar date"),
        ({"date": entry("01/04/2024")}, "date.value: '01/04/2024' is not an ISO date yyyy-mm-dd"),
        ({"total": entry("1,000.00")}, "total.value: '1,000.00' is not a decimal string"),
        ({"tax": entry("€80")}, "tax.value: '€80' is not a decimal string"),
        ({"currency": entry("eur")}, "currency.value: 'eur' is not an ISO 4217 code"),
        ({"vendor": entry("")}, "vendor.value: empty string; use null if absent or 'unclear'"),
        ({"vendor": entry("ACME", 1.2)}, "vendor.confidence: 1.2 is outside [0, 1]"),
        ({"vendor": entry("ACME", -0.1)}, "vendor.confidence: -0.1 is outside [0, 1]"),
        ({"vendor": entry("ACME", True)}, "vendor.confidence: True is not a number"),
        ({"vendor": entry("ACME", "high")}, "vendor.confidence: 'high' is not a number"),
        ({"vendor": entry(42)}, "vendor.value: 42 is not a string"),
        ({"category": {"value": "food", "detail": "", "confidence": 0.5}},
         "category.value: 'food' is not one of office_supplies"),
        ({"category": {"value": "other", "detail": " ", "confidence": 0.5}},
         "category.detail: 'other' needs a detail"),
        ({"category": {"value": None, "detail": "", "confidence": 0.5}},
         "category.value: null; choose a category"),
        ({"line_items": {"items": [line("x", "1.234,50")], "confidence": 0.9}},
         "line_items.items[1].amount: '1.234,50' is not a decimal string"),
        ({"line_items": {"items": "two lines", "confidence": 0.9}},
         "line_items.items: str is not a list or null"),
        ({"invoice_number": None}, "invoice_number: missing"),
        ({"po_number": entry("PO-1")}, "unknown fields po_number"),
    ],
)
def test_format_problems_name_the_field_and_the_value(override: dict, problem: str) -> None:
    problems = format_problems(INVOICE, invoice_input(**override))

    assert len(problems) == 1
    assert problems[0].startswith(problem)


@pytest.mark.parametrize(
    "override",
    [
        {"tax": entry(None)},  # absent
        {"date": entry("unclear", 0.2)},  # unreadable
        {"category": {"value": "other", "detail": "parking", "confidence": 0.6,
                      "source_text": ""}},
        {"line_items": {"items": None, "confidence": 0.7}},
        {"line_items": {"items": [line("x", "unclear")], "confidence": 0.4}},
        {"total": entry("-12.50")},  # a credit note
    ],
)
def test_null_unclear_and_other_are_well_formed(override: dict) -> None:
    assert format_problems(INVOICE, invoice_input(**override)) == []


def test_receipt_requires_its_own_fields() -> None:
    assert format_problems(RECEIPT, invoice_input()) == [
        "unknown fields invoice_number: record only the schema's fields",
        "receipt_number: missing; give value (null if absent) and confidence",
        "payment_method: missing; give value (null if absent) and confidence",
    ]


def test_total_mismatch_message_gives_both_figures() -> None:
    tool_input = invoice_input(tax=entry(None), total=entry("1000"))
    tool_input["line_items"]["items"] = [line("a", "500"), line("b", "300")]

    [conflict] = conflicts(tool_input)

    assert conflict.message == "line items sum to 800, stated total is 1000"
    assert conflict.fields == ("total", "line_items")
    assert conflict.computed_value == "800"


@pytest.mark.parametrize(
    ("tax", "total", "consistent"),
    [
        ("80.00", "880.00", True),  # lines net of tax
        ("80.00", "800.00", True),  # lines include tax (Japanese 内税 receipts)
        (None, "800.00", True),
        (None, "800.01", True),  # within one cent
        ("80.00", "880.02", False),
        (None, "880.00", False),
        ("unclear", "880.00", False),  # an unreadable tax cannot explain the gap
    ],
)
def test_total_is_checked_against_lines_with_and_without_tax(
    tax: str | None, total: str, consistent: bool,
) -> None:
    tool_input = invoice_input(tax=entry(tax), total=entry(total))

    assert (conflicts(tool_input) == []) is consistent


@pytest.mark.parametrize(
    "override",
    [
        {"total": entry(None)},
        {"total": entry("unclear")},
        {"line_items": {"items": None, "confidence": 0.9}},
        {"line_items": {"items": [line("x", "unclear"), line("y", "5.00")], "confidence": 0.4}},
    ],
)
def test_nothing_absent_or_unreadable_counts_as_a_conflict(override: dict) -> None:
    tool_input = invoice_input(**override)
    tool_input["total"] = tool_input["total"] if "total" in override else entry("99999.00")

    assert conflicts(tool_input) == []


def test_tax_copied_from_the_total_is_a_conflict_on_tax() -> None:
    tool_input = receipt_input(tax=entry("6.00"))

    found = conflicts(tool_input)

    assert [c.fields for c in found] == [("tax",)]
    assert found[0].message.startswith("tax equals the stated total (6.00)")


amounts = st.decimals(min_value=-10_000, max_value=10_000, places=2, allow_nan=False,
                      allow_infinity=False)


@given(st.lists(amounts, min_size=1, max_size=30))
def test_line_items_sum_is_the_exact_decimal_sum(values: list[Decimal]) -> None:
    tool_input = invoice_input()
    tool_input["line_items"]["items"] = [line(f"l{i}", f"{v:.2f}") for i, v in enumerate(values)]
    tool_input["tax"] = entry(None)
    tool_input["total"] = entry(f"{sum(values, Decimal(0)):.2f}")

    assert line_items_sum(tool_input) == sum(values, Decimal(0))
    assert conflicts(tool_input) == []
