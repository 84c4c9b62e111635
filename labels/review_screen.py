"""What the review screen shows next, read on the connection a verdict was written on.

A reviewer's key press writes a verdict and then needs everything the next
screen shows: the next assigned item, its location on the page, how far the
sample and the reviewer have got, and the item after it, so the page can
prepare that document while the reviewer reads this one. The screen keeps
that following item assigned to the reviewer too (two held, never more), so
it is theirs when the key is pressed and the next screen costs no search of
the pool. Reading it all here, on the connection the verdict was written on,
makes one key press one short store connection (opening the store is the
dearest step of a small write), and no read here touches more than the row
groups of the items involved (:mod:`fieldtrust.store.lookup`).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from fieldtrust.labels.assignment import ReviewItem, hand_out, resolve_sample, with_facts
from fieldtrust.store.locations import Location, document_location
from fieldtrust.store.lookup import ItemFacts

#: Items a reviewer holds while labelling: the one on screen and the next.
HELD = 2


@dataclass(frozen=True)
class Screen:
    """The review screen of one reviewer in one sample, at one moment."""

    sample_id: str
    item: ReviewItem | None  # None: nothing left for this reviewer
    facts: ItemFacts | None  # the item's stated confidence and conflict (shown folded away)
    location: Location | None  # where the item's value is on its page
    labelled: int  # items of the sample with a verdict (first review, import, adjudication)
    items: int  # items in the sample
    labelled_by_you: int  # label rows the reviewer wrote in this sample (any round)
    upcoming: Location | None  # the item held for after this one (its document is prepared)


_COUNTS_SQL = """
SELECT (SELECT count(*) FROM audit_items WHERE sample_id = $sample),
       (SELECT count(DISTINCT l.extraction_id) FROM labels l SEMI JOIN audit_items i
            ON i.extraction_id = l.extraction_id AND i.sample_id = $sample
        WHERE l.review_round IN ('primary', 'import', 'adjudication')),
       (SELECT count(*) FROM labels WHERE reviewer = $actor AND sample_id = $sample)
"""


def review_screen(
    con: duckdb.DuckDBPyConnection, actor: str, sample_id: str | None = None
) -> Screen:
    """Assign ``actor`` their next items (:func:`~fieldtrust.labels.assignment.hand_out`,
    :data:`HELD` of them) and read what the screen shows with the first.

    Parameters
    ----------
    con
        Store connection with write access (handing out an item writes an assignment).
    actor
        The reviewer; needs a role allowed to ``label``.
    sample_id
        Default: the newest sample.

    Raises
    ------
    PermissionDenied
        ``actor`` may not label.
    InputError
        No such sample, or none drawn yet.
    """
    held = hand_out(con, actor, sample_id, HELD)
    # The values of the item on screen only: the next one needs just its document's place,
    # and a lookup of values is the dearest read at ten million rows.
    shown = with_facts(con, held[:1]) or with_facts(con, held)[:1]
    item, facts = shown[0] if shown else (None, None)
    following = [row[1] for row in held if item is None or row[1] != item.extraction_id]
    sample = item.sample_id if item else resolve_sample(con, sample_id)
    (row,) = con.execute(_COUNTS_SQL, {"sample": sample, "actor": actor}).fetchall()
    total, labelled, mine = (int(v) for v in row)
    return Screen(
        sample_id=sample,
        item=item,
        facts=facts,
        location=document_location(con, item.extraction_id) if item else None,
        labelled=labelled,
        items=total,
        labelled_by_you=mine,
        upcoming=document_location(con, following[0]) if item and following else None,
    )
