"""Reviewer agreement on double-reviewed items, and adjudication (STATS.md section 9).

For every extraction with a live primary and a live second label we compare
the two verdicts (correct / incorrect / unclear). Agreement is reported per
(doc_type, field) and per reviewer pair as percent agreement and Cohen's
kappa, the agreement beyond what the two reviewers' own verdict rates would
give by chance:

    kappa = (p_o - p_e) / (1 - p_e),   p_e = sum_k (n_k,a / n) * (n_k,b / n)

(Cohen, "A coefficient of agreement for nominal scales", Educational and
Psychological Measurement 20, 1960). It is NaN when ``p_e = 1`` (both
reviewers gave one and the same verdict to every item), as in
``sklearn.metrics.cohen_kappa_score``, which the tests compare against.

Items whose two verdicts differ wait in the adjudication queue until a
qa_lead's verdict (review round ``adjudication``) settles them; the view
``effective_labels`` then uses that verdict everywhere (calibration,
estimates, thresholds).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Unpack

import duckdb
import numpy as np
from fieldtrust.labels.verdict_rule import VerdictDetails
from fieldtrust.labels.verdicts import Label, insert_label, live_label, verdict_fields
from fieldtrust.store.access import require, user_name
from fieldtrust.store.retry import write_with_retry
from fieldtrust.store.rollup import labelled_columns_sql
from fieldtrust.store.scope import Scope

from fieldtrust.errors import InputError

_PAIRS_SQL = """
WITH live AS (
    SELECT * FROM labels l
    WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
),
first AS (SELECT * FROM live WHERE review_round = 'primary'),
second AS (SELECT * FROM live WHERE review_round = 'second'),
facts AS {facts}  -- the labelled rows' columns, from the small copy where it has them
SELECT e.extraction_id, coalesce(p.sample_id, s.sample_id) AS sample_id,
       e.doc_type, e.field, e.form_version, NULL AS value, NULL AS value_status,
       p.label_id, p.reviewer, p.verdict, p.corrected_value, p.corrected_status, p.error_type,
       s.label_id, s.reviewer, s.verdict, s.corrected_value, s.corrected_status, s.error_type,
       EXISTS (SELECT 1 FROM live a WHERE a.extraction_id = e.extraction_id
               AND a.review_round = 'adjudication') AS adjudicated
FROM first p
JOIN second s USING (extraction_id)
JOIN facts e USING (extraction_id)
WHERE {where}
ORDER BY e.extraction_id
"""

# The value each pair's reviewers judged, of a few extractions by id. Their
# time span (from the sampled copy, where labelled rows are) lets DuckDB skip
# the row groups of other weeks: stores are mostly ingested in time order.
_SPAN_SQL = """
SELECT min(extracted_at), max(extracted_at), count(*) FROM sampled_extractions
WHERE list_contains(?::VARCHAR[], extraction_id)
"""
_VALUES_SQL = """
SELECT extraction_id, value, value_status FROM extractions
WHERE list_contains(?::VARCHAR[], extraction_id) AND {span}
"""


@dataclass(frozen=True)
class ReviewPair:
    """One double-reviewed extraction: both verdicts side by side (for the qa_lead)."""

    extraction_id: str
    sample_id: str | None
    doc_type: str
    field: str
    form_version: str
    value: str | None
    value_status: str
    primary_label_id: str
    primary_reviewer: str
    primary_verdict: str
    primary_corrected_value: str | None
    primary_corrected_status: str | None
    primary_error_type: str | None
    second_label_id: str
    second_reviewer: str
    second_verdict: str
    second_corrected_value: str | None
    second_corrected_status: str | None
    second_error_type: str | None
    adjudicated: bool

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``--json`` prints)."""
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Agreement:
    """Agreement of one group: a stratum (doc_type, field) or a reviewer pair."""

    group: tuple[str, str]
    n: int
    agreed: int
    percent_agreement: float
    kappa: float

    def to_dict(self, names: tuple[str, str]) -> dict[str, Any]:
        """The JSON form, the group's two parts under ``names`` (``doc_type``, ``field``)."""
        return {names[0]: self.group[0], names[1]: self.group[1], "items": self.n,
                "agreement": self.percent_agreement, "kappa": self.kappa}


@dataclass(frozen=True)
class AgreementReport:
    """Agreement per (doc_type, field) and per reviewer pair, and the queue size."""

    per_field: list[Agreement]
    per_pair: list[Agreement]
    n_items: int
    to_adjudicate: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (what ``fieldtrust agreement --json`` prints)."""
        return {
            "items": self.n_items,
            "to_adjudicate": self.to_adjudicate,
            "per_field": [a.to_dict(("doc_type", "field")) for a in self.per_field],
            "per_pair": [a.to_dict(("reviewer_a", "reviewer_b")) for a in self.per_pair],
        }


def cohen_kappa(first: Sequence[str], second: Sequence[str]) -> float:
    """Cohen's kappa of two raters' nominal verdicts on the same items.

    ``(p_o - p_e) / (1 - p_e)`` (Cohen 1960); NaN when ``p_e = 1``, as
    ``sklearn.metrics.cohen_kappa_score`` gives.
    """
    if len(first) != len(second) or not first:
        raise InputError(
            f"kappa needs two equally long, non-empty verdict lists; got {len(first)}"
            f" and {len(second)}"
        )
    categories = sorted(set(first) | set(second))
    index = {c: i for i, c in enumerate(categories)}
    table = np.zeros((len(categories), len(categories)))
    for a, b in zip(first, second, strict=True):
        table[index[a], index[b]] += 1
    n = table.sum()
    observed = np.trace(table) / n
    expected = float(table.sum(axis=1) @ table.sum(axis=0)) / n**2
    if expected >= 1.0:
        return float("nan")
    return float((observed - expected) / (1.0 - expected))


def review_pairs(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> list[ReviewPair]:
    """Every double-reviewed extraction in ``scope`` (live primary and second labels)."""
    return _with_values(con, _pairs(con, scope))


def _pairs(con: duckdb.DuckDBPyConnection, scope: Scope) -> list[ReviewPair]:
    """:func:`review_pairs` without the values (read from labels and the sampled copy)."""
    where, params = scope.where("e")
    facts = labelled_columns_sql(con, "SELECT extraction_id FROM first")
    rows = con.execute(_PAIRS_SQL.format(where=where, facts=facts), params).fetchall()
    return [ReviewPair(*row) for row in rows]


def _with_values(con: duckdb.DuckDBPyConnection, pairs: list[ReviewPair]) -> list[ReviewPair]:
    """``pairs`` with the value and value status of each extraction filled in."""
    if not pairs:
        return pairs
    ids = [p.extraction_id for p in pairs]
    first, last, copied = con.execute(_SPAN_SQL, [ids]).fetchall()[0]
    if copied == len(ids):  # bound values, so the span reaches the scan
        sql, params = _VALUES_SQL.format(span="extracted_at BETWEEN ? AND ?"), [ids, first, last]
    else:
        sql, params = _VALUES_SQL.format(span="TRUE"), [ids]
    rows = con.execute(sql, params).fetchall()
    values = {extraction_id: (value, status) for extraction_id, value, status in rows}
    return [
        dataclasses.replace(p, value=values[p.extraction_id][0],
                            value_status=values[p.extraction_id][1])
        for p in pairs
    ]


def agreement(con: duckdb.DuckDBPyConnection, scope: Scope = Scope()) -> AgreementReport:
    """Percent agreement and Cohen's kappa per (doc_type, field) and per reviewer pair.

    Reviewer pairs are unordered (names sorted), since kappa is symmetric in
    the two raters. References: Cohen (1960); STATS.md section 9.
    """
    pairs = _pairs(con, scope)  # verdicts and strata only: no value is needed
    by_field: dict[tuple[str, str], list[ReviewPair]] = {}
    by_pair: dict[tuple[str, str], list[ReviewPair]] = {}
    for pair in pairs:
        by_field.setdefault((pair.doc_type, pair.field), []).append(pair)
        names = sorted((pair.primary_reviewer, pair.second_reviewer))
        by_pair.setdefault((names[0], names[1]), []).append(pair)
    return AgreementReport(
        per_field=[_agreement(key, group) for key, group in sorted(by_field.items())],
        per_pair=[_agreement(key, group, by_name=True) for key, group in sorted(by_pair.items())],
        n_items=len(pairs),
        to_adjudicate=sum(1 for p in pairs if _disagree(p) and not p.adjudicated),
    )


def adjudication_queue(
    con: duckdb.DuckDBPyConnection, scope: Scope = Scope()
) -> list[ReviewPair]:
    """Double-reviewed items whose verdicts differ and that no qa_lead has settled yet.

    Pairs are found in labels and the sampled copy; only the waiting items'
    values are looked up in ``extractions``, by id.
    """
    waiting = [p for p in _pairs(con, scope) if _disagree(p) and not p.adjudicated]
    return _with_values(con, waiting)


def adjudicate(
    con: duckdb.DuckDBPyConnection,
    actor: str,
    extraction_id: str,
    verdict: str,
    **details: Unpack[VerdictDetails],
) -> Label:
    """Settle an extraction's verdict as qa_lead; it becomes the truth used everywhere.

    Writes a label in review round ``adjudication``, which ``effective_labels``
    (and so :func:`fieldtrust.store.labelled.labelled_items`) prefers over the review
    rounds. Adjudicating again supersedes the previous adjudication. The
    verdict fields are validated as in :func:`fieldtrust.labels.verdicts.record_verdict`.

    Raises
    ------
    PermissionDenied
        ``actor`` is not a qa_lead.
    InputError
        Invalid verdict fields, or the extraction has no label to adjudicate.
    """
    fields = verdict_fields(verdict, **details)
    actor = user_name(actor, what="acting user")

    def work(tx: duckdb.DuckDBPyConnection) -> Label:
        require(tx, actor, "adjudicate")
        reviewed = [live_label(tx, extraction_id, r) for r in ("primary", "second", "import")]
        # A blind re-key that differed (labels.rekey) is a review to settle too.
        keyed = tx.execute("SELECT sample_id FROM rekeyed_values WHERE extraction_id = ?",
                           [extraction_id]).fetchall()
        samples = [label.sample_id for label in reviewed if label is not None]
        samples += [row[0] for row in keyed]
        if not samples:
            raise InputError(
                f"extraction {extraction_id!r} has no review to adjudicate; label it first"
            )
        previous = live_label(tx, extraction_id, "adjudication")
        return insert_label(
            tx, extraction_id, samples[0], "adjudication", actor, fields,
            supersedes=previous.label_id if previous else None,
        )

    return write_with_retry(con, work, what=f"adjudicating {extraction_id}")


def _disagree(pair: ReviewPair) -> bool:
    return pair.primary_verdict != pair.second_verdict


def _agreement(
    key: tuple[str, str], pairs: list[ReviewPair], *, by_name: bool = False
) -> Agreement:
    if by_name:
        # Rater "a" is the alphabetically first reviewer, whichever round they did.
        first = [p.primary_verdict if p.primary_reviewer == key[0] else p.second_verdict
                 for p in pairs]
        second = [p.second_verdict if p.primary_reviewer == key[0] else p.primary_verdict
                  for p in pairs]
    else:
        first = [p.primary_verdict for p in pairs]
        second = [p.second_verdict for p in pairs]
    agreed = sum(a == b for a, b in zip(first, second, strict=True))
    return Agreement(
        group=key,
        n=len(pairs),
        agreed=agreed,
        percent_agreement=agreed / len(pairs),
        kappa=cohen_kappa(first, second),
    )
