"""Segregation of duties: approving on one's own labels warns, and the policy can forbid it."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner
from fieldtrust.governance.acts import approve
from fieldtrust.governance.bar_admin import set_policy_settings
from fieldtrust.governance.decisions import current_policy
from fieldtrust.governance.duties import own_labels
from fieldtrust.governance.policy import export_policy
from fieldtrust.store.access import grant_role
from fieldtrust.store.bar import policy_bar

from fieldtrust.cli.main import cli
from fieldtrust.errors import Refused
from tests.governance.conftest import WEEKS, random_sample_item, write_random_sample


def _labelled_by(con: duckdb.DuckDBPyConnection, builder: Any, reviewers: list[str]) -> None:
    """invoice/total, 4 weeks x 120 correct labels from a declared random sample, the
    reviewers taking turns; mona is a manager who also labels."""
    rng = np.random.default_rng(5)
    write_random_sample(con, builder, [
        random_sample_item(f"{week}-{i}", week, float(rng.uniform(0.9, 1.0)),
                           reviewer=reviewers[i % len(reviewers)])
        for week in WEEKS for i in range(120)],
        users={"root": "admin", "mona": "manager", "alice": "reviewer"}, declared_by="root")


def test_the_approver_s_share_counts_the_labels_the_certificate_reads(
    con: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    _labelled_by(con, builder, ["mona", "alice", "alice"])
    own = own_labels(con, "mona", "invoice", "total")
    assert (own.own, own.total) == (160, 480)
    assert own.share == pytest.approx(1 / 3) and not own.all_own
    assert own.warning() is None
    assert own.weeks[-4:] == WEEKS and len(own.weeks) == 8  # the policy's window


def test_approving_on_labels_all_one_s_own_warns_in_the_library_and_the_cli(
    con: duckdb.DuckDBPyConnection, builder: Any, db_path: Any
) -> None:
    _labelled_by(con, builder, ["mona"])
    own = own_labels(con, "mona", "invoice", "total")
    assert own.all_own and own.total == 480
    assert own.warning() == (
        "mona gave all 480 labels invoice/total's certificate rests on: nobody else checked"
        " them. An admin can forbid this with"
        " `fieldtrust policy settings --max-own-label-share 0.5`."
    )
    con.close()
    result = CliRunner().invoke(cli, ["--db", str(db_path), "decide", "approve", "--doc-type",
                                      "invoice", "--field", "total", "--as", "mona",
                                      "--comment", "my own four weeks"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == f"warning: {own.warning()}"


def test_a_policy_below_one_refuses_an_approver_who_gave_more(
    con: duckdb.DuckDBPyConnection, builder: Any, db_path: Any
) -> None:
    _labelled_by(con, builder, ["mona", "mona", "alice"])
    set_policy_settings(con, "root", max_own_label_share=0.5, target=0.96)
    assert policy_bar(con).bar.max_own_label_share == 0.5
    with pytest.raises(Refused, match=(
        r"^mona gave 320 of the 480 labels invoice/total's certificate rests on \(67%\);"
        r" the store's policy allows an approver at most 50% of them \(max_own_label_share\)")):
        approve(con, "mona", "invoice", "total", "mine")
    assert current_policy(con) == []
    # Another manager, who labelled nothing, may approve the same evidence.
    grant_role(con, "root", "nora", "manager")
    assert approve(con, "nora", "invoice", "total", "checked by two").decided_by == "nora"
    # The policy file states what the approval was held to.
    (entry,) = export_policy(con)["thresholds"]
    assert (entry["comparison"], entry["target"], entry["confidence"]) == (">=", 0.96, 0.95)
    con.close()
    # The CLI: exit 2, one line, nothing recorded.
    result = CliRunner().invoke(cli, ["--db", str(db_path), "decide", "approve", "--doc-type",
                                      "invoice", "--field", "total", "--as", "mona",
                                      "--comment", "mine"])
    assert result.exit_code == 2
    assert result.output.startswith("error: mona gave 320 of the 480 labels")
    assert len(result.output.strip().splitlines()) == 1


def test_the_setting_is_a_policy_setting_stricter_when_lower(
    con: duckdb.DuckDBPyConnection, builder: Any
) -> None:
    from fieldtrust.store.bar import Criteria, resolve_bar

    builder.users()
    assert policy_bar(con).bar.max_own_label_share == 1.0
    assert resolve_bar(con, Criteria.of(max_own_label_share=0.2)).approvable
    set_policy_settings(con, "root", max_own_label_share=0.2)
    looser = resolve_bar(con, Criteria.of(max_own_label_share=0.9))
    assert not looser.approvable and "max_own_label_share 0.9" in looser.loosened_text()
    with pytest.raises(Exception, match=r"max_own_label_share = 1\.5 must be between 0 and 1"):
        set_policy_settings(con, "root", max_own_label_share=1.5)
