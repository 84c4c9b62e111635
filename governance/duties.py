"""Segregation of duties: how much of a stratum's evidence its approver labelled.

A manager who labelled every item a certificate rests on and then approves
automation on it has checked their own work: nobody else looked. The policy
setting ``max_own_label_share`` (:class:`fieldtrust.store.bar.Bar`) is the
largest share of the stratum's design-based labels, over the certification
window, an approver may have given. At its default (1) any share is allowed,
and approving on labels that are all the approver's says so; below 1,
:func:`fieldtrust.governance.acts.approve` refuses a larger share.

The CLI and the Automation page read the same :func:`own_labels` for their
warnings; :func:`check_own_labels` is what ``approve`` enforces.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import pyarrow.compute as pc
from fieldtrust.store.bar import Bar, resolve_bar
from fieldtrust.store.labelled import design_based_items
from fieldtrust.store.scope import Scope, last_weeks

from fieldtrust.errors import Refused


@dataclass(frozen=True)
class OwnLabels:
    """The approver's share of a stratum's design-based labels over a window."""

    actor: str
    doc_type: str
    field: str
    own: int  # design-based labels the approver gave
    total: int  # design-based labels of the stratum in the window
    weeks: tuple[str, ...]

    @property
    def share(self) -> float:
        """Share of the labels the approver gave (0 when the stratum has none)."""
        return self.own / self.total if self.total else 0.0

    @property
    def all_own(self) -> bool:
        """Every label the evidence rests on is the approver's."""
        return self.total > 0 and self.own == self.total

    def warning(self) -> str | None:
        """What approving on these labels means, when every one is the approver's; else None."""
        if not self.all_own:
            return None
        return (
            f"{self.actor} gave all {self.total:,} labels {self.doc_type}/{self.field}'s"
            " certificate rests on: nobody else checked them. An admin can forbid this with"
            " `fieldtrust policy settings --max-own-label-share 0.5`."
        )


def own_labels(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    doc_type: str,
    field: str,
    weeks: tuple[str, ...] | None = None,
) -> OwnLabels:
    """How many of (doc_type, field)'s design-based labels ``actor`` gave.

    ``weeks`` is the certification window; None takes the store's policy
    window (its last ``weeks`` weeks), the one an approval certifies over.
    The labels are the effective ones (an adjudication, not the reviews it
    settled), the same ones every estimate reads.
    """
    if weeks is None:
        cursor = con.cursor()  # store.scope.latest_week leaves a fetchone() result open
        try:
            weeks = last_weeks(cursor, resolve_bar(con).weeks)
        finally:
            cursor.close()
    items = design_based_items(con, Scope(weeks=weeks, doc_types=(doc_type,), fields=(field,)))
    own = int(pc.sum(pc.equal(items.column("reviewer"), actor)).as_py() or 0)
    return OwnLabels(actor, doc_type, field, own, items.num_rows, tuple(weeks))


def check_own_labels(own: OwnLabels, bar: Bar) -> None:
    """Refuse an approval whose approver gave more of its labels than the policy allows."""
    if own.total and own.share > bar.max_own_label_share + 1e-12:
        raise Refused(
            f"{own.actor} gave {own.own:,} of the {own.total:,} labels"
            f" {own.doc_type}/{own.field}'s certificate rests on ({own.share:.0%}); the"
            f" store's policy allows an approver at most {bar.max_own_label_share:.0%} of"
            " them (max_own_label_share): another person labels, or another manager approves"
        )
