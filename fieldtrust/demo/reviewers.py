"""Simulated reviewers: eight weeks of audit samples labelled from the hidden truth.

For each week the audit sample is drawn exactly as ``fieldtrust sample`` would
(:func:`fieldtrust.sampling.draw.draw_sample` with :data:`DEMO_DESIGN` and the default
settings seed, so a later ``fieldtrust sample --week ... --design`` with the same design
finds it instead of drawing a new version), by the demo qa_lead once the demo people hold their
roles. Every item gets a primary review; items the sample
marks ``double_review`` get a blind second review by another reviewer. Each
review reads the demo truth and is wrong with a small probability, so the
store has realistic agreement data; disagreements of all but the newest week
are settled by the qa_lead through :func:`fieldtrust.labels.agreement.adjudicate`, the
newest week's wait in the adjudication queue.

Every label is validated by :func:`fieldtrust.labels.verdicts.verdict_fields` and the
reviewers' roles are checked with :func:`fieldtrust.store.access.require`. The rows are
then appended in one INSERT rather than one :func:`record_verdict` call each:
about 13,000 calls at ~12 ms would take minutes, and the bulk path lets each
label carry a ``labeled_at`` in the week after its sample (a believable
history; for a week that ended days ago, squeezed into the days since, so no
label lies ahead of the clock) and a deterministic id. The checks ``record_verdict`` makes per call
hold by construction here: every item is in its sample, each (item, round)
gets one label, and the two rounds always have different reviewers.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from fieldtrust.demo.truth import truth_rows
from fieldtrust.demo.users import QA_LEAD, REVIEWERS, grant_demo_roles
from fieldtrust.demo.values import OTHER_PAYMENTS, misread_digit, misread_letter
from fieldtrust.errors import InputError, Refused
from fieldtrust.labels.agreement import adjudicate
from fieldtrust.labels.verdicts import verdict_fields
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.settings import Settings
from fieldtrust.store.chain import chain_rows
from fieldtrust.store.connection import transaction, utc_now
from fieldtrust.store.weeks import Week, week_sql

#: A review of a wrong item misses the error with chance ``rate * MISS_FACTOR``;
#: a review of a right item calls it wrong with chance ``rate * FALSE_ALARM_FACTOR``.
MISS_FACTOR = 3.0
FALSE_ALARM_FACTOR = 0.2
#: The demo's audit design: the default design at a 3% base rate. At the default's 1%,
#: eight weeks of labels certify no demo stratum under the anytime-valid certificate
#: (valid at every weekly look, STATS.md section 12); at 3%, three of the five strata
#: the truth makes ready do, and the others show what they still need.
DEMO_DESIGN = Design(base_rate=0.03)
_NAMESPACE = uuid.UUID("6f1c2f5e-3d0a-4c1e-9a57-0d3b1f2a7c11")

_ITEMS_SQL = """
SELECT i.sample_id, i.extraction_id, i.double_review, e.field, e.value, e.value_status,
       t.correct, t.true_value, t.error_type, t.error_detail,
       row_number() OVER (PARTITION BY i.cell ORDER BY i.prn, i.extraction_id) AS cell_rank,
       count(*) OVER (PARTITION BY i.cell) AS cell_size
FROM audit_items i
JOIN extractions e USING (extraction_id)
JOIN demo_truth t USING (extraction_id)
WHERE i.sample_id = ?
ORDER BY i.cell, i.prn, i.extraction_id
"""



@dataclass(frozen=True)
class ReviewSummary:
    """What the simulated reviewers did."""

    samples: int
    items: int
    labels: int
    double_reviewed: int
    disagreements: int
    adjudicated: int


def simulate_reviews(
    con: duckdb.DuckDBPyConnection,
    *,
    seed: int,
    reviewer_error_rate: float = 0.01,
    reviewers: Sequence[str] = REVIEWERS,
    weeks: Sequence[str] | None = None,
    current_week_share: float = 0.6,
    now: dt.datetime | None = None,
) -> ReviewSummary:
    """Draw each week's audit sample and label it from ``demo_truth``.

    Parameters
    ----------
    con
        Read-write connection to a demo store (extractions and demo_truth).
    seed
        Seed of the reviewers' choices and mistakes (not of the sample, which
        uses the default settings seed so the CLI finds it again).
    reviewer_error_rate
        Scale of the reviewers' mistakes: a review misses a real error with
        chance ``3 * rate`` and flags a right extraction with chance
        ``0.2 * rate`` (people overlook plausible errors far more often than
        they invent them; symmetric slips at 1% would bias every estimate
        down by about a point on a 97%-accurate population).
    reviewers
        Names given the reviewer role; a double review never has the same
        person twice, so at least two are needed.
    weeks
        ISO weeks to sample; default every week the store holds.
    current_week_share
        Share of each cell of the newest week's sample that is labelled: its
        first items in PRN order (a prefix, so the labels are a simple random
        sample of the cell, STATS.md section 10). The rest waits for a
        visitor acting as a reviewer.
    now
        The clock (naive UTC; default: now). No label lies ahead of it: the
        reviews of a week whose working days after it have not all come yet
        are squeezed into the days that have (labels import refuses a label
        time ahead of the clock, so the demo's own export would not import).
    """
    if len(set(reviewers)) < 2:
        raise InputError(f"double review needs at least two reviewers, got {list(reviewers)}")
    if not 0 <= reviewer_error_rate < 0.5:
        raise InputError(f"reviewer_error_rate must be in [0, 0.5), got {reviewer_error_rate}")
    # Plain execute() first: it also settles a result another caller left
    # half-fetched, which DuckDB 2.0 would otherwise refuse con.sql() over.
    if not truth_rows(con):
        raise Refused(
            "this store has no demo truth to review against; build it with `fieldtrust demo`"
        )
    weeks = [Week(w) for w in weeks] if weeks is not None else _store_weeks(con)
    rng = np.random.default_rng([seed, 0xD3])
    latest = (now or utc_now()) - dt.timedelta(minutes=1)
    tables: list[pa.Table] = []
    disagreements: list[tuple[str, dict[str, Any]]] = []
    grant_demo_roles(con, reviewers)  # first: drawing is checked against the qa_lead's role
    for week in weeks:
        sample = draw_sample(con, week, DEMO_DESIGN, seed=Settings().seed, actor=QA_LEAD)
        items = con.sql(_ITEMS_SQL, params=[sample.sample_id]).to_arrow_table()
        if week == weeks[-1]:
            items = _prefix(items, current_week_share)
        table, disagree = _labels_for(rng, items, week, seed, reviewer_error_rate,
                                      list(reviewers), latest)
        tables.append(table)
        if week != weeks[-1]:  # the newest week's disagreements wait for the qa_lead
            disagreements.extend(disagree)
    labels = pa.concat_tables(tables)
    _insert(con, labels)
    for extraction_id, fields in disagreements:
        adjudicate(
            con,
            QA_LEAD,
            extraction_id,
            fields["verdict"],
            corrected_value=fields["corrected_value"],
            corrected_status=fields["corrected_status"],
            error_type=fields["error_type"],
            error_detail=fields["error_detail"],
        )
    seconds = int(pa.compute.sum(pa.compute.equal(labels["review_round"], "second")).as_py() or 0)
    return ReviewSummary(
        samples=len(weeks),
        items=labels.num_rows - seconds,
        labels=labels.num_rows + len(disagreements),
        double_reviewed=seconds,
        disagreements=len(disagreements) + _pending(con),
        adjudicated=len(disagreements),
    )


def _store_weeks(con: duckdb.DuckDBPyConnection) -> list[Week]:
    rows = con.execute(
        f"SELECT DISTINCT {week_sql('extracted_at')} AS w FROM extractions ORDER BY w"
    ).fetchall()
    return [Week(w) for (w,) in rows]


def _verdict(row: dict[str, object], slip: bool) -> str:
    """The truth, unless the reviewer slips (on an empty value a slip is 'unclear')."""
    if not slip:
        return "correct" if row["correct"] else "incorrect"
    if row["value"] is None:
        return "unclear"
    return "incorrect" if row["correct"] else "correct"


def _fields(row: dict[str, object], verdict: str, u: float) -> dict[str, Any]:
    """The label columns of a verdict on ``row``, validated by the labels package."""
    if verdict in ("correct", "unclear"):
        return verdict_fields(verdict, None, None, None, None)
    if row["correct"]:  # a reviewer's slip: they see a misread that is not there
        value = str(row["value"])
        wrong = (
            misread_digit(value, u) if any(c.isdigit() for c in value) else misread_letter(value, u)
        )
        return verdict_fields("incorrect", wrong, None, "misread_characters", "reviewer slip")
    true_value = row["true_value"]
    status = "present"
    if true_value is None:
        status = "null"
    elif row["field"] == "payment_method" and true_value in OTHER_PAYMENTS:
        status = "other"
    return verdict_fields(
        "incorrect",
        None if true_value is None else str(true_value),
        status,
        str(row["error_type"]),
        str(row["error_detail"]) if row["error_detail"] is not None else None,
    )


def _prefix(items: pa.Table, share: float) -> pa.Table:
    """The first ``share`` of each cell's items in PRN order (at least one per cell)."""
    keep = pa.compute.less_equal(
        items["cell_rank"],
        pa.compute.max_element_wise(
            pa.compute.ceil(pa.compute.multiply(items["cell_size"].cast(pa.float64()), share)),
            pa.scalar(1.0),
        ).cast(pa.int64()),
    )
    return items.filter(keep)


def _labels_for(
    rng: np.random.Generator,
    items: pa.Table,
    week: Week,
    seed: int,
    error_rate: float,
    reviewers: list[str],
    latest: dt.datetime,
) -> tuple[pa.Table, list[tuple[str, dict[str, Any]]]]:
    """Primary and second labels of one sample, and the disagreements to adjudicate."""
    rows = items.to_pylist()
    n = len(rows)
    primary = rng.integers(0, len(reviewers), n)
    second = (primary + rng.integers(1, len(reviewers), n)) % len(reviewers)
    # Reviewers overlook a plausible error far more often than they invent one.
    wrong = ~np.asarray(items["correct"].to_numpy(zero_copy_only=False), dtype=bool)
    slip_rate = np.where(wrong, error_rate * MISS_FACTOR, error_rate * FALSE_ALARM_FACTOR)
    slips = rng.random((n, 2)) < slip_rate[:, None]
    u = rng.random((n, 2))
    # Reviews happen in the working days after the sampled week, office hours.
    start = week.end
    minutes = rng.integers(0, 5, (n, 2)) * 1440 + rng.integers(8 * 60, 17 * 60, (n, 2)) \
        + np.array([0, 30])
    minutes = _before(minutes.astype(float), start, latest)
    out: list[dict[str, object]] = []
    disagreements: list[tuple[str, dict[str, Any]]] = []
    for i, row in enumerate(rows):
        rounds = [("primary", reviewers[primary[i]])]
        if row["double_review"]:
            rounds.append(("second", reviewers[second[i]]))
        verdicts = []
        for k, (rnd, reviewer) in enumerate(rounds):
            verdict = _verdict(row, bool(slips[i, k]))
            verdicts.append(verdict)
            fields = _fields(row, verdict, float(u[i, k]))
            key = f"demo:{seed}:{row['sample_id']}:{row['extraction_id']}:{rnd}"
            out.append(
                {
                    "label_id": str(uuid.uuid5(_NAMESPACE, key)),
                    "extraction_id": row["extraction_id"],
                    "sample_id": row["sample_id"],
                    **fields,
                    "reviewer": reviewer,
                    "review_round": rnd,
                    "labeled_at": start + dt.timedelta(minutes=round(minutes[i, k], 3)),
                }
            )
        if len(set(verdicts)) > 1:
            truth = "correct" if row["correct"] else "incorrect"
            disagreements.append((str(row["extraction_id"]), _fields(row, truth, 0.0)))
    return pa.Table.from_pylist(out, schema=_LABELS), disagreements


#: The label rows' types: a week whose labels all lack a correction would
#: otherwise type those columns null, and its table would not join the others'.
_LABELS = pa.schema([
    *((name, pa.string()) for name in (
        "label_id", "extraction_id", "sample_id", "verdict", "corrected_value",
        "corrected_status", "error_type", "error_detail", "reviewer", "review_round")),
    ("labeled_at", pa.timestamp("us")),
])


def _before(minutes: npt.NDArray[np.float64], start: dt.datetime,
            latest: dt.datetime) -> npt.NDArray[np.float64]:
    """Review times (minutes after ``start``) moved before ``latest``, in the same order.

    Squeezed into the time since ``start`` when there is an hour of it, else
    moved back whole.
    """
    room = (latest - start).total_seconds() / 60
    last = float(minutes.max()) if minutes.size else 0.0
    if last <= room:
        return minutes
    if room >= 60:
        return minutes * (room / last)
    return minutes - (last - room)


def _insert(con: duckdb.DuckDBPyConnection, labels: pa.Table) -> None:
    # BEGIN (an execute) comes first: labels' role lookups may leave a result
    # half-fetched, and DuckDB 2.0 refuses register() until one is settled.
    with transaction(con):
        con.register("demo_labels_staged", labels)
        try:
            con.execute(
                "INSERT INTO labels (label_id, extraction_id, sample_id, verdict, corrected_value,"
                " corrected_status, error_type, error_detail, reviewer, review_round, labeled_at)"
                " SELECT label_id, extraction_id, sample_id, verdict, corrected_value,"
                " corrected_status, error_type, error_detail, reviewer, review_round,"
                " labeled_at::TIMESTAMP FROM demo_labels_staged"
            )
        finally:
            con.unregister("demo_labels_staged")
        chain_rows(con, "labels", {"label_id": labels["label_id"].to_pylist()})


def _pending(con: duckdb.DuckDBPyConnection) -> int:
    """Disagreements still waiting for adjudication."""
    row = con.execute(
        """
        WITH live AS (SELECT * FROM labels l
                      WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id))
        SELECT count(*) FROM live p JOIN live s USING (extraction_id)
        WHERE p.review_round = 'primary' AND s.review_round = 'second' AND p.verdict <> s.verdict
          AND NOT EXISTS (SELECT 1 FROM live a WHERE a.extraction_id = p.extraction_id
                          AND a.review_round = 'adjudication')
        """
    ).fetchall()
    return int(row[0][0])
