"""The ingest rules as a refresh checks them: in the scan that counts, and cheaply.

A refresh must not count a bad row, but nearly every lake holds none, so the
rollup scan answers a cheaper question first: could any row be bad? Each rule
is asked the cheapest way that never misses a bad row:

- a rule on the grouped columns alone (doc_type, field, form_version: a few
  distinct values) once per group of the rollup, not once per row;
- a key rule on the other keys (extraction_id, doc_id, model) on the text as
  written rather than trimmed: trimming removes spaces only, so the raw text
  holds every invisible character the trimmed text does and is at least as
  long;
- every other rule exactly, on every row.

Only when a check flags a row does the refresh run the exact rules
(:data:`fieldtrust.store.sources.queries.BAD_ROWS`), so messages and counts
are the ingest rules' own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fieldtrust.store.ingest import KEY_COLUMNS
from fieldtrust.store.sources.config import SOURCE_COLUMNS
from fieldtrust.store.validation import Rule, key_rules, raw_sql, text_sql

#: Columns the rollup groups by: their rules are asked once per group.
GROUPED = ("doc_type", "field", "form_version")

_IDENTIFIER = re.compile(r'"((?:[^"]|"")+)"')


@dataclass(frozen=True)
class Checks:
    """Conditions for :func:`fieldtrust.store.sources.queries.checked_rollup`."""

    grouped: tuple[str, ...]
    group_checks: tuple[str, ...]
    row_checks: tuple[str, ...]


def refresh_checks(rules: Sequence[Rule], dtypes: dict[str, str]) -> Checks:
    """Split ``rules`` (over ``source_raw`` with ``dtypes``) into group and row checks."""
    grouped = tuple(c for c in GROUPED if c in dtypes)
    loosened = _loosened_keys(dtypes, grouped)
    group_checks, row_checks = [], []
    for rule in rules:
        if rule in loosened:
            row_checks.append(loosened[rule])
        elif _columns(rule.condition) <= set(grouped):
            group_checks.append(rule.condition)
        else:
            row_checks.append(rule.condition)
    return Checks(grouped, tuple(group_checks), tuple(row_checks))


def _columns(condition: str) -> set[str]:
    """The columns ``condition`` names; an unknown name counts as a column of its own."""
    names = {m.replace('""', '"') for m in _IDENTIFIER.findall(condition)}
    return {n if n in SOURCE_COLUMNS else f"?{n}" for n in names} or {"?"}


def _loosened_keys(dtypes: dict[str, str], grouped: Sequence[str]) -> dict[Rule, str]:
    """The key rules of the ungrouped keys, each asked of the raw text instead."""
    loosened = {}
    for column in (c for c in KEY_COLUMNS if c in dtypes and c not in grouped):
        text, raw = text_sql(column, dtypes[column]), raw_sql(column, dtypes[column])
        for rule in key_rules([column], dtypes):
            loosened[rule] = rule.condition.replace(text, raw)
    return loosened
