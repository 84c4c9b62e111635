"""Handing out the week's sample: who reviews which item next.

A reviewer asks for the next items of the current sample. They come spread
across the sampling cells (one item of each cell in turn, each cell in the
order of its permanent random numbers), so a reviewer who stops early still
leaves a sample that covers every cell, not the first cells in full. Handing
out records an assignment row (key: sample, extraction, round) in the same
transaction, so two reviewers asking at once never get the same item: the
loser of the race conflicts in DuckDB, is retried, and gets other items.

Double review: items the sample marked ``double_review`` get a second,
*blind* review by someone other than the primary reviewer. What a reviewer
sees (:class:`ReviewItem`) carries the extraction only, never another
round's verdict, reviewer or label. It also leaves out the model's stated
confidence, so a number does not anchor the reviewer's judgement.

A reviewer can skip an item with a reason (unreadable scan, conflict of
interest); the skip is recorded and the item goes back to the pool for the
others, never to the reviewer who skipped it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
from fieldtrust.store.access import require, user_name
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.lookup import ItemFacts, item_facts
from fieldtrust.store.retry import first_row, write_with_retry

from fieldtrust.errors import InputError


@dataclass(frozen=True)
class ReviewItem:
    """An item as a reviewer sees it: the extraction and the round, nothing of other verdicts."""

    sample_id: str
    extraction_id: str
    review_round: str
    cell: str
    doc_id: str
    doc_type: str
    form_version: str
    field: str
    value: str | None
    value_status: str
    source_excerpt: str | None
    assigned_at: dt.datetime


# The reviewer's items: their assignments in the sample (a few rows), then what the
# other tables say of those ids alone, where a join would hash every label in the
# store at every key press (a filter on a short list reaches each table's scan).
# Their values are looked up by id afterwards (store.lookup), never by joining
# every extraction row. A seed (labels.seed_verdicts) is looked up as its host
# extraction and shown with the seeded value in place of the host's.
_ASSIGNED_SQL = """
SELECT extraction_id, review_round, assigned_at FROM assignments
WHERE sample_id = $sample AND reviewer = $actor
  AND ($extraction IS NULL OR extraction_id = $extraction)
"""
_ASSIGNED_FACTS_SQL = """
SELECT 'place', extraction_id, NULL, cell, prn, NULL, NULL FROM audit_items
WHERE sample_id = $sample AND list_contains($ids, extraction_id)
UNION ALL
SELECT 'place', seed_id, NULL, cell, prn, host_extraction_id, seed_value FROM seed_items
WHERE sample_id = $sample AND list_contains($ids, seed_id)
UNION ALL
SELECT 'done', extraction_id, review_round, NULL, NULL, NULL, NULL FROM labels
WHERE $open_only AND list_contains($ids, extraction_id)
UNION ALL
SELECT 'done', seed_id, 'primary', NULL, NULL, NULL, NULL FROM seed_verdicts
WHERE $open_only AND list_contains($ids, seed_id)
"""

# Candidates for a primary review: not labelled (in any round that gives a
# verdict), not handed out in this sample, not skipped by or second-reviewed
# by the actor. Candidates for a second review: double-review items whose
# primary review is with someone else, whose second review is free and that
# no QA lead has adjudicated yet (an adjudication settles the item). Seeds
# join the items at their own random place in their cell's order, for one
# (primary) review each.
_CANDIDATES_SQL = """
WITH items AS (
    SELECT extraction_id, cell, prn, double_review FROM audit_items WHERE sample_id = $sample
    UNION ALL
    SELECT seed_id, cell, prn, false FROM seed_items WHERE sample_id = $sample
),
labelled AS (  -- the labels of this sample's items only: every other label is read once
    SELECT l.extraction_id, l.review_round, l.reviewer
    FROM labels l SEMI JOIN items USING (extraction_id)
),
mine AS (  -- (UNION ALL: only ever asked whether an id is in it, so no need to dedupe)
    SELECT extraction_id FROM skips WHERE sample_id = $sample AND reviewer = $actor
    UNION ALL SELECT extraction_id FROM assignments WHERE reviewer = $actor
    UNION ALL SELECT extraction_id FROM labelled WHERE reviewer = $actor
    UNION ALL SELECT seed_id FROM seed_verdicts WHERE reviewer = $actor
),
taken AS (
    SELECT extraction_id, review_round FROM assignments WHERE sample_id = $sample
    UNION ALL SELECT extraction_id, review_round FROM labelled
    UNION ALL SELECT seed_id, 'primary' FROM seed_verdicts WHERE sample_id = $sample
),
primary_free AS (
    SELECT extraction_id, cell, prn, 'primary' AS review_round FROM items i
    WHERE NOT EXISTS (SELECT 1 FROM taken t WHERE t.extraction_id = i.extraction_id
                      AND t.review_round IN ('primary', 'import', 'adjudication'))
),
second_free AS (
    SELECT extraction_id, cell, prn, 'second' AS review_round FROM items i
    WHERE double_review
      AND EXISTS (SELECT 1 FROM taken t WHERE t.extraction_id = i.extraction_id
                  AND t.review_round = 'primary')
      AND NOT EXISTS (SELECT 1 FROM taken t WHERE t.extraction_id = i.extraction_id
                      AND t.review_round IN ('second', 'adjudication'))
),
candidates AS (
    SELECT * FROM (SELECT * FROM primary_free UNION ALL SELECT * FROM second_free) c
    WHERE extraction_id NOT IN (SELECT extraction_id FROM mine) {confident}
)
SELECT p.extraction_id, p.review_round, p.cell, p.prn,
       s.host_extraction_id AS host_, s.seed_value AS seed_value_
FROM (
    SELECT *, row_number() OVER (PARTITION BY cell ORDER BY prn, extraction_id) AS turn
    FROM candidates
    ORDER BY turn, prn, cell
    LIMIT $need
) p
LEFT JOIN seed_items s ON s.seed_id = p.extraction_id AND s.sample_id = $sample
"""

# Only when asked: planned in, it costs a scan of every sampled extraction.
_CONFIDENT_SQL = """
      AND coalesce(
            (SELECT x.confidence FROM sampled_extractions x
             WHERE x.extraction_id = c.extraction_id),
            (SELECT s.confidence FROM seed_items s WHERE s.seed_id = c.extraction_id)
          ) >= $min_confidence
"""

#: An item a reviewer holds, before its values are looked up: sample, id, round, cell,
#: when it was handed out, and for a seed its host and seeded value.
HeldRow = tuple[str, str, str, str, dt.datetime, str | None, str | None]
#: An item handed to a reviewer, with the facts its screen shows.
HeldItem = tuple["ReviewItem", ItemFacts]


def current_sample(con: duckdb.DuckDBPyConnection) -> str | None:
    """The newest audit sample: latest week, highest version (None before the first draw)."""
    row = first_row(con.execute(
        "SELECT sample_id FROM audit_samples ORDER BY week DESC, version DESC LIMIT 1"
    ).fetchall())
    return str(row[0]) if row else None


def next_items(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    sample_id: str | None = None,
    *,
    count: int = 10,
    min_confidence: float | None = None,
) -> list[ReviewItem]:
    """The next ``count`` items for ``actor`` to review, assigned to them atomically.

    Items already assigned to ``actor`` and not yet labelled come first (so
    asking twice does not hoard items); the rest are new assignments taken in
    turn from each cell in the order of the permanent random numbers.

    Parameters
    ----------
    con
        Store connection (or a cursor of it: one per thread).
    actor
        The reviewer; needs a role allowed to ``label``.
    sample_id
        Default: :func:`current_sample`.
    count
        How many items to return at most (fewer when the pool runs dry).
    min_confidence
        Hand out only new items stated at least this confident (the
        high-confidence cells blind re-keying is for, :mod:`~.rekey`); items
        already held come first whatever their confidence.

    Raises
    ------
    PermissionDenied
        ``actor`` may not label.
    InputError
        No such sample (or none drawn yet), or ``count`` below 1.
    """
    rows = hand_out(con, actor, sample_id, count, min_confidence)
    return [item for item, _ in with_facts(con, rows)][:count]


def hand_out(con: duckdb.DuckDBPyConnection, actor: str, sample_id: str | None, count: int,
             min_confidence: float | None = None) -> list[HeldRow]:
    """:func:`next_items` before their values are looked up: every item ``actor`` holds
    open in the sample, topped up to ``count``, in the order they are to be reviewed.

    One read of the held items and one search of the pool when more are
    needed; :func:`with_facts` adds the values, for as many as a screen shows
    (the review page: one, at every key).
    """
    actor = user_name(actor, what="acting user")
    if count < 1:
        raise InputError(f"count must be at least 1, got {count}")

    def work(tx: duckdb.DuckDBPyConnection) -> list[HeldRow]:
        require(tx, actor, "label")
        sample = resolve_sample(tx, sample_id)
        rows = _held_rows(tx, actor, sample, open_only=True)
        need = count - len(rows)
        if need > 0:
            params: dict[str, Any] = {"sample": sample, "actor": actor, "need": need}
            confident = ""
            if min_confidence is not None:
                confident, params["min_confidence"] = _CONFIDENT_SQL, min_confidence
            picked = tx.execute(_CANDIDATES_SQL.format(confident=confident), params).fetchall()
            now = utc_now()
            for extraction_id, review_round, *_ in picked:
                tx.execute(
                    "INSERT INTO assignments (sample_id, extraction_id, review_round, reviewer,"
                    " assigned_at) VALUES (?, ?, ?, ?, ?)",
                    [sample, extraction_id, review_round, actor, now],
                )
            # In the order a later read of the held items gives: one time, then the PRN.
            rows += [(sample, extraction_id, review_round, cell, now, host, seeded)
                     for extraction_id, review_round, cell, _, host, seeded
                     in sorted(picked, key=lambda row: (row[3], row[0]))]
        return rows

    return write_with_retry(con, work, what=f"assigning items to {actor}")


def item_view(
    con: duckdb.DuckDBPyConnection, actor: str, sample_id: str, extraction_id: str
) -> ReviewItem:
    """One item assigned to ``actor``, as they see it (blind to any other round)."""
    actor = user_name(actor, what="acting user")
    require(con, actor, "label")
    items = _items(con, actor, sample_id, extraction_id=extraction_id)
    if not items:
        raise InputError(
            f"extraction {extraction_id!r} of sample {sample_id!r} is not assigned to {actor};"
            " ask for items with next_items"
        )
    return items[0]


def skip(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    sample_id: str,
    extraction_id: str,
    reason: str,
) -> None:
    """Give an assigned item back with a reason; it returns to the pool for others.

    The skip is recorded (``skips``); the assignment is released. Only an item
    assigned to ``actor`` and not yet labelled can be skipped.
    """
    actor = user_name(actor, what="acting user")
    if not isinstance(reason, str) or not reason.strip():
        raise InputError("a skip needs a reason (e.g. 'scan unreadable', 'conflict of interest')")

    def work(tx: duckdb.DuckDBPyConnection) -> None:
        require(tx, actor, "label")
        row = first_row(tx.execute(
            "SELECT review_round FROM assignments"
            " WHERE sample_id = ? AND extraction_id = ? AND reviewer = ?",
            [sample_id, extraction_id, actor],
        ).fetchall())
        if row is None:
            raise InputError(
                f"extraction {extraction_id!r} of sample {sample_id!r} is not assigned to"
                f" {actor}, so there is nothing to skip"
            )
        labelled = first_row(tx.execute(
            "SELECT 1 FROM labels WHERE extraction_id = $id AND review_round = $round"
            " UNION ALL SELECT 1 FROM seed_verdicts WHERE seed_id = $id",
            {"id": extraction_id, "round": row[0]},
        ).fetchall())
        if labelled is not None:
            raise InputError(
                f"extraction {extraction_id!r} already has its {row[0]} label; supersede the"
                " label to change it instead of skipping"
            )
        inserted = tx.execute(
            "INSERT INTO skips (sample_id, extraction_id, reviewer, reason, skipped_at)"
            " VALUES (?, ?, ?, ?, ?) RETURNING *",
            [sample_id, extraction_id, actor, reason.strip(), utc_now()],
        )
        chain_returned(tx, "skips", inserted)
        # Assignments are a work queue, not history: releasing one is what
        # puts the item back in the pool. The skip row keeps the record.
        tx.execute(
            "DELETE FROM assignments WHERE sample_id = ? AND extraction_id = ?"
            " AND review_round = ? AND reviewer = ?",
            [sample_id, extraction_id, row[0], actor],
        )

    write_with_retry(con, work, what=f"skipping {extraction_id}")


@dataclass(frozen=True)
class SampleProgress:
    """How far a sample's review has got."""

    sample_id: str
    items: int
    labelled: int
    double_review: int
    second_labelled: int
    assigned: int
    skips: int


def sample_progress(
    con: duckdb.DuckDBPyConnection, sample_id: str | None = None
) -> SampleProgress:
    """Items, labelled items, double-review items and their second labels, assignments, skips."""
    sample = resolve_sample(con, sample_id)
    row = first_row(con.execute(
        """
        SELECT count(*) AS items,
               count(*) FILTER (WHERE EXISTS (SELECT 1 FROM labels l
                    WHERE l.extraction_id = i.extraction_id
                      AND l.review_round IN ('primary', 'import', 'adjudication'))) AS labelled,
               count(*) FILTER (WHERE i.double_review) AS double_review,
               count(*) FILTER (WHERE i.double_review AND EXISTS (SELECT 1 FROM labels l
                    WHERE l.extraction_id = i.extraction_id AND l.review_round = 'second'))
                   AS second_labelled,
               (SELECT count(*) FROM assignments a WHERE a.sample_id = $sample) AS assigned,
               (SELECT count(*) FROM skips s WHERE s.sample_id = $sample) AS skips
        FROM audit_items i WHERE i.sample_id = $sample
        """,
        {"sample": sample},
    ).fetchall())
    assert row is not None
    return SampleProgress(sample, *(int(v) for v in row))


def resolve_sample(con: duckdb.DuckDBPyConnection, sample_id: str | None) -> str:
    """``sample_id`` if the store holds it, else the newest sample when it is None.

    Raises
    ------
    InputError
        No such sample, or none drawn yet.
    """
    if sample_id is None:
        current = current_sample(con)
        if current is None:
            raise InputError("no audit sample has been drawn yet: run `fieldtrust sample --week W`")
        return current
    rows = con.execute("SELECT 1 FROM audit_samples WHERE sample_id = ?", [sample_id]).fetchall()
    row = first_row(rows)
    if row is None:
        raise InputError(f"no audit sample {sample_id!r}; samples look like '2026-W48/v1'")
    return sample_id


def _items(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    sample_id: str,
    *,
    open_only: bool = False,
    extraction_id: str | None = None,
) -> list[ReviewItem]:
    rows = _held_rows(con, actor, sample_id, open_only=open_only, extraction_id=extraction_id)
    return [item for item, _ in with_facts(con, rows)]


def _held_rows(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    sample_id: str,
    *,
    open_only: bool,
    extraction_id: str | None = None,
) -> list[HeldRow]:
    """``actor``'s items in the sample (``open_only``: those without their verdict yet), in
    the order they were handed out, then their cells' order."""
    assigned = con.execute(_ASSIGNED_SQL, {"sample": sample_id, "actor": actor,
                                           "extraction": extraction_id}).fetchall()
    if not assigned:
        return []
    places: dict[str, tuple[str, float, str | None, str | None]] = {}
    done: set[tuple[str, str]] = set()
    for kind, item, rnd, cell, prn, host, seeded in con.execute(
        _ASSIGNED_FACTS_SQL,
        {"sample": sample_id, "ids": [row[0] for row in assigned], "open_only": open_only},
    ).fetchall():
        if kind == "place":
            places[item] = (cell, prn, host, seeded)
        else:
            done.add((item, rnd))
    held = [(at, places[item][1], item, rnd) for item, rnd, at in assigned
            if item in places and (item, rnd) not in done]
    return [(sample_id, item, rnd, places[item][0], at, places[item][2], places[item][3])
            for at, _, item, rnd in sorted(held)]


def with_facts(con: duckdb.DuckDBPyConnection, rows: Sequence[HeldRow]) -> list[HeldItem]:
    """Held rows (:func:`hand_out`) as items with the :class:`~fieldtrust.store.lookup.ItemFacts`
    their screen shows, in one lookup of values: a seed's are its host's, with the seeded
    value and no other source's. Rows of extractions the store lacks are left out."""
    facts = item_facts(con, [host or extraction for _, extraction, _, _, _, host, _ in rows])
    held = []
    for sample, extraction, rnd, cell, assigned_at, host, seeded in rows:
        found = facts.get(host or extraction)
        if found is None:
            continue
        if host is not None:  # a seed: the host's document, the seeded value, nothing else's
            found = dataclasses.replace(found, extraction_id=extraction, value=seeded,
                                        value_status="present", conflict_value=None,
                                        conflict=False)
        held.append((ReviewItem(sample, extraction, rnd, cell, found.doc_id, found.doc_type,
                                found.form_version, found.field, found.value,
                                found.value_status, found.source_excerpt, assigned_at), found))
    return held
