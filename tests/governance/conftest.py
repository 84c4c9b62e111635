"""What the governance stores are built from: the policy the admin set, labels from an
import batch declared a simple random sample, and the weeks they fall in."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import duckdb
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.store.chain import chain_returned
from fieldtrust.store.weeks import Week

from tests.conftest import USERS, Builder

#: The four closed weeks the stores are certified on.
WEEKS = ("2026-W07", "2026-W08", "2026-W09", "2026-W10")

#: The import batch declared a simple random sample (``labels import --random-sample``).
RANDOM_BATCH = "random-batch"


def policy_of_50_labels(con: duckdb.DuckDBPyConnection, builder: Builder,
                        users: dict[str, str] = USERS) -> None:
    """``users`` granted, and the store's policy, set by the admin root, asking for 50 labels.

    The policy certifies with the one-look certificate: these stores' labels are a
    declared random sample, not weekly audit samples, and only audit samples close a
    week for the anytime-valid certificate (STATS.md section 17). What the tests here
    check (who may approve, what an approval freezes, what watches it afterwards) does
    not depend on which certificate certified; ``tests/test_first_hour.py`` approves on
    the default one, from weekly audit samples.
    """
    builder.users(users)
    set_policy_settings(con, "root", n_min=50, certificate="fixed")


def declare_random_batch(con: duckdb.DuckDBPyConnection, by: str = "carol") -> None:
    """:data:`RANDOM_BATCH` declared a simple random sample by ``by``, chained as
    ``labels import --random-sample`` writes it (the policy export verifies the history)."""
    declared = con.execute("INSERT INTO label_import_designs VALUES (?, 'random_sample', ?,"
                           " now()::TIMESTAMP) RETURNING *", [RANDOM_BATCH, by])
    chain_returned(con, "label_import_designs", declared)


def random_sample_item(extraction_id: str, week: str, confidence: float, *, wrong: bool = False,
                       reviewer: str = "alice", **columns: object
                       ) -> tuple[dict[str, object], dict[str, object]]:
    """An extraction of ``week`` (two hours into its Monday; ``columns`` as given) and its
    label in :data:`RANDOM_BATCH`: correct, or wrong (the tax left empty: the total was
    copied into it); rows for :meth:`Builder.extractions` and :meth:`Builder.labels`."""
    extraction = {"extraction_id": extraction_id, "confidence": confidence,
                  "extracted_at": Week(week).start + dt.timedelta(hours=2), **columns}
    label = {"extraction_id": extraction_id, "reviewer": reviewer, "review_round": "import",
             "import_batch_id": RANDOM_BATCH, "verdict": "incorrect" if wrong else "correct",
             "corrected_status": "null" if wrong else None,
             "error_type": "total_copied_into_tax" if wrong else None}
    return extraction, label


def write_random_sample(con: duckdb.DuckDBPyConnection, builder: Builder,
                        items: Sequence[tuple[dict[str, object], dict[str, object]]], *,
                        users: dict[str, str] = USERS, declared_by: str = "carol") -> None:
    """:func:`policy_of_50_labels`, then the extractions and labels of ``items``
    (:func:`random_sample_item`), and :func:`declare_random_batch`."""
    policy_of_50_labels(con, builder, users)
    builder.extractions([extraction for extraction, _ in items])
    builder.labels([label for _, label in items])
    declare_random_batch(con, declared_by)
