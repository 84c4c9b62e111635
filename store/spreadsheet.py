"""The one spreadsheet escape of CSV exports, and its inverse for imports.

Spreadsheets run a cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or
a carriage return as a formula (OWASP "CSV injection"). Every CSV fieldtrust
writes puts a single quote before such a text cell, and before a text cell
that already starts with a quote, so the escape can be undone exactly:
``labels import`` drops one leading quote from every cell of a CSV. ``=X1``
is written ``'=X1``, ``'=X1`` is written ``''=X1``, and each reads back as
itself; ``-12.50`` comes back as ``-12.50``.
"""

from __future__ import annotations

#: What a text cell starts with when a spreadsheet would run it as a formula.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
#: The escape character; a cell starting with it is escaped too.
QUOTE = "'"
_ESCAPED_STARTS = (*FORMULA_STARTS, QUOTE)


def escape_cell(value: object) -> object:
    """``value`` with a leading ``'`` if a spreadsheet would run it, or it starts with ``'``."""
    if isinstance(value, str) and value.startswith(_ESCAPED_STARTS):
        return QUOTE + value
    return value


def unescape_cell(value: str) -> str:
    """The text :func:`escape_cell` was given: one leading ``'`` dropped."""
    return value[1:] if value.startswith(QUOTE) else value


def escape_sql(expression: str) -> str:
    """SQL for :func:`escape_cell` of a text expression."""
    return (
        f"CASE WHEN regexp_matches({expression}, '^[=+\\-@\\t\\r'']')"
        f" THEN '''' || {expression} ELSE {expression} END"
    )


def unescape_sql(expression: str) -> str:
    """SQL for :func:`unescape_cell` of a text expression."""
    return (
        f"CASE WHEN starts_with({expression}, '''') THEN substr({expression}, 2)"
        f" ELSE {expression} END"
    )
