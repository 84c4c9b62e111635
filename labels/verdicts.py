"""Recording verdicts: append-only labels, corrections as superseding rows.

A label is never changed or deleted. A correction is a new row whose
``supersedes`` names the row it replaces; the view ``effective_labels`` then
ignores the old row, and the history keeps both. There is deliberately no
function here (or anywhere in fieldtrust) that updates or deletes a label.

Two constraints in the store (migration ``0010_labels_history_constraints``)
make this safe with several reviewers writing at once: each (extraction,
review round) has one chain of labels, and a label is superseded at most once.
A concurrent writer that loses the race gets a DuckDB conflict, is retried,
and then sees the winner's row and a :class:`~fieldtrust.errors.Refused`
that says what to do, so nobody's label is lost or silently replaced.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any, Unpack

import duckdb
from fieldtrust.labels.corrections import check_may_supersede
from fieldtrust.labels.verdict_rule import (
    VERDICTS,
    VerdictDetails,
    verdict_fields,
    verdict_problems,
)
from fieldtrust.store.access import require, user_name
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.lookup import has_extraction, is_copied
from fieldtrust.store.retry import first_row, write_with_retry
from fieldtrust.store.rollup import record_sampled

from fieldtrust.errors import InputError, Refused

__all__ = ["REVIEW_ROUNDS", "VERDICTS", "Label", "get_label", "insert_label", "label_history",
           "live_label", "record_verdict", "supersede", "verdict_fields", "verdict_problems"]

#: Review rounds a reviewer labels in (adjudication: labels.agreement.adjudicate).
REVIEW_ROUNDS: tuple[str, ...] = ("primary", "second")

_LABEL_COLUMNS = (
    "label_id, extraction_id, sample_id, verdict, corrected_value, corrected_status,"
    " error_type, error_detail, reviewer, review_round, labeled_at, supersedes"
)


@dataclass(frozen=True)
class Label:
    """One row of the ``labels`` table."""

    label_id: str
    extraction_id: str
    sample_id: str | None
    verdict: str
    corrected_value: str | None
    corrected_status: str | None
    error_type: str | None
    error_detail: str | None
    reviewer: str
    review_round: str
    labeled_at: dt.datetime
    supersedes: str | None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``--json`` prints)."""
        return dataclasses.asdict(self)


def record_verdict(
    con: duckdb.DuckDBPyConnection,
    *,
    actor: str,
    extraction_id: str,
    verdict: str,
    sample_id: str | None = None,
    review_round: str | None = None,
    **details: Unpack[VerdictDetails],
) -> Label:
    """Record ``actor``'s verdict on one extraction; the reviewer is always ``actor``.

    Parameters
    ----------
    con
        Store connection (or a cursor of it: one per thread).
    actor
        The reviewer; needs a role allowed to ``label`` (reviewer, qa_lead).
    extraction_id
        The extraction judged.
    verdict
        ``correct``, ``incorrect`` or ``unclear`` (the source is unreadable).
    sample_id
        The audit sample the item was reviewed in; default: the newest sample
        holding the extraction (None when it is in none).
    review_round
        ``primary`` or ``second``; default: the round of ``actor``'s
        assignment for this item, else ``primary``.
    **details
        ``corrected_value``, ``corrected_status``, ``error_type``,
        ``error_detail`` (:class:`~fieldtrust.labels.verdict_rule.VerdictDetails`).
        For ``incorrect``, all optional (:mod:`fieldtrust.labels.verdict_rule`):
        the right value, or no value with status ``null`` (field absent) or
        ``unclear`` (unreadable); a type from
        :data:`fieldtrust.labels.taxonomy.ERROR_TYPES` (``other`` needs a
        detail), else ``not_recorded``. ``unclear`` may carry a detail as a note.

    Raises
    ------
    PermissionDenied
        ``actor`` may not label.
    InputError
        Invalid verdict fields, unknown extraction, or item not in ``sample_id``.
    Refused
        The item already has a label in this round (supersede it instead), or
        ``actor`` gave the other round's verdict on it (double review needs two
        people).
    """
    fields = verdict_fields(verdict, **details)
    actor = user_name(actor, what="acting user")

    if review_round is not None and review_round not in REVIEW_ROUNDS:
        raise InputError(
            f"review_round {review_round!r} is not one of {', '.join(REVIEW_ROUNDS)}"
            " (adjudications go through labels.agreement.adjudicate)"
        )

    def work(tx: duckdb.DuckDBPyConnection) -> Label:
        require(tx, actor, "label")
        context = _context(tx, extraction_id, actor, sample_id)
        if context.seed_sample is not None:
            return _seed_verdict(tx, context, extraction_id, actor, sample_id, fields)
        rnd = review_round or context.assigned_round or "primary"
        _check_context(context, extraction_id, actor, sample_id, rnd)
        return insert_label(
            tx, extraction_id, context.sample_id, rnd, actor, fields, supersedes=None
        )

    return write_with_retry(con, work, what=f"labelling {extraction_id}")


def supersede(
    con: duckdb.DuckDBPyConnection,
    *,
    actor: str,
    label_id: str,
    verdict: str,
    **details: Unpack[VerdictDetails],
) -> Label:
    """Correct a label by appending a row that supersedes it; the old row stays.

    The one way a verdict changes: the review page's Undo and "My recent
    labels" and ``fieldtrust labels correct`` all call it. Who may, and until
    when, is :func:`fieldtrust.labels.corrections.check_may_supersede`: the
    label's own reviewer within a week of their first verdict and before any
    adjudication of the item; a qa_lead any review's label at any time; an
    adjudication only a qa_lead. The new row keeps the extraction, sample and
    review round of the old one and names ``actor`` as its reviewer. Only the
    newest label of a chain can be superseded.

    Raises
    ------
    PermissionDenied, InputError, Refused
        As for :func:`record_verdict`; ``Refused`` when ``label_id`` was
        already superseded (supersede the newer label instead), when the
        reviewer's own window has passed or the item was adjudicated, or the
        label was imported.
    """
    fields = verdict_fields(verdict, **details)
    actor = user_name(actor, what="acting user")

    def work(tx: duckdb.DuckDBPyConnection) -> Label:
        old = get_label(tx, label_id)
        check_may_supersede(tx, actor, old)
        newer = first_row(tx.execute(
            "SELECT label_id, reviewer FROM labels WHERE supersedes = ?", [label_id]
        ).fetchall())
        if newer is not None:
            raise Refused(
                f"label {label_id} was already superseded by label {newer[0]} ({newer[1]});"
                " supersede that one instead"
            )
        return insert_label(
            tx, old.extraction_id, old.sample_id, old.review_round, actor, fields,
            supersedes=label_id,
        )

    return write_with_retry(con, work, what=f"superseding label {label_id}")


def get_label(con: duckdb.DuckDBPyConnection, label_id: str) -> Label:
    """The label row ``label_id``; :class:`InputError` when there is none."""
    row = first_row(con.execute(
        f"SELECT {_LABEL_COLUMNS} FROM labels WHERE label_id = ?", [label_id]
    ).fetchall())
    if row is None:
        raise InputError(f"no label {label_id!r} in the store; check the id")
    return Label(*row)


def label_history(con: duckdb.DuckDBPyConnection, extraction_id: str) -> list[Label]:
    """Every label ever recorded for one extraction (superseded ones too), oldest first."""
    rows = con.execute(
        f"SELECT {_LABEL_COLUMNS} FROM labels WHERE extraction_id = ?"
        " ORDER BY labeled_at, label_id",
        [extraction_id],
    ).fetchall()
    return [Label(*row) for row in rows]


def insert_label(
    con: duckdb.DuckDBPyConnection,
    extraction_id: str,
    sample_id: str | None,
    review_round: str,
    reviewer: str,
    fields: dict[str, Any],
    *,
    supersedes: str | None,
) -> Label:
    """Append one label row in ``reviewer``'s name and chain it (inside the caller's transaction).

    The last gate before the ``labels`` table, so it holds whatever calls it to
    the rules: ``reviewer`` is a user name holding a role that may label in
    ``review_round`` (``adjudicate`` for an adjudication), the round is one a
    person labels in (imports go through ``labels import``), the fields are
    what :func:`verdict_fields` makes of them, and superseding another
    reviewer's label needs ``supersede_others``.

    Raises
    ------
    PermissionDenied
        ``reviewer`` may not write this label.
    InputError
        An unknown round or extraction, or fields :func:`verdict_fields` refuses.
    """
    reviewer = user_name(reviewer, what="reviewer")
    if review_round not in (*REVIEW_ROUNDS, "adjudication"):
        raise InputError(
            f"review_round {review_round!r} is not one of {', '.join(REVIEW_ROUNDS)},"
            " adjudication (imported labels go through `fieldtrust labels import`)"
        )
    require(con, reviewer, "adjudicate" if review_round == "adjudication" else "label")
    checked = verdict_fields(
        fields.get("verdict", ""), fields.get("corrected_value"), fields.get("corrected_status"),
        fields.get("error_type"), fields.get("error_detail"),
    )
    if checked != fields:
        raise InputError("label fields must be what verdict_fields returns for them")
    if supersedes is not None:
        old = get_label(con, supersedes)
        if old.reviewer != reviewer and review_round != "adjudication":
            require(con, reviewer, "supersede_others")
    if not is_copied(con, extraction_id):
        if not has_extraction(con, extraction_id):
            raise InputError(f"no extraction {extraction_id!r} in the store; check the id")
        # Label readers use the sampled copy alone while it holds every labelled
        # item; a label from the priority queue (outside any sample) keeps it whole.
        record_sampled(con, "SELECT ?::VARCHAR", [extraction_id])
    label = Label(
        label_id=str(uuid.uuid4()),
        extraction_id=extraction_id,
        sample_id=sample_id,
        reviewer=reviewer,
        review_round=review_round,
        labeled_at=utc_now(),
        supersedes=supersedes,
        **fields,
    )
    inserted = con.execute(
        f"INSERT INTO labels ({_LABEL_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " RETURNING *",
        [
            label.label_id, label.extraction_id, label.sample_id, label.verdict,
            label.corrected_value, label.corrected_status, label.error_type,
            label.error_detail, label.reviewer, label.review_round, label.labeled_at,
            label.supersedes,
        ],
    )
    chain_returned(con, "labels", inserted)
    return label


def live_label(
    con: duckdb.DuckDBPyConnection, extraction_id: str, review_round: str
) -> Label | None:
    """The newest (not superseded) label of one extraction in one round, if any."""
    row = first_row(con.execute(
        f"SELECT {_LABEL_COLUMNS} FROM labels l WHERE extraction_id = ? AND review_round = ?"
        " AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)"
        " ORDER BY labeled_at DESC, label_id DESC LIMIT 1",
        [extraction_id, review_round],
    ).fetchall())
    return Label(*row) if row else None


# Everything record_verdict checks, read in one statement: each round trip
# costs milliseconds, and reviewers label thousands of items a week.
_CONTEXT_SQL = """
SELECT
    (SELECT i.sample_id FROM audit_items i JOIN audit_samples s USING (sample_id)
     WHERE i.extraction_id = $extraction AND ($sample IS NULL OR i.sample_id = $sample)
     ORDER BY s.week DESC, s.version DESC LIMIT 1) AS sample_id,
    (SELECT review_round FROM assignments WHERE extraction_id = $extraction
     AND reviewer = $actor ORDER BY assigned_at DESC LIMIT 1) AS assigned_round,
    (SELECT list({'round': review_round, 'reviewer': reviewer, 'label_id': label_id}
                 ORDER BY labeled_at DESC)
     FROM labels l WHERE extraction_id = $extraction
       -- a label supersedes one of its own extraction: asked of those alone, not of all
       AND NOT EXISTS (SELECT 1 FROM labels s WHERE s.extraction_id = $extraction
                                               AND s.supersedes = l.label_id)) AS live,
    (SELECT list(review_round) FROM assignments
     WHERE extraction_id = $extraction AND reviewer = $actor) AS my_assignments,
    (SELECT sample_id FROM seed_items WHERE seed_id = $extraction) AS seed_sample
"""


@dataclass(frozen=True)
class _Context:
    known: bool
    sample_id: str | None
    assigned_round: str | None
    live: list[dict[str, str]]
    my_assignments: list[str]
    seed_sample: str | None  # the item is a seed of this sample (labels.seed_verdicts)


def _context(
    con: duckdb.DuckDBPyConnection, extraction_id: str, actor: str, sample_id: str | None
) -> _Context:
    row = first_row(con.execute(
        _CONTEXT_SQL, {"extraction": extraction_id, "actor": actor, "sample": sample_id}
    ).fetchall())
    assert row is not None
    return _Context(has_extraction(con, extraction_id), row[0], row[1], row[2] or [],
                    row[3] or [], row[4])


def _seed_verdict(
    con: duckdb.DuckDBPyConnection, context: _Context, item_id: str, actor: str,
    sample_id: str | None, fields: dict[str, Any],
) -> Label:
    """A verdict on a seed: a seed verdict, not a label, answered as if it were one."""
    # Here, not at the top: seed_verdicts brings the statistics (scipy), which the
    # CLI's start must not load (tests/fieldtrust/cli/test_startup.py).
    from fieldtrust.labels.seed_verdicts import insert_seed_verdict

    if sample_id is not None and sample_id != context.seed_sample:
        raise InputError(
            f"extraction {item_id!r} is not in audit sample {sample_id!r};"
            " label it in the sample it was drawn into"
        )
    seed_sample = str(context.seed_sample)
    judged = insert_seed_verdict(con, item_id, seed_sample, actor, fields["verdict"])
    # The answer looks like any label's: the reviewer learns nothing on the page.
    return Label(
        label_id=judged.seed_verdict_id, extraction_id=item_id, sample_id=seed_sample,
        reviewer=actor, review_round="primary", labeled_at=judged.judged_at,
        supersedes=None, **fields,
    )


def _check_context(
    context: _Context, extraction_id: str, actor: str, sample_id: str | None, rnd: str
) -> None:
    if not context.known:
        raise InputError(f"no extraction {extraction_id!r} in the store; check the id")
    if sample_id is not None and context.sample_id is None:
        raise InputError(
            f"extraction {extraction_id!r} is not in audit sample {sample_id!r};"
            " label it in the sample it was drawn into"
        )
    current = next((label for label in context.live if label["round"] == rnd), None)
    if current is not None:
        # Name the label and its reviewer, never its verdict: a second reviewer
        # hitting this must stay blind to the first verdict.
        raise Refused(
            f"extraction {extraction_id} already has a {rnd} label"
            f" ({current['label_id']}, by {current['reviewer']}); to change it, supersede"
            " that label"
        )
    other = "second" if rnd == "primary" else "primary"
    mine = [label for label in context.live if label["reviewer"] == actor]
    if any(label["round"] == other for label in mine) or other in context.my_assignments:
        raise Refused(
            f"{actor} has the {other} review of extraction {extraction_id}: double review"
            f" needs a different person for the {rnd} review"
        )
