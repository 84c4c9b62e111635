"""What a label from a file does to an item that already has labels: one rule, every format.

A labels file (CSV, JSON Lines, Parquet) and a Label Studio export are read
the same way (:mod:`fieldtrust.labels.label_import`); this module decides,
row by row, what each label with a verdict does:

* **already stored**: the store holds the same label (extraction, verdict,
  reviewer and label time), or the reviewer's current verdict on the item
  says exactly the same (a re-export, a sheet imported again);
* **replaces** the reviewer's own current label on the item when it says
  something else and is not older: a reviewer's newer verdict supersedes
  their older one, as :func:`fieldtrust.labels.verdicts.supersede` would,
  keeping its review round; the history keeps both;
* **refused** when it is older than the reviewer's current label (the store
  keeps the newer verdict), or when another reviewer's label already holds
  the item's review (a second opinion is a double review or an
  adjudication, never a silent override);
* **new** otherwise.

The rows are taken in label time order per item, so a file holding one
reviewer's history (a labels export) chains as it was recorded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field

#: Rounds an imported label competes in: a primary review and an import count
#: alike for the item's verdict (``effective_labels``); a second review is its own.
_SLOTS = {"primary": ("primary", "import"), "import": ("primary", "import"),
          "second": ("second",)}
#: Review rounds a reviewer's own label may be replaced in (never an adjudication).
REVIEW_ROUNDS = ("primary", "second", "import")


@dataclass(frozen=True)
class Incoming:
    """One row of a file with a verdict, as it would be stored."""

    row: int
    label_id: str
    extraction_id: str
    reviewer: str
    labeled_at: dt.datetime
    review_round: str
    #: verdict, corrected value, corrected status, error type, error detail
    content: tuple[object, ...]
    sample_id: str | None = None


@dataclass(frozen=True)
class Stored:
    """A label already in the store for one of the file's extractions."""

    label_id: str
    extraction_id: str
    reviewer: str
    labeled_at: dt.datetime
    review_round: str
    content: tuple[object, ...]
    live: bool
    imported: bool = False
    sample_id: str | None = None


@dataclass(frozen=True)
class Action:
    """What one row does: ``kind`` is ``new``, ``replaces`` or ``stored``.

    A replacing label keeps the round of the label it replaces and, when its
    row names none, its audit sample: a verdict corrected from a sheet stays
    an audit label.
    """

    kind: str
    review_round: str
    supersedes: str | None = None
    sample_id: str | None = None


@dataclass
class Plan:
    """Each row's action (by row number) and the rows refused, as (row, column, message)."""

    actions: dict[int, Action] = field(default_factory=dict)
    problems: list[tuple[int, str, str]] = field(default_factory=list)

    def count(self, kind: str) -> int:
        return sum(1 for a in self.actions.values() if a.kind == kind)


def plan(incoming: Iterable[Incoming], stored: Iterable[Stored]) -> Plan:
    """Decide every incoming row's action (module docstring)."""
    result = Plan()
    known = {(s.extraction_id, s.content[0], s.reviewer, s.labeled_at) for s in stored}
    live: dict[str, list[Stored]] = {}
    for label in stored:
        if label.live and label.review_round in REVIEW_ROUNDS:
            live.setdefault(label.extraction_id, []).append(label)
    for row in sorted(incoming, key=lambda r: (r.extraction_id, r.labeled_at, r.row)):
        key = (row.extraction_id, row.content[0], row.reviewer, row.labeled_at)
        if key in known:
            result.actions[row.row] = Action("stored", row.review_round)
            continue
        known.add(key)
        current = live.setdefault(row.extraction_id, [])
        mine = _latest(s for s in current if s.reviewer == row.reviewer)
        if mine is not None:
            _own(result, row, mine, current)
            continue
        slot = _SLOTS.get(row.review_round, (row.review_round,))
        other = _latest(s for s in current if s.review_round in slot)
        if other is not None:
            # Name the label and its reviewer, never its verdict: a second
            # reviewer must stay blind to the first.
            where = "imported before" if other.imported else "recorded in the dashboard"
            result.problems.append((row.row, "extraction_id", (
                f"'{row.extraction_id}' already has a {other.review_round} label by"
                f" {other.reviewer} ({other.label_id}, {where}); another reviewer's verdict"
                " does not replace it: drop the row, or settle the difference with"
                f" `fieldtrust adjudicate {row.extraction_id} VERDICT`"
            )))
            continue
        result.actions[row.row] = Action("new", row.review_round)
        current.append(_as_stored(row, row.review_round))
    return result


def _own(result: Plan, row: Incoming, mine: Stored, current: list[Stored]) -> None:
    """A row by a reviewer who already has a current label on the item."""
    if mine.content == row.content:
        result.actions[row.row] = Action("stored", mine.review_round)
        return
    if row.labeled_at < mine.labeled_at:
        result.problems.append((row.row, "labeled_at", (
            f"{row.labeled_at:%Y-%m-%d %H:%M:%S} is older than {row.reviewer}'s current label"
            f" on '{row.extraction_id}' ({mine.label_id}, {mine.labeled_at:%Y-%m-%d %H:%M:%S}"
            " UTC), which says otherwise; the store keeps the newer verdict: drop the row"
        )))
        return
    result.actions[row.row] = Action("replaces", mine.review_round, mine.label_id,
                                     row.sample_id or mine.sample_id)
    current.remove(mine)
    current.append(_as_stored(row, mine.review_round))


def _latest(labels: Iterable[Stored]) -> Stored | None:
    return max(labels, key=lambda s: (s.labeled_at, s.label_id), default=None)


def _as_stored(row: Incoming, review_round: str) -> Stored:
    return Stored(row.label_id, row.extraction_id, row.reviewer, row.labeled_at, review_round,
                  row.content, live=True, imported=True, sample_id=row.sample_id)
