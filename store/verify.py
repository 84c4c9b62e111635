"""Checking the history chain: is every history row still as fieldtrust wrote it?

:func:`verify_history` recomputes the chain of :mod:`fieldtrust.store.chain` from its
first entry and compares every entry with the row it chained. It reports, in
chain order, every row that was altered (with the columns that changed, old
and new value), deleted, or inserted without passing through fieldtrust, and
any chain entry that was itself edited or removed. Given a head kept outside
the store (from a policy export), it also proves the chain up to that entry
was not rewritten wholesale. Every entry of a signed table (decisions, policy
settings; :mod:`fieldtrust.store.signing`) must carry a signature by a trusted
key, or lie under an admin's vouch: a row someone appended with the chain's
own public functions, without the key, is named as unsigned.
"""

from __future__ import annotations

import dataclasses
import json
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import duckdb
from fieldtrust.store.chain import (
    CHAINED,
    GENESIS,
    ChainHead,
    link_hash,
    row_json,
    row_key,
    table_rows,
)
from fieldtrust.store.signing import (
    SIGNED_TABLES,
    TrustedKeys,
    entry_message,
    signatures,
    signing_started,
    trusted_keys,
)
from fieldtrust.store.sql import has_table

from fieldtrust.errors import StoreError

#: Problems that say what could not be checked, rather than what was changed.
_NOT_CHECKED = frozenset({"no_trusted_key", "unsigned_before_signing"})

#: Problems kept in a report (the count covers them all).
MAX_PROBLEMS = 20
_SHOWN = 60



@dataclass(frozen=True)
class Change:
    """One column of an altered row: what the chain recorded and what the store holds now."""

    column: str
    chained: Any
    stored: Any


@dataclass(frozen=True)
class Problem:
    """One row or chain entry that does not match.

    ``kind``: ``altered`` (the row differs from what was chained), ``deleted``
    (a chained row is gone), ``inserted`` (a row no writer chained),
    ``chain_altered`` (a chain entry does not hash to its recorded hash),
    ``chain_gap`` (chain entries are missing), ``rewritten`` (the chain does
    not contain the head kept outside), ``unsigned`` (an entry of a signed
    table written without the signing key), ``unsigned_before_signing`` (one
    written before the store signed, and not vouched for), ``bad_signature``
    (a signature that does not hold, or by a key not trusted here; ``detail``
    says which) or ``no_trusted_key`` (signatures to check, and no key to
    check them with).
    """

    kind: str
    table: str
    key: str
    seq: int | None
    changes: tuple[Change, ...] = ()
    detail: str = ""

    def describe(self) -> str:
        """One line naming the row (table, key, chain position) and what changed."""
        where = f" (chain entry {self.seq})" if self.seq is not None else ""
        if self.kind == "no_trusted_key":
            return (f"{self.detail}: no trusted key is configured to check their signatures"
                    " (setting trusted_key_files, or signing_key_file; docs/governance.md)")
        what = {
            "altered": "was changed",
            "deleted": "was deleted",
            "inserted": "was inserted without fieldtrust (it is in no chain entry)",
            "chain_altered": "has a chain entry that does not hash to its recorded hash",
            "chain_gap": "is missing from the chain",
            "rewritten": "does not match the head kept outside the store",
            "unsigned": "is not signed: it was written without the signing key (by SQL or"
                        " a script, not by fieldtrust's acts)",
            "unsigned_before_signing": "was written before this store signed decisions and"
                                       " no admin has vouched for it (`fieldtrust keys vouch"
                                       " --as ADMIN`, after checking it)",
            "bad_signature": self.detail,
        }[self.kind]
        changed = "; ".join(
            f"{c.column} was {_shown(c.chained)}, now {_shown(c.stored)}" for c in self.changes
        )
        return f"{self.table} row {_key_text(self.key)}{where} {what}" + (
            f": {changed}" if changed else ""
        )


@dataclass(frozen=True)
class HistoryCheck:
    """What :func:`verify_history` found.

    ``head`` is the chain's newest entry as stored; ``rows`` counts the rows
    of every chained table; ``problems`` lists the first :data:`MAX_PROBLEMS`
    mismatches in chain order (rows inserted outside fieldtrust last) and
    ``total_problems`` counts them all.
    """

    head: ChainHead
    rows: dict[str, int]
    problems: tuple[Problem, ...] = field(default=())
    total_problems: int = 0

    @property
    def intact(self) -> bool:
        return self.total_problems == 0

    def summary(self) -> str:
        """One paragraph: the head and counts, or the first problem and how many there are."""
        if self.intact:
            counts = ", ".join(f"{n:,} {t}" for t, n in self.rows.items())
            return (
                f"history intact: {self.head.seq:,} chained rows ({counts});"
                f" head {self.head.seq}:{self.head.row_hash}"
            )
        more = self.total_problems - 1
        tail = f"; {more} more problem{'s' if more != 1 else ''}" if more else ""
        first = self.problems[0]
        if first.kind in _NOT_CHECKED:
            return f"history not verified: {first.describe()}{tail}"
        return (
            f"history altered outside fieldtrust: {first.describe()}{tail}."
            " Restore the store from a backup and compare, or ask who has write access to it"
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``fieldtrust verify --json`` prints); each problem carries its
        one-line ``message``."""
        return {
            "intact": self.intact,
            "head": {"seq": self.head.seq, "hash": self.head.row_hash},
            "rows": dict(self.rows),
            "total_problems": self.total_problems,
            "problems": [dict(dataclasses.asdict(p), message=p.describe()) for p in self.problems],
        }


def verify_history(
    con: duckdb.DuckDBPyConnection, *, expected_head: ChainHead | None = None,
    trusted: TrustedKeys | None = None,
) -> HistoryCheck:
    """Recompute the history chain, compare it with every chained row, check the signatures.

    Parameters
    ----------
    expected_head
        A head kept outside the store (``history_head`` of a policy export):
        the chain entry at its ``seq`` must carry its hash.
    trusted
        The keys signatures must be by; default
        :func:`fieldtrust.store.signing.trusted_keys`.

    Returns
    -------
    HistoryCheck
        ``intact`` when every chained row reads back as written and no row is
        unchained; otherwise the mismatches, the first one first.

    Raises
    ------
    StoreError
        The store has no history chain yet (opened only read-only since
        fieldtrust gained it); open it read-write once.
    """
    if not _has_chain(con):
        raise StoreError(
            "this store has no history chain yet: open it once with a command that writes"
            " (e.g. `fieldtrust labels import` or `fieldtrust users grant`), which adds it"
        )
    entries = con.execute(
        "SELECT seq, table_name, row_key, row_json, row_hash FROM history_chain ORDER BY seq"
    ).fetchall()
    current = {name: _by_key(name, table_rows(con, name)) for name in CHAINED}
    rows = {name: sum(len(v) for v in by_key.values()) for name, by_key in current.items()}
    problems = _check_links(entries, expected_head)
    problems += _check_signatures(con, entries, trusted_keys() if trusted is None else trusted)
    problems += _check_rows(entries, current)
    head = ChainHead(int(entries[-1][0]), str(entries[-1][4])) if entries else ChainHead(0, GENESIS)
    return HistoryCheck(head, rows, tuple(problems[:MAX_PROBLEMS]), len(problems))


def _has_chain(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = 'history_chain'"
    ).fetchall()
    return bool(rows[0][0])


def _by_key(table: str, rows: list[dict[str, Any]]) -> dict[str, list[str]]:
    """The rows of one table as key -> canonical JSON texts (a list: keys may repeat)."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for row in rows:
        grouped[row_key(table, row)].append(row_json(row))
    return grouped


def _check_links(
    entries: list[tuple[Any, ...]], expected: ChainHead | None
) -> list[Problem]:
    """Chain entries that do not hash as recorded, gaps in ``seq``, and a rewritten chain."""
    problems = []
    previous, next_seq = GENESIS, 1
    for seq, table, key, text, recorded in entries:
        if seq != next_seq:
            problems.append(Problem("chain_gap", table, key, next_seq))
        next_seq = seq + 1
        if link_hash(previous, table, text) != recorded:
            problems.append(Problem("chain_altered", table, key, seq))
        previous = recorded  # one edited entry must not flag every later one
        if expected is not None and seq == expected.seq and recorded != expected.row_hash:
            problems.append(Problem("rewritten", table, key, seq))
    if expected is not None and expected.seq > len(entries):
        problems.append(Problem("rewritten", "history_chain", f"seq {expected.seq}", None))
    return problems


def _check_signatures(
    con: duckdb.DuckDBPyConnection, entries: list[tuple[Any, ...]], trusted: TrustedKeys
) -> list[Problem]:
    """Entries of signed tables without a signature that holds, in chain order."""
    signed = [e for e in entries if e[1] in SIGNED_TABLES]
    if not has_table(con, "history_signatures"):  # opened read-only before migration 0035
        return [Problem("unsigned_before_signing", t, k, s) for s, t, k, _, _ in signed]
    hashes = {int(e[0]): str(e[4]) for e in entries}
    found = {(s.seq, s.kind): s for s in signatures(con)}
    problems: list[Problem] = []
    if not trusted and (found or signed):
        problems.append(Problem("no_trusted_key", "history_signatures", "", None,
                                detail=f"{len(signed):,} entries of signed tables"))
    # Without a trusted key nothing is checked (no_trusted_key says so); what each
    # signature would cover is still told apart from what has none.
    vouched = 0
    for (seq, kind), vouch in sorted(found.items()):
        if kind != "vouch":
            continue
        why = trusted.check(vouch.key_id, entry_message("vouch", seq, hashes.get(seq, "")),
                            vouch.signature) if trusted else None
        if why is None:
            vouched = max(vouched, seq)
        else:
            problems.append(Problem("bad_signature", "history_chain", f"seq {seq}", seq,
                                    detail=f"has a vouch by {vouch.signed_by} signed {why}"))
    started = signing_started(con)
    for seq, table, key, _, row_hash in signed:
        signature = found.get((seq, "entry"))
        if signature is not None:
            why = trusted.check(signature.key_id, entry_message("entry", seq, row_hash),
                                signature.signature) if trusted else None
            if why is not None:
                problems.append(Problem("bad_signature", table, key, seq,
                                        detail=f"is signed {why}"))
        elif seq > vouched:
            kind = "unsigned_before_signing" if seq <= started else "unsigned"
            problems.append(Problem(kind, table, key, seq))
    return problems


def _check_rows(
    entries: list[tuple[Any, ...]], current: dict[str, dict[str, list[str]]]
) -> list[Problem]:
    """Chained rows altered or deleted (in chain order), then rows nobody chained."""
    problems = []
    for seq, table, key, text, _ in entries:
        candidates = current.get(table, {}).get(key)
        if candidates and text in candidates:
            candidates.remove(text)
            continue
        chained = json.loads(text)
        same = [c for c in candidates or () if not _changes(chained, json.loads(c))]
        if same:  # equal but for a column added to the table after it was chained
            candidates.remove(same[0])  # type: ignore[union-attr]
        elif candidates:
            changes = _changes(chained, json.loads(candidates.pop(0)))
            problems.append(Problem("altered", table, key, seq, changes))
        else:
            problems.append(Problem("deleted", table, key, seq))
    for table, by_key in current.items():
        for key, left in by_key.items():
            problems.extend(Problem("inserted", table, key, None) for _ in left)
    return problems


def _changes(chained: dict[str, Any], stored: dict[str, Any]) -> tuple[Change, ...]:
    """Columns whose value differs; a column absent when chained and NULL now is unchanged."""
    return tuple(
        Change(column, chained.get(column), stored.get(column))
        for column in sorted(chained.keys() | stored.keys())
        if chained.get(column) != stored.get(column)
    )


def _key_text(key: str) -> str:
    """A row key for people: ``'abc'`` for one column, ``('ana', '2026-...')`` for several."""
    try:
        values = json.loads(key)
    except ValueError:
        return key
    if isinstance(values, list) and len(values) == 1:
        return _shown(values[0])
    return "(" + ", ".join(_shown(v) for v in values) + ")" if isinstance(values, list) else key


def _shown(value: Any) -> str:
    text = repr(value) if value is not None else "NULL"
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
