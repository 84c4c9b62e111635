"""The ingest rules as a lake source checks them: where a row is counted, where it comes home.

A row of a lake is counted by five columns (doc_type, field, form_version,
confidence, extracted_at) and stored only if it is drawn. So the rules split
in two (:func:`counting_rules`, :func:`storing_rules`): a refresh checks the
rules on what it counts by, on every row; the draw checks the others on every
row of its week, the only rows it can bring home. Reading the id columns of
every row at each refresh would double its cost (they are most of a lake's
bytes) to protect rows that never leave the lake.

A refresh must not count a bad row, but nearly every lake holds none, so the
rollup scan answers a cheaper question first: could any row be bad? Each rule
is asked the cheapest way that never misses a bad row:

- a rule on the grouped columns alone (doc_type, field, form_version: a few
  distinct values) once per group of the rollup, not once per row;
- a rule on confidence or extracted_at exactly, on every row.

Only when a check flags a row does the refresh run the exact rules
(:data:`fieldtrust.ingest.sources.queries.BAD_ROWS`), so messages and counts
are the ingest rules' own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from fieldtrust.ingest.rules import Rule
from fieldtrust.ingest.sources.config import SOURCE_COLUMNS

#: Columns the rollup groups by: their rules are asked once per group.
GROUPED = ("doc_type", "field", "form_version")

#: The columns a row is counted by: the rules on these alone decide whether
#: (and where) the rollup counts a row.
COUNTED_BY = (*GROUPED, "confidence", "extracted_at")

_IDENTIFIER = re.compile(r'"((?:[^"]|"")+)"')


@dataclass(frozen=True)
class Checks:
    """Conditions for :func:`fieldtrust.ingest.sources.queries.checked_rollup`."""

    grouped: tuple[str, ...]
    group_checks: tuple[str, ...]
    row_checks: tuple[str, ...]


def counting_rules(rules: Sequence[Rule]) -> list[Rule]:
    """The ``rules`` on the columns a row is counted by: a refresh checks these."""
    return [rule for rule in rules if _columns(rule.condition) <= set(COUNTED_BY)]


def storing_rules(rules: Sequence[Rule]) -> list[Rule]:
    """The other ``rules`` (ids, values, statuses, locations): the draw checks these."""
    counting = set(counting_rules(rules))
    return [rule for rule in rules if rule not in counting]


def any_fails(rules: Sequence[Rule]) -> str:
    """SQL true on a row one of ``rules`` rejects (false when there are none)."""
    return f"coalesce({' OR '.join(f'({rule.condition})' for rule in rules) or 'false'}, false)"


def refresh_checks(rules: Sequence[Rule], dtypes: dict[str, str]) -> Checks:
    """The :func:`counting_rules` of ``rules`` (over ``source_raw`` with ``dtypes``),
    split into group and row checks."""
    grouped = tuple(c for c in GROUPED if c in dtypes)
    group_checks, row_checks = [], []
    for rule in counting_rules(rules):
        if _columns(rule.condition) <= set(grouped):
            group_checks.append(rule.condition)
        else:
            row_checks.append(rule.condition)
    return Checks(grouped, tuple(group_checks), tuple(row_checks))


def _columns(condition: str) -> set[str]:
    """The columns ``condition`` names; an unknown name counts as a column of its own."""
    names = {m.replace('""', '"') for m in _IDENTIFIER.findall(condition)}
    return {n if n in SOURCE_COLUMNS else f"?{n}" for n in names} or {"?"}

