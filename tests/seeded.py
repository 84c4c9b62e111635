"""A seeded store for the tests: a week of invoices (total, tax, date per document), drawn.

Real DuckDB files. ``_invoices`` gives per document a total, a tax (a fifth
of the total) and a date, confidences near 0.95; :func:`seeded_store` sets
the policy's seed_rate (as an admin), draws the week through the one door
and returns the open store.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.store.access import bootstrap_admin, grant_role

from fieldtrust import store
from tests.conftest import Builder

WEEK = "2026-W10"
MONDAY = dt.datetime(2026, 3, 2, 9, 0)
REVIEWERS = ("ana", "ben", "cy")


def invoices(n_docs: int, *, seed: int = 3) -> pd.DataFrame:
    """Per document a total, a tax (a fifth of the total) and a date; confidences near 0.95."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(n_docs):
        total = round(float(rng.uniform(100, 9_000)), 2)
        day = dt.date(2026, 2, 1) + dt.timedelta(days=int(rng.integers(0, 28)))
        for field, value in (("total", f"{total:.2f}"), ("tax", f"{total / 5:.2f}"),
                             ("date", day.isoformat())):
            rows.append({
                "extraction_id": f"x{d:05d}-{field}", "doc_id": f"inv-{d:05d}",
                "field": field, "value": value,
                "confidence": float(np.clip(rng.beta(30, 2), 0, 1)),
                "extracted_at": MONDAY + dt.timedelta(minutes=d),
                "source_excerpt": f"... {field}: {value} ...",
            })
    return pd.DataFrame(rows)


def seeded_store(path: Path, *, n_docs: int = 1_500, seed_rate: float = 0.1,
                 double_review_share: float = 0.1) -> duckdb.DuckDBPyConnection:
    """A store at ``path`` with users (root admin, quinn qa_lead, the reviewers), drawn."""
    con = store.connect(path)
    bootstrap_admin(con, "root")
    grant_role(con, "root", "quinn", "qa_lead")
    for name in REVIEWERS:
        grant_role(con, "root", name, "reviewer")
    Builder(con).extractions(invoices(n_docs))
    set_policy_settings(con, "root", seed_rate=seed_rate)
    draw_sample(con, WEEK, Design(base_rate=0.05, double_review_share=double_review_share),
                seed=11, actor="quinn")
    return con
