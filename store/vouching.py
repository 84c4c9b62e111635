"""Vouching for history written before the store signed: an admin's one signature over it.

A store made before fieldtrust signed decisions holds decisions and policy
settings without signatures (:func:`fieldtrust.store.signing.signing_started`
marks where signing began). ``verify`` names each of them: they are neither
trusted silently nor left unverifiable. An admin who holds the signing key
checks them (``fieldtrust verify``, ideally against a head or a policy file
kept outside the store, and the decisions themselves) and vouches once:
:func:`vouch_for_history` signs the chain entry where signing began, which by
the chain's hashes covers every entry before it, and records who vouched, why
and when. Entries written after that are signed one by one by their writers.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
from fieldtrust.store.access import require, user_name
from fieldtrust.store.chain import ChainHead
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import write_with_retry
from fieldtrust.store.signing import current_signer, entry_message, signing_started
from fieldtrust.store.verify import verify_history

from fieldtrust.errors import Refused


@dataclass(frozen=True)
class Vouch:
    """What an admin vouched for: every chain entry up to ``seq``, ``entries`` of them signed
    tables' rows (decisions, policy settings) that had no signature."""

    seq: int
    entries: int
    key_id: str
    signed_by: str


def vouch_for_history(
    con: duckdb.DuckDBPyConnection, actor: str, comment: str, *,
    expected_head: ChainHead | None = None,
) -> Vouch:
    """Sign, as ``actor`` (an admin), the history written before the store signed decisions.

    Refused unless the history verifies but for those unsigned entries (no
    row changed, every later entry signed), and, given ``expected_head`` (a
    head kept outside the store), unless the chain still holds it.

    Raises
    ------
    PermissionDenied
        ``actor`` is not an admin.
    Refused
        No comment; nothing to vouch for; already vouched; or the history has
        other problems (named).
    SigningError
        No signing key is configured.
    """
    actor = user_name(actor, what="acting user")
    if not isinstance(comment, str) or not comment.strip():
        raise Refused("vouching for history needs a comment saying what you checked")
    signer = current_signer()

    def work(tx: duckdb.DuckDBPyConnection) -> Vouch:
        require(tx, actor, "vouch_history")
        check = verify_history(tx, expected_head=expected_head)
        waiting = [p for p in check.problems if p.kind == "unsigned_before_signing"]
        others = [p for p in check.problems if p.kind != "unsigned_before_signing"]
        if others or check.total_problems > len(check.problems):
            shown = others[0].describe() if others else check.summary()
            more = check.total_problems - len(waiting) - 1
            tail = f"; {more} more" if more > 0 else ""
            raise Refused(f"not vouched: the history has other problems first: {shown}{tail}."
                          " Restore the store from a backup, or find out who changed it")
        if not waiting:
            raise Refused("nothing to vouch for: every decision and policy setting is signed")
        seq = signing_started(tx)
        row_hash = tx.execute("SELECT row_hash FROM history_chain WHERE seq = ?",
                              [seq]).fetchall()[0][0]
        tx.execute(
            "INSERT INTO history_signatures"
            " (seq, kind, key_id, signature, signed_by, comment, signed_at)"
            " VALUES (?, 'vouch', ?, ?, ?, ?, ?)",
            [seq, signer.key_id, signer.sign(entry_message("vouch", seq, str(row_hash))), actor,
             comment.strip(), utc_now()],
        )
        return Vouch(seq, len(waiting), signer.key_id, actor)

    return write_with_retry(con, work, what="vouching for the history before signing")

