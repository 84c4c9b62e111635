"""Verdicts on seeds: recorded apart from labels, counted for the certificate (STATS.md 13).

A seed (:mod:`fieldtrust.sampling.seeding`) reaches a reviewer as an item
like any other, and the verdict is given through the same door
(:func:`fieldtrust.labels.verdicts.record_verdict`), held to the same rules
(an ``incorrect`` verdict needs its corrected value and error type, so the
screen behaves the same). The door sends it here: it becomes a row of
``seed_verdicts``, never a label, and the reviewer is told nothing more than
for a real item. ``correct`` on a seed is a *miss* (the seeded wrong value
passed); ``incorrect`` and ``unclear`` catch it (the certificate counts
unclear as an error too).

:func:`seed_judgements` gives a stratum's counts, the certificate's input
(:class:`~fieldtrust.calibration.seeds.SeedJudgements`), and
:func:`seed_refusal` the reason a certificate is refused while too few seeds
were judged.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

import duckdb
from fieldtrust.calibration.seeds import MIN_SEEDS, SeedJudgements, stored_judgements
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.connection import utc_now
from fieldtrust.store.retry import first_row

from fieldtrust.errors import Refused

#: The reason code of a certificate refused for too few judged seeds.
TOO_FEW_SEEDS = "too_few_seeds"


@dataclass(frozen=True)
class SeedVerdict:
    """One row of ``seed_verdicts``."""

    seed_verdict_id: str
    seed_id: str
    sample_id: str
    reviewer: str
    verdict: str
    judged_at: dt.datetime


def seed_sample_of(con: duckdb.DuckDBPyConnection, item_id: str) -> str | None:
    """The sample of seed ``item_id``, or None when the id is not a seed."""
    row = first_row(con.execute(
        "SELECT sample_id FROM seed_items WHERE seed_id = ?", [item_id]
    ).fetchall())
    return str(row[0]) if row else None


def insert_seed_verdict(
    con: duckdb.DuckDBPyConnection, seed_id: str, sample_id: str, reviewer: str, verdict: str
) -> SeedVerdict:
    """Append ``reviewer``'s verdict on a seed and chain it (inside the caller's transaction).

    The caller has checked the role and the verdict's fields
    (:func:`fieldtrust.labels.verdicts.record_verdict`).

    Raises
    ------
    Refused
        The seed has a verdict already; worded as for a labelled item, so the
        message does not tell a seed apart.
    """
    done = first_row(con.execute(
        "SELECT seed_verdict_id, reviewer FROM seed_verdicts WHERE seed_id = ?", [seed_id]
    ).fetchall())
    if done is not None:
        raise Refused(
            f"extraction {seed_id} already has a primary label ({done[0]}, by {done[1]});"
            " to change it, supersede that label"
        )
    inserted = con.execute(
        "INSERT INTO seed_verdicts (seed_verdict_id, seed_id, sample_id, reviewer, verdict,"
        " judged_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING *",
        [str(uuid.uuid4()), seed_id, sample_id, reviewer, verdict, utc_now()],
    )
    chain_returned(con, "seed_verdicts", inserted)
    row = con.execute(
        "SELECT seed_verdict_id, seed_id, sample_id, reviewer, verdict, judged_at"
        " FROM seed_verdicts WHERE seed_id = ?", [seed_id]
    ).fetchall()[0]
    return SeedVerdict(*row)


def seed_judgements(
    con: duckdb.DuckDBPyConnection, *, doc_type: str, field: str
) -> SeedJudgements:
    """Seeds of one stratum judged so far, and how many were missed (judged correct).

    Every sample's seeds of the stratum count: the miss-rate bound
    (:func:`fieldtrust.calibration.seeds.miss_rate_upper_bound`) is a confidence
    sequence, valid at every number of seeds judged.

    Parameters
    ----------
    doc_type, field
        The stratum.

    Returns
    -------
    SeedJudgements
        ``judged`` and ``missed`` (0 and 0 for a stratum never seeded).

    References
    ----------
    STATS.md section 13; docs/statistics.md "Reviewer misses (seeds)".
    """
    return stored_judgements(con).get((doc_type, field), SeedJudgements(0, 0))


@dataclass(frozen=True)
class SeedRefusal:
    """Why a certificate that allows for reviewer misses cannot be issued yet."""

    code: str  # TOO_FEW_SEEDS
    judged: int
    needed: int

    @property
    def text(self) -> str:
        """``refused: 12 seeds judged, at least 30 needed``."""
        return f"refused: {self.judged} seeds judged, at least {self.needed} needed"


def seed_refusal(judgements: SeedJudgements, *, min_seeds: int = MIN_SEEDS) -> SeedRefusal | None:
    """The refusal while fewer than ``min_seeds`` seeds were judged, else None.

    ``min_seeds`` defaults to :data:`fieldtrust.calibration.seeds.MIN_SEEDS`, the
    count ``miss_allowance`` refuses below, so both say the same.
    """
    if judgements.judged >= min_seeds:
        return None
    return SeedRefusal(TOO_FEW_SEEDS, judgements.judged, min_seeds)
