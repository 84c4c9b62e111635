"""Seeds mixed into a week's sample at the draw (STATS.md section 13; issue 23, must-have 2).

At the policy's ``seed_rate`` each (doc_type, field) of a sample gets
``ceil(rate * items)`` seeds (:func:`fieldtrust.calibration.seeds.seeds_for_rate`).
A seed is made from a *host*: an extraction of the same stratum and week
that the sample did not pick (so no document and field is shown twice), in
the cell its confidence puts it in. Its value is replaced by a plausible
wrong one (:mod:`fieldtrust.sampling.seed_values`); everything else a
reviewer sees (the document, the page, the place of the value, the cell)
is the host's. Hosts are ranked by an MD5 number of the sample's seed, the
week and the host's id, like the sample's own items, so the same draw makes
the same seeds.

Seeds go to ``seed_items`` only: never to ``extractions`` or
``audit_items``, so no estimate, count or certificate sees them; their
verdicts go to ``seed_verdicts`` (:mod:`fieldtrust.labels.seed_verdicts`).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from typing import Any

import duckdb
import pandas as pd
from fieldtrust.calibration.seeds import seeds_for_rate
from fieldtrust.sampling.cells import population_sql
from fieldtrust.sampling.design import Design
from fieldtrust.sampling.prn import prn_sql
from fieldtrust.sampling.seed_values import wrong_value
from fieldtrust.store.connection import utc_now
from fieldtrust.store.weeks import Week

#: Hosts ranked per stratum for each seed wanted: some values take no wrong value (free text).
_HOSTS_PER_SEED = 4


def seed_sample(
    con: duckdb.DuckDBPyConnection,
    sample_id: str,
    week: Week,
    design: Design,
    cells: pd.DataFrame,
    *,
    seed: int,
    rate: float,
) -> int:
    """Make and store the seeds of a sample just drawn (inside the draw's transaction).

    Parameters
    ----------
    con
        The draw's connection, inside its transaction.
    sample_id, week, design, cells, seed
        The sample as the draw made it (``cells``: :func:`~.cells.plan_frame`).
    rate
        The bar's ``seed_rate``; 0 makes none.

    Returns
    -------
    int
        Seeds stored. A stratum may get fewer than it wants when its week holds
        too few unsampled values a wrong value can be made from.
    """
    if rate <= 0:
        return 0
    wanted = {key: seeds_for_rate(rate, int(n))
              for key, n in cells.groupby(["doc_type", "field"])["n_sample"].sum().items()
              if n > 0}
    hosts = _hosts(con, sample_id, week, design, cells, seed, wanted)
    siblings = _siblings(con, sorted({h["doc_id"] for h in hosts}))
    made: dict[tuple[str, str], int] = defaultdict(int)
    now = utc_now()
    rows = []
    for host in hosts:
        key = (host["doc_type"], host["field"])
        if made[key] >= wanted[key]:
            continue
        others = [(f, v) for f, v in siblings.get(host["doc_id"], []) if f != host["field"]]
        wrong = wrong_value(host["value"], others, host["u"])
        if wrong is None:
            continue
        made[key] += 1
        rows.append([
            _seed_id(seed, sample_id, host["extraction_id"]), sample_id, host["extraction_id"],
            host["doc_type"], host["field"], host["cell"], wrong.value, host["value"], wrong.kind,
            wrong.source_field, host["prn"], host["confidence"], now,
        ])
    if rows:
        con.executemany(
            "INSERT INTO seed_items (seed_id, sample_id, host_extraction_id, doc_type, field,"
            " cell, seed_value, true_value, seed_kind, source_field, prn, confidence, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    return len(rows)


def _seed_id(seed: int, sample_id: str, host: str) -> str:
    """An opaque item id (the review screens never show item ids)."""
    digest = hashlib.sha256(f"seed-item:{seed}:{sample_id}:{host}".encode()).hexdigest()
    return f"i-{digest[:20]}"


def _hosts(
    con: duckdb.DuckDBPyConnection, sample_id: str, week: Week, design: Design,
    cells: pd.DataFrame, seed: int, wanted: dict[tuple[str, str], int],
) -> list[dict[str, Any]]:
    """Unsampled present values of each stratum, best first, with their cell and two uniforms."""
    population, params = population_sql(week, design,
                                        ("doc_id", "value", "value_status", "confidence"))
    parts = cells.explode("form_versions")
    keys = list(wanted)
    params |= {
        "sample": sample_id, "key": f"seed-host:{seed}:{week}:",
        "prn_key": f"seed-prn:{seed}:{week}:", "kind_key": f"seed-kind:{seed}:{week}:",
        "doc_types": parts["doc_type"].tolist(), "fields": parts["field"].tolist(),
        "versions": parts["form_versions"].tolist(),
        "band_indexes": parts["band_index"].tolist(), "cells": parts["cell"].tolist(),
        "want_doc_types": [k[0] for k in keys], "want_fields": [k[1] for k in keys],
        "want": [_HOSTS_PER_SEED * wanted[k] for k in keys],
    }
    sql = f"""
        WITH alloc AS (
            SELECT unnest($doc_types::VARCHAR[]) AS doc_type, unnest($fields::VARCHAR[]) AS field,
                   unnest($versions::VARCHAR[]) AS form_version,
                   unnest($band_indexes::INTEGER[]) AS band_index,
                   unnest($cells::VARCHAR[]) AS cell
        ),
        want AS (
            SELECT unnest($want_doc_types::VARCHAR[]) AS doc_type,
                   unnest($want_fields::VARCHAR[]) AS field, unnest($want::BIGINT[]) AS n
        ),
        hosts AS (
            SELECT p.extraction_id, p.doc_id, p.doc_type, p.field, p.value, p.confidence, a.cell,
                   md5_number($key || p.extraction_id) AS h
            FROM ({population}) p JOIN alloc a USING (doc_type, field, form_version, band_index)
            WHERE p.value_status = 'present' AND p.value IS NOT NULL
              AND p.extraction_id NOT IN (SELECT extraction_id FROM audit_items
                                          WHERE sample_id = $sample)
        )
        SELECT extraction_id, doc_id, doc_type, field, value, confidence, cell,
               {prn_sql("md5_number($prn_key || extraction_id)")} AS prn,
               {prn_sql("md5_number($kind_key || extraction_id)")} AS u
        FROM (
            SELECT h.*, w.n,
                   row_number() OVER (PARTITION BY h.doc_type, h.field
                                      ORDER BY h.h, h.extraction_id) AS rank_
            FROM hosts h JOIN want w USING (doc_type, field)
        )
        WHERE rank_ <= n
        ORDER BY doc_type, field, rank_
    """
    cursor = con.execute(sql, params)
    names = [d[0] for d in cursor.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _siblings(
    con: duckdb.DuckDBPyConnection, doc_ids: list[str]
) -> dict[str, list[tuple[str, str]]]:
    """Per document, ``(field, value)`` of its present values."""
    if not doc_ids:
        return {}
    rows = con.execute(
        "SELECT doc_id, field, value FROM extractions"
        " WHERE list_contains($docs, doc_id) AND value_status = 'present' AND value IS NOT NULL"
        " ORDER BY doc_id, field, extraction_id",
        {"docs": doc_ids},
    ).fetchall()
    found: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for doc_id, field_name, value in rows:
        found[doc_id].append((field_name, value))
    return found
