"""Fixing a slip: who may change a verdict, until when, and one's own recent labels.

A verdict is changed the way every label is: a new row that supersedes it
(:func:`fieldtrust.labels.verdicts.supersede`); nothing is edited or
deleted, and the history keeps both rows. That function is the one path, for
the review page's Undo and "My recent labels" and for
``fieldtrust labels correct`` alike, and it holds every caller to these
rules (:func:`check_may_supersede`):

* **Your own verdict**, in a review round (first or second review): while
  you still hold a role that may label, within :data:`OWN_CORRECTION_WINDOW`
  of your first verdict on the item (a slip is noticed the same week; the
  window runs from the first verdict, so correcting again does not extend
  it), and only until a QA lead has adjudicated the item: an adjudication
  weighed both reviews, and changing one behind it would change what it
  settled.
* **Anyone's review-round verdict**, at any time: a QA lead
  (``supersede_others``), who is also who to ask once your window has
  passed or the item was adjudicated.
* **An adjudication**: a QA lead, by adjudicating again.
* **An imported label**: by importing the corrected file again.
* Only the newest label of a chain can be superseded (checked in ``supersede``).

A correction never changes an approval: a decision rests on the evidence
frozen when it was made (:mod:`fieldtrust.governance.evidence`). The corrected
verdict counts from then on in every figure, the revocation checks included.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass
from typing import Protocol

import duckdb
from fieldtrust.store.access import allowed, current_roles, require, user_name
from fieldtrust.store.connection import utc_now
from fieldtrust.store.lookup import ItemFacts, item_facts

from fieldtrust.errors import InputError, Refused

#: How long after their first verdict on an item a reviewer may change it themselves.
OWN_CORRECTION_WINDOW = dt.timedelta(days=7)

#: Rounds whose verdicts their reviewer may correct (adjudications and imports change otherwise).
OWN_ROUNDS = ("primary", "second")


class LabelRow(Protocol):
    """What the rules read of a label (a :class:`fieldtrust.labels.verdicts.Label`)."""

    @property
    def label_id(self) -> str: ...
    @property
    def extraction_id(self) -> str: ...
    @property
    def review_round(self) -> str: ...
    @property
    def reviewer(self) -> str: ...


@dataclass(frozen=True)
class _Standing:
    """When the item's first verdict of the round was given, and who adjudicated it."""

    first_at: dt.datetime
    adjudicated_by: str | None


_STANDING_SQL = """
SELECT (SELECT min(labeled_at) FROM labels
        WHERE extraction_id = $extraction AND review_round = $round),
       (SELECT reviewer FROM labels
        WHERE extraction_id = $extraction AND review_round = 'adjudication'
        ORDER BY labeled_at LIMIT 1)
"""


def _standing(con: duckdb.DuckDBPyConnection, extraction_id: str, review_round: str) -> _Standing:
    rows = con.execute(_STANDING_SQL, {"extraction": extraction_id, "round": review_round}
                       ).fetchall()
    assert rows and rows[0][0] is not None, "a label's own round has a first label"
    return _Standing(rows[0][0], rows[0][1])


def own_refusal(label: LabelRow, standing: _Standing, now: dt.datetime) -> str | None:
    """Why a reviewer without ``supersede_others`` may not change their own ``label`` (None:
    they may)."""
    if standing.adjudicated_by is not None:
        return (
            f"extraction {label.extraction_id} was adjudicated by {standing.adjudicated_by}:"
            f" the adjudication weighed both reviews, so its reviewers can no longer change"
            f" theirs; a QA lead can adjudicate again"
        )
    until = standing.first_at + OWN_CORRECTION_WINDOW
    if now > until:
        days = OWN_CORRECTION_WINDOW.days
        return (
            f"label {label.label_id} on {label.extraction_id} was first given"
            f" {standing.first_at:%Y-%m-%d %H:%M} UTC, more than {days} days ago: a reviewer"
            f" changes their own verdict within {days} days; a QA lead can still correct it"
            f" (fieldtrust labels correct {label.label_id} VERDICT --as LEAD)"
        )
    return None


def check_may_supersede(
    con: duckdb.DuckDBPyConnection, actor: str, label: LabelRow, *,
    now: dt.datetime | None = None,
) -> None:
    """Raise unless ``actor`` may supersede ``label`` by the rules of this module.

    Raises
    ------
    PermissionDenied
        ``actor``'s roles do not allow it (another reviewer's label without
        ``supersede_others``, an adjudication without ``adjudicate``, one's own
        without ``label``).
    Refused
        One's own verdict past :data:`OWN_CORRECTION_WINDOW` or after an
        adjudication; an imported label.
    """
    if label.review_round == "adjudication":
        require(con, actor, "adjudicate")
        return
    if label.review_round not in OWN_ROUNDS:
        raise Refused(
            f"label {label.label_id} was imported: change it in the file and import that again"
            " (fieldtrust labels import)"
        )
    if label.reviewer != actor:
        require(con, actor, "supersede_others")
        return
    require(con, actor, "label")
    if allowed(current_roles(con, actor), "supersede_others"):
        return
    why = own_refusal(label, _standing(con, label.extraction_id, label.review_round),
                      now or utc_now())
    if why is not None:
        raise Refused(why)


@dataclass(frozen=True)
class OwnLabel:
    """One of a reviewer's live verdicts, with the item it judged and whether it can change."""

    label_id: str
    extraction_id: str
    sample_id: str | None
    review_round: str
    reviewer: str
    verdict: str
    corrected_value: str | None
    corrected_status: str | None
    error_type: str | None
    error_detail: str | None
    labeled_at: dt.datetime
    item: ItemFacts | None  # None only for an extraction no longer in the store
    #: Why the reviewer may not change it now (None: they may), in the library's words.
    why_fixed: str | None

    @property
    def changeable(self) -> bool:
        return self.why_fixed is None


_RECENT_SQL = """
SELECT l.label_id, l.extraction_id, l.sample_id, l.review_round, l.reviewer, l.verdict,
       l.corrected_value, l.corrected_status, l.error_type, l.error_detail, l.labeled_at,
       (SELECT min(f.labeled_at) FROM labels f
        WHERE f.extraction_id = l.extraction_id AND f.review_round = l.review_round),
       (SELECT a.reviewer FROM labels a
        WHERE a.extraction_id = l.extraction_id AND a.review_round = 'adjudication'
        ORDER BY a.labeled_at LIMIT 1)
FROM labels l
WHERE l.reviewer = $actor AND l.review_round IN ('primary', 'second')
  AND ($sample IS NULL OR l.sample_id = $sample)
  AND ($label IS NULL OR l.label_id = $label)
  AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
ORDER BY l.labeled_at DESC, l.label_id DESC
LIMIT $limit
"""


def recent_labels(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    *,
    sample_id: str | None = None,
    limit: int = 20,
    now: dt.datetime | None = None,
) -> list[OwnLabel]:
    """``actor``'s newest verdicts that still stand (not superseded), newest first.

    Parameters
    ----------
    actor
        The reviewer whose labels to list.
    sample_id
        Only labels given in this audit sample (default: all, the priority
        queue's included).
    limit
        How many at most.
    now
        The time the window is judged at (default: now).

    Returns
    -------
    list of OwnLabel
        Each with ``why_fixed``: None when ``actor`` may change it now,
        else the reason :func:`check_may_supersede` would give.

    Raises
    ------
    InputError
        ``limit`` below 1 or an unusable name.
    """
    actor = user_name(actor, what="acting user")
    if limit < 1:
        raise InputError(f"limit must be at least 1, got {limit}")
    return _own_labels(con, actor, sample_id, None, limit, now or utc_now())


def own_label(
    con: duckdb.DuckDBPyConnection, actor: str, label_id: str, *,
    now: dt.datetime | None = None,
) -> OwnLabel:
    """``actor``'s standing verdict ``label_id``, as :func:`recent_labels` lists it.

    Raises
    ------
    InputError
        ``label_id`` is no standing review verdict of ``actor``'s (someone else's,
        superseded, an import or adjudication, or no label at all).
    """
    actor = user_name(actor, what="acting user")
    found = _own_labels(con, actor, None, label_id, 1, now or utc_now())
    if not found:
        raise InputError(
            f"label {label_id!r} is not a verdict of {actor}'s that still stands: pick one of"
            " your recent labels"
        )
    return found[0]


def _own_labels(
    con: duckdb.DuckDBPyConnection, actor: str, sample_id: str | None, label_id: str | None,
    limit: int, when: dt.datetime,
) -> list[OwnLabel]:
    rows = con.execute(_RECENT_SQL, {"actor": actor, "sample": sample_id, "label": label_id,
                                     "limit": limit}).fetchall()
    facts = item_facts(con, [row[1] for row in rows])
    roles = current_roles(con, actor)
    found = []
    for (label_id, extraction_id, sample, rnd, reviewer, verdict, value, status, error_type,
         detail, labeled_at, first_at, adjudicated_by) in rows:
        label = OwnLabel(label_id, extraction_id, sample, rnd, reviewer, verdict, value, status,
                         error_type, detail, labeled_at, facts.get(extraction_id), None)
        why: str | None = None
        if not allowed(roles, "label"):
            why = f"{actor} holds no role that may label any more"
        elif not allowed(roles, "supersede_others"):
            why = own_refusal(label, _Standing(first_at, adjudicated_by), when)
        found.append(dataclasses.replace(label, why_fixed=why))
    return found

