"""The words sent beside the schema: normalisation rules and retry messages.

The schema says what shape a value has; these texts say how to read a
document into it. The rules that matter most for an audit are the ones that
stop a model from filling gaps: a missing value is null, an unreadable one
is "unclear", and a number is copied as printed even when it looks wrong
(the code, not the model, checks the arithmetic).
"""

from __future__ import annotations

from collections.abc import Sequence

from fieldtrust.extraction.schemas import CATEGORIES, UNCLEAR, DocSchema

SYSTEM_PROMPT = f"""\
You read business documents (invoices, receipts) and record what they say by
calling the recording tool exactly once. You are an accurate transcriber, not
an accountant.

Rules for every field:
- Record only what the document shows. If a value is not on the document, its
  value is null. Never copy another field into it (a document without a tax
  line has tax null; never put the total into tax).
- If a value is on the document but you cannot read it with certainty (blurred,
  cut off, handwritten beyond reading), its value is "{UNCLEAR}". Never use an
  empty string.
- Give each field a confidence between 0 and 1 that the value is exactly right.
  Be honest: these numbers are checked against human review.
- Put the value as printed in source_text, so a reviewer can compare.

Normalisation:
- Dates: ISO yyyy-mm-dd. Convert Japanese era dates (令和 Reiwa 1 = 2019,
  平成 Heisei 1 = 1989, 昭和 Showa 1 = 1926; 令和6年4月1日 = 2024-04-01) and
  other calendars. Day-month order follows the document's country; if the order
  is ambiguous and cannot be settled from the document, the date is "{UNCLEAR}".
- Amounts: decimal strings with "." as the decimal point, no currency symbol, no
  thousands separator, sign only for negatives: "1,234.50 €" -> "1234.50",
  "¥12,800" -> "12800", "1.234,50" (German) -> "1234.50".
- Currency: ISO 4217 code ("€" -> "EUR", "円"/"¥" in Japan -> "JPY").
- Line items: every priced line in order, including fees, shipping and
  discounts (discounts negative). Not the tax line, not subtotals, not the total.
- Tax: the total tax as printed. If several rates are shown, their sum.
- Total: the grand total as printed. Copy it even if it does not match the
  lines: the arithmetic is checked elsewhere and a mismatch is reported to a
  human. Never change a printed number to make a sum work.
- Category: one of {", ".join(CATEGORIES)}; use "other" with a short detail
  when none fits.
"""


def _article(noun: str) -> str:
    """'an' before a vowel sound ("an invoice"), else 'a' ("a receipt")."""
    return "an" if noun[:1].lower() in "aeiou" else "a"


def instruction(schemas: Sequence[DocSchema]) -> str:
    """The user turn's text placed after the document."""
    if len(schemas) == 1:
        schema = schemas[0]
        return (
            f"The document above is {_article(schema.doc_type)} {schema.doc_type}. Record its"
            " fields by calling"
            f" {schema.tool_name}."
        )
    choices = ", ".join(f"{s.tool_name} for {_article(s.doc_type)} {s.doc_type}" for s in schemas)
    return (
        "Decide what kind of document the one above is and record its fields with the"
        f" matching tool: {choices}. Call exactly one tool."
    )


def format_retry(problems: Sequence[str]) -> str:
    """The tool_result text sent back when the input broke a format rule."""
    return _retry(
        "The recorded values break the format rules:",
        problems,
        "Read the document again and call the tool again with every field. Fix only"
        " these problems; keep null for values the document does not have.",
    )


def conflict_retry(messages: Sequence[str]) -> str:
    """The tool_result text sent back when the values disagree with each other."""
    return _retry(
        "The recorded values do not add up:",
        messages,
        "Read the line items, tax and total on the document again and call the tool"
        " again with every field. If you misread a number, correct it. If the"
        " document itself prints these numbers, keep them exactly as printed: do not"
        " change a printed number to make the sum match.",
    )


def _retry(headline: str, problems: Sequence[str], advice: str) -> str:
    """A retry's text: the headline, one line per problem, then what to do."""
    listed = "\n".join(f"- {p}" for p in problems)
    return f"{headline}\n{listed}\n{advice}"


def nudge(schemas: Sequence[DocSchema]) -> str:
    """The user turn sent when the model answered in text instead of calling the tool."""
    names = " or ".join(s.tool_name for s in schemas)
    return f"Do not answer in text. Record the document's fields by calling {names}."
