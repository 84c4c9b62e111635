"""Blind re-keying: the reviewer types the value without seeing the extraction's (STATS.md 13).

Where the model is confident, reviewers shown its value pass it (automation
bias: reader sensitivity on AI false negatives fell from 71% to 39%, Taib et
al.). Re-keying avoids it: the item is shown without its value
(:class:`BlindItem`), the reviewer types what the document says, and the
library compares. A typed value equal to the extraction's (case, outer
spaces and, for numbers, thousands separators aside) is recorded as a
``correct`` primary label; one that differs records no verdict and waits
for a qa_lead's adjudication (:func:`rekey_queue`,
:func:`fieldtrust.labels.agreement.adjudicate`), since either may have
mistyped. Every keying is kept in ``rekeyed_values`` (chained).

It is an option for the high-confidence cells: :func:`next_blind_items`
hands out only items stated at least ``above`` confident. On a seed the
typed value is compared with the seeded (wrong) value: typing it is a miss.
"""

from __future__ import annotations

import datetime as dt
import re
import uuid
from dataclasses import dataclass

import duckdb
from fieldtrust.labels.assignment import next_items
from fieldtrust.labels.seed_verdicts import insert_seed_verdict
from fieldtrust.labels.verdicts import Label, insert_label, verdict_fields
from fieldtrust.store.access import require, user_name
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import first_row, write_with_retry
from fieldtrust.store.scope import Scope

from fieldtrust.errors import InputError, Refused

#: Blind re-keying is for cells at or above this stated confidence unless told otherwise.
DEFAULT_ABOVE = 0.95

_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@dataclass(frozen=True)
class BlindItem:
    """An item to re-key: where to look, without the extracted value or the excerpt.

    The excerpt is the text around the extracted value (or, for a seed, the
    host's true value): it would point at the answer. The reviewer reads the
    document.
    """

    sample_id: str
    extraction_id: str
    cell: str
    doc_id: str
    doc_type: str
    form_version: str
    field: str


@dataclass(frozen=True)
class Rekeyed:
    """One keying: whether it matched, and the label it made (None: waits for adjudication)."""

    rekey_id: str
    extraction_id: str
    matches: bool
    label: Label | None


def next_blind_items(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    sample_id: str | None = None,
    *,
    above: float = DEFAULT_ABOVE,
    count: int = 10,
) -> list[BlindItem]:
    """The next items stated at least ``above`` confident, assigned to ``actor``, value hidden.

    Raises as :func:`fieldtrust.labels.assignment.next_items`.
    """
    if not 0 <= above <= 1:
        raise InputError(f"above must be a confidence in [0, 1], got {above}")
    items = next_items(con, actor, sample_id, count=count, min_confidence=above)
    return [
        BlindItem(i.sample_id, i.extraction_id, i.cell, i.doc_id, i.doc_type, i.form_version,
                  i.field)
        for i in items
    ]


def same_value(typed: str | None, value: str | None) -> bool:
    """Whether a typed value is the stored one: case and outer spaces aside, and for numbers
    thousands separators too (``1,234.50`` is ``1234.5``)."""
    if typed is None or value is None:
        return typed is None and value is None
    a, b = typed.strip().casefold(), value.strip().casefold()
    if a == b:
        return True
    x, y = a.replace(",", "").replace(" ", ""), b.replace(",", "").replace(" ", "")
    return bool(_NUMBER.match(x) and _NUMBER.match(y) and float(x) == float(y))


_TARGET_SQL = """
SELECT coalesce(s.seed_value, e.value),
       CASE WHEN s.seed_id IS NOT NULL THEN 'present' ELSE e.value_status END,
       s.sample_id, s.seed_id IS NOT NULL
FROM (SELECT $id AS id) q
LEFT JOIN seed_items s ON s.seed_id = q.id
LEFT JOIN extractions e ON e.extraction_id = q.id
"""


def record_rekey(
    con: duckdb.DuckDBPyConnection,
    *,
    actor: str,
    extraction_id: str,
    typed_value: str | None,
    sample_id: str | None = None,
) -> Rekeyed:
    """Record ``actor``'s blind keying of one item; a match is a ``correct`` primary label.

    Parameters
    ----------
    actor
        The reviewer (a role allowed to ``label``).
    extraction_id
        The item keyed (as handed out by :func:`next_blind_items`).
    typed_value
        What the document says; None: the field is absent from the document.
    sample_id
        The audit sample of the item; default the newest holding it.

    Raises
    ------
    PermissionDenied
        ``actor`` may not label.
    InputError
        An unknown item, or an empty typed value (type the value, or say it is absent).
    Refused
        The item was keyed or labelled already.
    """
    actor = user_name(actor, what="acting user")
    if typed_value is not None and not typed_value.strip():
        raise InputError("the typed value is empty: type what the document says, or mark the"
                         " field absent")

    def work(tx: duckdb.DuckDBPyConnection) -> Rekeyed:
        require(tx, actor, "label")
        row = first_row(tx.execute(_TARGET_SQL, {"id": extraction_id}).fetchall())
        assert row is not None
        value, status, seed_sample, is_seed = row
        if value is None and status is None:
            raise InputError(f"no extraction {extraction_id!r} in the store; check the id")
        _check_not_judged(tx, extraction_id)
        shown = value if status == "present" else None
        matches = same_value(typed_value, shown)
        sample = seed_sample if is_seed else (sample_id or _sample_of(tx, extraction_id))
        rekey_id = str(uuid.uuid4())
        inserted = tx.execute(
            "INSERT INTO rekeyed_values VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            [rekey_id, extraction_id, sample, actor, typed_value,
             "present" if typed_value is not None else "null", matches, utc_now()],
        )
        chain_returned(tx, "rekeyed_values", inserted)
        if is_seed:  # typing the seeded value is passing it: a miss
            insert_seed_verdict(tx, extraction_id, str(sample), actor,
                                "correct" if matches else "incorrect")
            return Rekeyed(rekey_id, extraction_id, matches, None)
        label = None
        if matches:
            label = insert_label(tx, extraction_id, sample, "primary", actor,
                                 verdict_fields("correct", None, None, None, None),
                                 supersedes=None)
        return Rekeyed(rekey_id, extraction_id, matches, label)

    return write_with_retry(con, work, what=f"re-keying {extraction_id}")


def _check_not_judged(con: duckdb.DuckDBPyConnection, extraction_id: str) -> None:
    done = first_row(con.execute(
        "SELECT reviewer FROM rekeyed_values WHERE extraction_id = $id"
        " UNION ALL SELECT reviewer FROM labels WHERE extraction_id = $id"
        "   AND review_round = 'primary'"
        " UNION ALL SELECT reviewer FROM seed_verdicts WHERE seed_id = $id LIMIT 1",
        {"id": extraction_id},
    ).fetchall())
    if done is not None:
        raise Refused(f"extraction {extraction_id} was judged already (by {done[0]}); a"
                      " re-key is a first look")


def _sample_of(con: duckdb.DuckDBPyConnection, extraction_id: str) -> str | None:
    row = first_row(con.execute(
        "SELECT i.sample_id FROM audit_items i JOIN audit_samples s USING (sample_id)"
        " WHERE i.extraction_id = ? ORDER BY s.week DESC, s.version DESC LIMIT 1",
        [extraction_id],
    ).fetchall())
    return None if row is None else str(row[0])


@dataclass(frozen=True)
class WaitingRekey:
    """A typed value that differs from the extraction's, waiting for a qa_lead."""

    extraction_id: str
    sample_id: str | None
    doc_type: str
    field: str
    value: str | None
    typed_value: str | None
    reviewer: str
    keyed_at: dt.datetime


def rekey_queue(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> list[WaitingRekey]:
    """Re-keyed items whose typed value differs and that no adjudication has settled yet."""
    where, params = scope.where("e")
    rows = con.execute(
        "SELECT r.extraction_id, r.sample_id, e.doc_type, e.field, e.value, r.typed_value,"
        " r.reviewer, r.keyed_at"
        " FROM rekeyed_values r JOIN extractions e USING (extraction_id)"
        " WHERE NOT r.matches AND NOT EXISTS (SELECT 1 FROM labels l"
        "   WHERE l.extraction_id = r.extraction_id AND l.review_round = 'adjudication')"
        f" AND {where} ORDER BY r.keyed_at, r.extraction_id",
        params,
    ).fetchall()
    return [WaitingRekey(*row) for row in rows]
