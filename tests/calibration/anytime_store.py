"""A small audited store for the anytime certificate: three weeks, samples drawn and labelled.

Real DuckDB files: extractions inserted, samples drawn by
:func:`fieldtrust.sampling.draw.draw_sample`, labels from the stored truth in
review (PRN) order.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.store.bar import Bar

from fieldtrust import store
from tests.sampling.conftest import World

WEEKS = ("2026-W45", "2026-W46", "2026-W47")
DESIGN = Design(bands=(0.0, 0.9, 0.95, 0.99, 1.0), base_rate=0.6, minimum=10,
                new_version_weeks=0)
BAR = Bar(certificate="anytime", stability_weeks=3)


def build_audited(path: Path, *, accuracy: float = 0.99, share: float = 1.0,
           fields: tuple[str, ...] = ("total",)) -> duckdb.DuckDBPyConnection:
    world = World()
    con = store.connect(path)
    world.grant(con)
    for w, week in enumerate(WEEKS):
        frame = world.frame(week, 700 * len(fields), seed=w, doc_types=("invoice",),
                            fields=fields, accuracy_old=accuracy)
        world.insert(con, frame)
        result = draw_sample(con, week, DESIGN, seed=1, actor=world.qa_lead)
        world.label(con, result.sample_id, share=share)
    return con
