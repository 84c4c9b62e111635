"""The review and governance commands, run through the real CLI on a real store file."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import click
import duckdb
import pytest
from click.testing import CliRunner
from decided import approve_as_stated
from fieldtrust.labels.verdicts import record_verdict

from fieldtrust.cli.main import cli
from tests.conftest import file_fingerprint, file_rows


def run(db: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--db", str(db), *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def store_file(review_store: duckdb.DuckDBPyConnection, db_path: Path) -> Path:
    """The review fixture with a disagreement, then closed so the CLI can open the file."""
    con = review_store
    record_verdict(con, actor="alice", extraction_id="e00", verdict="correct")
    record_verdict(con, actor="bob", extraction_id="e00", verdict="incorrect",
                   corrected_value="=1+1", error_type="misread_characters",
                   review_round="second")
    approve_as_stated(con, "mona", "invoice", "total", 0.95, "ok")
    con.close()
    return db_path


def test_users_bootstrap_grant_and_list(db_path: Path) -> None:
    assert run(db_path, "users", "grant", "root", "reviewer", "--as", "root")[0] == 2
    code, out, _ = run(db_path, "users", "grant", "root", "admin", "--as", "root")
    assert (code, out) == (0, "root now holds: admin (granted admin by root)\n")
    assert run(db_path, "users", "grant", "alice", "reviewer", "--as", "root")[0] == 0
    code, _, err = run(db_path, "users", "grant", "bob", "admin", "--as", "alice")
    assert code == 2
    assert err.startswith("error: alice (role reviewer) may not grant roles")
    code, out, _ = run(db_path, "users", "list", "--json")
    assert [(u["user_name"], u["roles"]) for u in json.loads(out)] == [
        ("alice", ["reviewer"]), ("root", ["admin"])
    ]


def test_decide_checks_roles_and_candidates(store_file: Path) -> None:
    code, _, err = run(store_file, "decide", "approve", "--doc-type", "invoice", "--field",
                       "tax", "--as", "alice", "--comment", "go")
    assert code == 2 and "alice (role reviewer) may not approve" in err
    code, _, err = run(store_file, "decide", "approve", "--doc-type", "invoice", "--field",
                       "tax", "--as", "mona", "--comment", "go")
    assert code == 2 and "invoice/tax is not an automation candidate" in err
    code, out, _ = run(store_file, "decide", "reject", "--doc-type", "invoice", "--field",
                       "tax", "--as", "mona", "--comment", "too few labels")
    assert code == 0 and out.startswith("reject invoice/tax by mona (manager); decision ")
    code, out, _ = run(store_file, "decide", "revoke", "--doc-type", "invoice", "--field",
                       "total", "--as", "root", "--comment", "form v2")
    assert code == 0 and out.startswith("revoke invoice/total at 0.95 by root (admin)")
    code, _, err = run(store_file, "decide", "revoke", "--doc-type", "invoice", "--field",
                       "total", "--as", "root", "--comment", "again")
    assert code == 2 and "nothing to revoke" in err


def test_policy_export_and_show(store_file: Path, tmp_path: Path) -> None:
    out_file = tmp_path / "policy.json"
    code, out, _ = run(store_file, "policy", "export", "--out", str(out_file))
    assert (code, out) == (0, f"wrote {out_file}\n")
    policy = json.loads(out_file.read_text())
    assert [(t["doc_type"], t["field"], t["threshold"], t["approved_by"])
            for t in policy["thresholds"]] == [("invoice", "total", 0.95, "mona")]
    code, out, _ = run(store_file, "policy", "export")
    assert json.loads(out)["thresholds"] == policy["thresholds"]
    code, out, _ = run(store_file, "policy", "show", "--json")
    (row,) = json.loads(out)
    assert (row["status"], row["threshold"], row["revocation"]) == ("active", 0.95, None)


def test_agreement_adjudicate_errors_and_export(store_file: Path, tmp_path: Path) -> None:
    code, out, _ = run(store_file, "agreement", "--json")
    report = json.loads(out)
    assert (report["items"], report["to_adjudicate"]) == (1, 1)
    assert report["per_pair"][0]["reviewer_a"] == "alice"
    code, out, _ = run(store_file, "adjudicate", "--queue", "--json")
    assert [q["extraction_id"] for q in json.loads(out)] == ["e00"]
    code, _, err = run(store_file, "adjudicate", "e00", "correct", "--as", "bob")
    assert code == 2 and "bob (role reviewer) may not adjudicate" in err
    code, out, _ = run(store_file, "adjudicate", "e00", "incorrect", "--corrected-value", "2",
                       "--error-type", "misread_characters", "--as", "carol")
    assert code == 0 and out.startswith("e00: incorrect (adjudicated by carol")
    code, out, _ = run(store_file, "errors", "--json")
    assert [(r["field"], r["error_type"], r["n_errors"]) for r in json.loads(out)] == [
        ("total", "misread_characters", 1)
    ]
    target = tmp_path / "labels.csv"
    code, out, _ = run(store_file, "labels", "export", "--out", str(target))
    assert (code, out) == (0, f"wrote 3 labels to {target}\n")
    with target.open(newline="") as handle:
        values = {r["corrected_value"] for r in csv.DictReader(handle)}
    assert values == {"", "'=1+1", "2"}


def test_a_reviewer_corrects_their_last_verdict_and_the_old_one_stays(store_file: Path) -> None:
    code, out, _ = run(store_file, "labels", "recent", "--as", "alice", "--json")
    assert code == 0
    (mine,) = json.loads(out)
    assert (mine["extraction_id"], mine["verdict"], mine["can_change"]) == ("e00", "correct",
                                                                          "yes")
    code, out, err = run(store_file, "labels", "correct", "last", "incorrect", "--corrected-value",
                         "11.00", "--error-type", "misread_characters", "--as", "alice")
    assert code == 0, err
    assert re.fullmatch(r"e00: incorrect \(was correct\) by alice; label \S+ supersedes"
                        f" {mine['label_id']}, which stays in the history\n", out)
    history = file_rows(store_file, "SELECT verdict, corrected_value, supersedes FROM labels"
                        " WHERE extraction_id = 'e00' AND review_round = 'primary'"
                        " ORDER BY labeled_at")
    assert history == [("correct", None, None), ("incorrect", "11.00", mine["label_id"])]
    code, out, _ = run(store_file, "labels", "recent", "--as", "alice")
    assert code == 0 and "incorrect" in out.splitlines()[2] and "yes" in out.splitlines()[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-label", "correct", "--as", "alice"],
         "error: no label 'no-such-label' in the store; check the id"),
        (["last", "correct", "--as", "dave"],
         "error: dave has no verdict of their own that still stands"),
        # A bare 'incorrect' is recorded with 'not recorded' details (the one verdict
        # rule); an 'Other' error without its detail is refused in the rule's words.
        (["last", "incorrect", "--error-type", "other", "--as", "alice"],
         "error: "),
    ],
    ids=["unknown_id", "nothing_to_correct", "incomplete_verdict"],
)
def test_a_correction_that_cannot_be_made_says_why_and_changes_nothing(
    store_file: Path, args: list[str], message: str
) -> None:
    before = file_fingerprint(store_file)
    code, out, err = run(store_file, "labels", "correct", *args)
    assert (code, out) == (2, "")
    assert err.startswith(message), err
    assert len(err.strip().splitlines()) == 1
    assert file_fingerprint(store_file) == before


def test_another_reviewers_verdict_is_a_qa_leads_to_correct(store_file: Path) -> None:
    (label_id,) = file_rows(store_file, "SELECT label_id FROM labels WHERE reviewer = 'alice'")[0]
    code, _, err = run(store_file, "labels", "correct", label_id, "unclear", "--as", "bob")
    assert code == 2 and "bob (role reviewer) may not correct another reviewer's label" in err
    code, out, _ = run(store_file, "labels", "correct", label_id, "unclear", "--as", "carol")
    assert code == 0 and out.startswith("e00: unclear (was correct) by carol;")


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append((prefix + name, command))
        if isinstance(command, click.Group):
            found += _commands(command, prefix + name + " ")
    return found


OURS = ("users", "users grant", "users list", "decide", "policy", "policy export",
        "policy show", "agreement", "adjudicate", "errors", "labels export", "labels correct",
        "labels recent")


@pytest.mark.parametrize("name", OURS)
def test_every_command_has_an_example(name: str) -> None:
    commands = dict(_commands(cli))
    assert (commands[name].epilog or "").startswith("Example: fieldtrust ")
