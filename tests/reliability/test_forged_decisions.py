"""Forged decisions and edited policy files (issue "hostile conditions, round 2", faults 7 to 9).

7. A decision inserted with plain SQL was exported by ``policy export`` (exit 0,
   the honest export's history head); only a separate ``verify`` noticed.
8. ``verify --policy FILE`` checked only the file's history head: lowered
   thresholds or an added stratum passed as intact.
9. Rows appended through the public ``store.chain.chain_rows`` passed
   ``verify``, even against a head kept before they were written: anyone who
   could write the store file could forge an approval.

The mallory of these tests can write the store file and call any public
function, and does not hold the team's signing key (``signing_key_file`` in
``tests/conftest.py``).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from click.testing import CliRunner
from rel_store import ADMIN, MANAGER

from fieldtrust import store
from fieldtrust.cli.main import cli
from tests.conftest import file_fingerprint

#: The forged approval: the fixture store's rejected stratum, automated at a low bar.
FORGED = {"doc_type": "receipt", "field": "tax", "threshold": 0.5}


def _run(db: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return CliRunner(env=env).invoke(cli, ["--db", str(db), *args])


def _export(db: Path, out: Path) -> dict[str, Any]:
    result = _run(db, "policy", "export", "--out", str(out))
    assert result.exit_code == 0, result.output
    return dict(json.loads(out.read_text(encoding="utf-8")))


def _forged_decision() -> dict[str, Any]:
    return {"decision_id": str(uuid.uuid4()), **FORGED, "action": "approve",
            "decided_by": MANAGER, "role": "manager", "comment": "looks fine",
            "decided_at": dt.datetime(2026, 11, 30, 9), "evidence_id": None}


def _insert_decision(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    con.execute(f"INSERT INTO decisions ({', '.join(row)}) VALUES"
                f" ({', '.join('?' for _ in row)})", list(row.values()))


@pytest.fixture
def mallory(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The acting process holds no signing key: only the file."""
    from fieldtrust.store.signing import using

    monkeypatch.delenv("FIELDTRUST_SIGNING_KEY_FILE", raising=False)
    with using(None):
        yield


# --- 7. a decision inserted with plain SQL -----------------------------------------------------


def test_a_decision_inserted_with_sql_stops_the_export(populated: Path, tmp_path: Path) -> None:
    honest = _export(populated, tmp_path / "honest.json")
    con = store.connect(populated)
    try:
        _insert_decision(con, _forged_decision())
    finally:
        con.close()
    before = file_fingerprint(populated)
    out = tmp_path / "forged.json"
    result = _run(populated, "policy", "export", "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: the policy is not exported: history altered")
    assert "decisions row" in result.stderr and "inserted without fieldtrust" in result.stderr
    assert not out.exists()
    assert file_fingerprint(populated) == before
    assert [t["field"] for t in honest["thresholds"]] == ["total"]


def test_a_decision_chained_by_hand_is_unsigned_and_stops_the_export(
    populated: Path, tmp_path: Path, mallory: None, signing_key: Path
) -> None:
    from fieldtrust.store.chain import append_entries

    con = store.connect(populated)
    try:
        row = _forged_decision()
        _insert_decision(con, row)
        append_entries(con, [("decisions", row)])  # public, and writes no signature
    finally:
        con.close()
    # The team runs verify and export, with its key.
    team = {"FIELDTRUST_SIGNING_KEY_FILE": str(signing_key)}
    verified = _run(populated, "verify", env=team)
    assert verified.exit_code == 2
    assert "is not signed: it was written without the signing key" in verified.stderr
    exported = _run(populated, "policy", "export", "--out", str(tmp_path / "p.json"), env=team)
    assert exported.exit_code == 2 and "the policy is not exported" in exported.stderr


# --- 9. the chain's public functions, without the key -------------------------------------------


def test_chain_rows_without_the_signing_key_writes_nothing(
    pcon: duckdb.DuckDBPyConnection, mallory: None
) -> None:
    from fieldtrust.store.chain import chain_rows

    from fieldtrust.errors import SigningError

    row = _forged_decision()
    _insert_decision(pcon, row)
    chained = pcon.execute("SELECT count(*) FROM history_chain").fetchall()
    with pytest.raises(SigningError, match="no signing key is configured"):
        chain_rows(pcon, "decisions", {"decision_id": row["decision_id"]})
    assert pcon.execute("SELECT count(*) FROM history_chain").fetchall() == chained


def test_a_forgery_signed_with_another_key_fails_even_against_a_head_kept_before(
    populated: Path, tmp_path: Path, signing_key: Path
) -> None:
    from fieldtrust.store.chain import chain_head, chain_rows
    from fieldtrust.store.signing import create_key, using

    con = store.connect(populated)
    kept = chain_head(con)
    # Mallory makes a key of her own and chains her approval through the public function.
    create_key(tmp_path / "mallory.key")
    try:
        row = _forged_decision()
        _insert_decision(con, row)
        with using(str(tmp_path / "mallory.key")):
            chain_rows(con, "decisions", {"decision_id": row["decision_id"]})
    finally:
        con.close()
    # The team checks with its own public key.
    team = {"FIELDTRUST_TRUSTED_KEY_FILES": f"{signing_key}.pub",
            "FIELDTRUST_SIGNING_KEY_FILE": str(signing_key)}
    result = _run(populated, "verify", "--head", f"{kept.seq}:{kept.row_hash}", env=team)
    assert result.exit_code == 2
    assert "which is not a trusted key here" in result.stderr
    exported = _run(populated, "policy", "export", "--out", str(tmp_path / "p.json"), env=team)
    assert exported.exit_code == 2


def test_approving_without_the_key_is_refused_before_anything_is_written(
    populated: Path, mallory: None
) -> None:
    before = file_fingerprint(populated)
    result = _run(populated, "decide", "reject", "--doc-type", "invoice", "--field", "total",
                  "--as", MANAGER, "--comment", "no key")
    assert result.exit_code == 2
    assert "no signing key is configured" in result.stderr
    assert file_fingerprint(populated) == before
    settings = _run(populated, "policy", "settings", "--n-min", "50", "--as", ADMIN)
    assert settings.exit_code == 2 and "no signing key is configured" in settings.stderr
    assert file_fingerprint(populated) == before


def test_an_honest_store_verifies_and_exports_a_file_production_can_check(
    populated: Path, tmp_path: Path, signing_key: Path
) -> None:
    from fieldtrust.governance.policy import read_policy_file
    from fieldtrust.store.signing import TrustedKeys, key_id, load_public_key

    out = tmp_path / "policy.json"
    policy = _export(populated, out)
    assert policy["format"] == 4 and policy["signature"]["algorithm"] == "ed25519"
    public = load_public_key(f"{signing_key}.pub")
    # Production holds the public key only.
    assert read_policy_file(out, trusted=TrustedKeys({key_id(public): public})) == policy
    assert _run(populated, "verify", "--policy", str(out)).exit_code == 0


# --- 8. verify --policy checks the whole file ----------------------------------------------------


def _edited(policy: dict[str, Any], path: Path, **changes: Any) -> Path:
    edited = json.loads(json.dumps(policy))
    edited["thresholds"][0].update(changes)
    path.write_text(json.dumps(edited, indent=2), encoding="utf-8")
    return path


def test_a_policy_file_with_a_lowered_threshold_is_refused(
    populated: Path, tmp_path: Path
) -> None:
    policy = _export(populated, tmp_path / "policy.json")
    lowered = _edited(policy, tmp_path / "lowered.json", threshold=0.5)
    result = _run(populated, "verify", "--policy", str(lowered))
    assert result.exit_code == 2
    assert f"policy file {lowered} does not match the store it names: the file is signed by key" \
        in result.stderr
    as_json = _run(populated, "verify", "--policy", str(lowered), "--json")
    assert as_json.exit_code == 2
    problems = json.loads(as_json.stdout)["policy_file"]["problems"]
    assert problems[1] == (f"invoice/total: threshold is 0.5 in the file,"
                           f" {policy['thresholds'][0]['threshold']} in the store")


def test_a_re_signed_file_with_an_added_stratum_is_refused_by_its_content(
    populated: Path, tmp_path: Path
) -> None:
    from fieldtrust.store.signing import current_signer, sign_policy

    policy = _export(populated, tmp_path / "policy.json")
    added = json.loads(json.dumps(policy))
    added["thresholds"].append({**added["thresholds"][0], **FORGED})
    # Signed with the team's own key (a bug, another store): the content still has to match.
    path = tmp_path / "added.json"
    path.write_text(json.dumps(sign_policy(added, current_signer())), encoding="utf-8")
    result = _run(populated, "verify", "--policy", str(path), "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["policy_file"]["problems"] == [
        "receipt/tax is in the file but the store has no approval of it"]


def test_an_unsigned_or_old_format_policy_file_is_refused(populated: Path, tmp_path: Path) -> None:
    policy = _export(populated, tmp_path / "policy.json")
    unsigned = {k: v for k, v in policy.items() if k != "signature"}
    path = tmp_path / "unsigned.json"
    path.write_text(json.dumps(unsigned), encoding="utf-8")
    result = _run(populated, "verify", "--policy", str(path))
    assert result.exit_code == 2 and "the file is not signed" in result.stderr
    old = tmp_path / "old.json"
    old.write_text(json.dumps({**unsigned, "format": 2}), encoding="utf-8")
    result = _run(populated, "verify", "--policy", str(old), "--json")
    assert result.exit_code == 2
    assert json.loads(result.stdout)["policy_file"]["problems"][1] == (
        "the file is format 2, not 4: export it again with this fieldtrust")


# --- history written before signing -------------------------------------------------------------


def _as_before_signing(db: Path) -> None:
    """The store as fieldtrust before signing left it, migrated since: no signatures, and
    signing began at the head."""
    con = store.connect(db)
    try:
        con.execute("DELETE FROM history_signatures")
        con.execute("UPDATE signing_started SET seq = (SELECT max(seq) FROM history_chain)")
    finally:
        con.close()


def test_decisions_from_before_signing_are_named_until_an_admin_vouches(
    populated: Path, tmp_path: Path
) -> None:
    _as_before_signing(populated)
    result = _run(populated, "verify")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: history not verified: decisions row")
    assert "was written before this store signed decisions and no admin has vouched" \
        in result.stderr
    assert _run(populated, "policy", "export").exit_code == 2  # not trusted silently
    refused = _run(populated, "keys", "vouch", "--as", MANAGER, "--comment", "fine")
    assert refused.exit_code == 2 and "needs the role admin" in refused.stderr
    vouched = _run(populated, "keys", "vouch", "--as", ADMIN,
                   "--comment", "compared with the backup of 2026-11-29")
    assert vouched.exit_code == 0, vouched.output
    assert "root vouched for the history up to chain entry" in vouched.stdout
    assert "(2 unsigned decisions and policy settings)" in vouched.stdout  # approve, reject
    assert _run(populated, "verify").exit_code == 0
    _export(populated, tmp_path / "policy.json")
    again = _run(populated, "keys", "vouch", "--as", ADMIN, "--comment", "twice")
    assert again.exit_code == 2 and "nothing to vouch for" in again.stderr


def test_no_vouch_over_history_with_other_problems(populated: Path) -> None:
    _as_before_signing(populated)
    con = store.connect(populated)
    try:
        con.execute("UPDATE decisions SET threshold = 0.5 WHERE action = 'approve'")
    finally:
        con.close()
    before = file_fingerprint(populated)
    result = _run(populated, "keys", "vouch", "--as", ADMIN, "--comment", "looks fine")
    assert result.exit_code == 2
    assert "not vouched: the history has other problems first" in result.stderr
    assert "threshold was 0.9, now 0.5" in result.stderr
    assert file_fingerprint(populated) == before
