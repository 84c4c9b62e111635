"""Passing for someone else (issue "hostile conditions, round 2", faults 6 and 14).

6. OIDC sign-in took the ``name`` claim (then ``sub``) when there was no
   e-mail, and an e-mail its provider had not verified: a provider account
   whose display name was ``root`` got root's admin role.
14. A Label Studio export whose two annotations of a task are by one annotator
   was imported as a primary and a "blind" second review by the same person.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fieldtrust.labels.label_import import import_labels
from fieldtrust.store.access import signed_in_user
from rel_store import ADMIN, QA_LEAD
from streamlit.testing.v1 import AppTest

from fieldtrust.errors import PermissionDenied, ValidationError
from tests.conftest import table_fingerprint

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
AUTH = {"redirect_uri": "http://localhost:8501/oauth2callback", "cookie_secret": "x" * 32,
        "client_id": "fieldtrust", "client_secret": "secret",
        "server_metadata_url": "https://id.example/.well-known/openid-configuration"}


# --- 6. OIDC: a verified e-mail or no sign-in --------------------------------------------------


@pytest.mark.parametrize("claims", [
    {"name": ADMIN, "sub": "8f1c"},  # no e-mail: never the display name
    {"sub": ADMIN},  # nor the subject
    {"email": ADMIN, "name": ADMIN},  # an e-mail the provider does not say it verified
    {"email": ADMIN, "email_verified": False},
    {"email": ADMIN, "email_verified": "false"},
    {"email": ADMIN, "email_verified": "yes"},
    {"email": "", "email_verified": True},
    {"email": "root\nadmin", "email_verified": True},
])
def test_a_sign_in_without_a_verified_e_mail_is_nobody(claims: dict[str, Any]) -> None:
    with pytest.raises(PermissionDenied, match="verified e-mail"):
        signed_in_user(claims)


def test_a_verified_e_mail_is_the_user() -> None:
    assert signed_in_user({"email": " ana@example.com ", "email_verified": True,
                           "name": ADMIN}) == "ana@example.com"
    # Some providers send the flag as text.
    assert signed_in_user({"email": "ana@example.com", "email_verified": "true"}) \
        == "ana@example.com"


@pytest.mark.parametrize("claims", [{"name": ADMIN, "sub": ADMIN},
                                    {"email": ADMIN, "email_verified": False}])
def test_the_dashboard_lets_a_display_name_or_unverified_e_mail_in_as_nobody(
    populated: Path, monkeypatch: pytest.MonkeyPatch, claims: dict[str, Any]
) -> None:
    from fieldtrust.dashboard import state

    monkeypatch.setenv("FIELDTRUST_DB", str(populated))
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, **claims}
    at.run()
    assert not at.exception
    assert state.AUTH_IDENTITY not in at.session_state or \
        at.session_state[state.AUTH_IDENTITY] is None
    shown = " ".join(e.value for e in at.error)
    assert "did not give a verified e-mail address" in shown
    assert [b.label for b in at.button] == ["Sign out"]
    assert not at.get("dataframe") and not at.selectbox


def test_a_verified_e_mail_signs_in_with_its_own_roles(
    populated: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fieldtrust.dashboard import state

    monkeypatch.setenv("FIELDTRUST_DB", str(populated))
    at = AppTest.from_file(APP, default_timeout=120)
    at.secrets["auth"] = AUTH
    at.user = {"is_logged_in": True, "email": QA_LEAD, "email_verified": True, "name": ADMIN}
    at.run()
    assert not at.exception
    identity = at.session_state[state.AUTH_IDENTITY]
    assert (identity.user, identity.role) == (QA_LEAD, "qa_lead")


# --- 14. a blind second review by the primary reviewer -----------------------------------------


def _task(extraction_id: str, sample_id: str, *annotators: str) -> dict[str, Any]:
    """A task of a Label Studio export: fieldtrust's data, one 'correct' annotation per name."""
    return {
        "id": 1,
        "data": {"extraction_id": extraction_id, "sample_id": sample_id, "fieldtrust_task": 1},
        "annotations": [
            {"id": number, "completed_by": {"id": number, "email": name},
             "created_at": f"2026-11-30T10:0{number}:00Z", "was_cancelled": False,
             "result": [{"from_name": "verdict", "value": {"choices": ["correct"]}}]}
            for number, name in enumerate(annotators, start=1)
        ],
    }


def _unlabelled_items(pcon: Any, sample_id: str, count: int) -> list[str]:
    return [r[0] for r in pcon.execute(
        "SELECT extraction_id FROM audit_items i WHERE sample_id = ? AND NOT EXISTS"
        " (SELECT 1 FROM labels l WHERE l.extraction_id = i.extraction_id)"
        " ORDER BY extraction_id LIMIT ?", [sample_id, count]).fetchall()]


def test_one_annotator_is_not_both_reviews_of_a_label_studio_task(
    pcon: Any, sample_id: str, tmp_path: Path
) -> None:
    first, second = _unlabelled_items(pcon, sample_id, 2)
    export = tmp_path / "export.json"
    export.write_text(json.dumps([
        _task(first, sample_id, "ana@x", "ben@x"),  # a real double review
        _task(second, sample_id, "ana@x", "ana@x"),
    ]), encoding="utf-8")
    before = table_fingerprint(pcon)
    with pytest.raises(ValidationError) as caught:
        # Label Studio's e-mails mapped to the store's reviewers, as a team's import does.
        import_labels(pcon, export, actor=QA_LEAD, format="label-studio",
                      reviewer_map={"ana@x": "ana", "ben@x": "ben"})
    message = str(caught.value)
    assert f"column reviewer: 'ana' gave the primary review of extraction '{second}'" \
        in message
    assert caught.value.total == 1
    assert table_fingerprint(pcon) == before

