"""Each reviewer's miss and false-flag rates, with their n and a Wilson interval (STATS.md 13).

- **Miss rate**: of the seeds a reviewer judged (known wrong values,
  :mod:`fieldtrust.sampling.seeding`), the share judged ``correct``. Misses
  make certificates anti-conservative; this is the rate that matters.
- **False-flag rate**: of the double-reviewed real items whose settled
  verdict is ``correct`` (an adjudication said so, or both reviewers did
  and nobody adjudicated), the share this reviewer marked ``incorrect``.
  False flags only cost power.

Both are monitoring: the certificate takes the stratum's seeds
(:func:`fieldtrust.labels.seed_verdicts.seed_judgements`), not these.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import duckdb
from fieldtrust.calibration.survey import wilson_interval

_RATES_SQL = """
WITH live AS (
    SELECT * FROM labels l
    WHERE NOT EXISTS (SELECT 1 FROM labels s WHERE s.supersedes = l.label_id)
),
reviews AS (SELECT * FROM live WHERE review_round IN ('primary', 'second')),
adjudicated AS (SELECT extraction_id, verdict FROM live WHERE review_round = 'adjudication'),
double AS (
    SELECT extraction_id FROM reviews GROUP BY extraction_id
    HAVING count(DISTINCT review_round) = 2
),
settled_correct AS (
    SELECT extraction_id FROM double d
    WHERE coalesce(
        (SELECT a.verdict = 'correct' FROM adjudicated a WHERE a.extraction_id = d.extraction_id),
        (SELECT bool_and(r.verdict = 'correct') FROM reviews r
         WHERE r.extraction_id = d.extraction_id))
),
flags AS (
    SELECT r.reviewer, count(*) AS real_correct,
           count(*) FILTER (WHERE r.verdict = 'incorrect') AS false_flags
    FROM reviews r SEMI JOIN settled_correct USING (extraction_id)
    GROUP BY r.reviewer
),
seeds AS (
    SELECT reviewer, count(*) AS seeds_judged,
           count(*) FILTER (WHERE verdict = 'correct') AS misses
    FROM seed_verdicts GROUP BY reviewer
)
SELECT coalesce(s.reviewer, f.reviewer) AS reviewer,
       coalesce(s.seeds_judged, 0), coalesce(s.misses, 0),
       coalesce(f.real_correct, 0), coalesce(f.false_flags, 0)
FROM seeds s FULL OUTER JOIN flags f ON s.reviewer = f.reviewer
ORDER BY reviewer
"""


@dataclass(frozen=True)
class ReviewerRates:
    """One reviewer's misses on seeds and false flags on settled-correct items."""

    reviewer: str
    seeds_judged: int  # n of the miss rate
    misses: int
    miss_rate: float  # NaN without seeds
    miss_low: float
    miss_high: float
    settled_correct: int  # n of the false-flag rate
    false_flags: int
    false_flag_rate: float
    false_flag_low: float
    false_flag_high: float

    def to_dict(self) -> dict[str, Any]:
        """The JSON form; NaN (no n) as None."""
        return {k: None if isinstance(v, float) and math.isnan(v) else v
                for k, v in dataclasses.asdict(self).items()}


def reviewer_rates(
    con: duckdb.DuckDBPyConnection, *, confidence: float = 0.95
) -> list[ReviewerRates]:
    """Per reviewer: miss rate on seeds and false-flag rate, each with n and a Wilson interval.

    Parameters
    ----------
    confidence
        Of the two-sided Wilson intervals.

    Returns
    -------
    list of ReviewerRates
        One per reviewer who judged a seed or double-reviewed a settled-correct
        item, by name. A rate without its n is NaN (None in JSON).

    References
    ----------
    Wilson (1927), JASA 22:209 (:func:`fieldtrust.calibration.survey.wilson_interval`,
    equal to ``scipy.stats.binomtest(...).proportion_ci(method="wilson")``).
    STATS.md section 13.
    """
    rows = con.execute(_RATES_SQL).fetchall()
    rates = []
    for reviewer, seeds, misses, settled, flags in rows:
        miss = _rate(int(misses), int(seeds), confidence)
        flag = _rate(int(flags), int(settled), confidence)
        rates.append(ReviewerRates(str(reviewer), int(seeds), int(misses), *miss, int(settled),
                                   int(flags), *flag))
    return rates


def _rate(k: int, n: int, confidence: float) -> tuple[float, float, float]:
    if n == 0:
        return math.nan, math.nan, math.nan
    low, high = wilson_interval(k, n, confidence=confidence)
    return k / n, float(low), float(high)
