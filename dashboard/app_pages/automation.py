"""Automation (manager): candidates with their evidence, decisions, policy, warnings.

Approving, rejecting and revoking call the library's acts
(:mod:`fieldtrust.governance.acts`), as the CLI does: they check the role,
certify the whole stratum from the store at the store's policy settings (not
the sidebar's filters, this page's cached report or settings looser than the
policy) and freeze the evidence. The buttons only appear for
roles the library's permission table allows to decide.
"""

from __future__ import annotations

import streamlit as st
from fieldtrust.dashboard import auth, data, downloads, layout, sidebar, state, views
from fieldtrust.governance import acts
from fieldtrust.governance.certification import Criteria
from fieldtrust.governance.policy import policy_json
from fieldtrust.store.access import allowed
from fieldtrust.store.errors import FieldtrustError


def _decide(identity: auth.Identity, action: str, stratum: views.Stratum) -> None:
    """Button callback: record the decision, then report how it went."""
    comment = st.session_state.get(state.AUTO_COMMENT, "")
    act = {"approve": acts.approve, "reject": acts.reject, "revoke": acts.revoke}[action]
    try:
        decision = data.write(
            act, identity.user, stratum.doc_type, stratum.field, comment,
            criteria=Criteria.of(views.settings()),
            # The threshold shown: approving refuses it unless the store certifies it now.
            # A revocation names the active threshold itself.
            threshold=None if action == "revoke" else stratum.threshold,
        )
    except FieldtrustError as exc:
        st.session_state[state.AUTO_FLASH] = ("error", layout.plain(exc))
        return
    st.session_state[state.AUTO_COMMENT] = ""
    st.session_state[state.AUTO_FLASH] = (
        "success",
        f"{decision.action} of {layout.plain(decision.doc_type)} ·"
        f" {layout.plain(decision.field)} recorded"
        f" (evidence `{(decision.evidence_id or '')[:12]}`).",
    )


def _decision_form(identity: auth.Identity | None, strata: list[views.Stratum]) -> None:
    st.subheader("Decide")
    if identity is None or not allowed(identity.role, "decide"):
        who = "nobody" if identity is None else f"{identity.user} ({identity.role or 'no role'})"
        st.info(f"Decisions need the manager or admin role; you are {layout.plain(who)}.")
        return
    layout.flash(state.AUTO_FLASH)
    if not strata:
        st.caption("No stratum to decide on for these filters.")
        return
    labels = {s.key: s for s in strata}
    chosen = st.selectbox("Stratum", list(labels), key=state.AUTO_STRATUM,
                          format_func=lambda key: labels[key].label)
    stratum = labels[chosen]
    st.markdown(stratum.summary)
    st.caption(
        "Approving certifies the whole stratum, every form version, at the store's policy"
        " settings, whatever these filters show; production automates only the form"
        " versions the approval covers."
    )
    st.text_area("Comment", key=state.AUTO_COMMENT,
                 placeholder="Why: what you checked, who agreed, any conditions.")
    approve, reject, revoke, _ = st.columns([1, 1, 1, 3])
    approve.button("Approve", key=state.AUTO_APPROVE, type="primary",
                   disabled=not stratum.candidate, on_click=_decide,
                   args=(identity, "approve", stratum), width="stretch")
    reject.button("Reject", key=state.AUTO_REJECT, on_click=_decide,
                  args=(identity, "reject", stratum), width="stretch")
    revoke.button("Revoke", key=state.AUTO_REVOKE, disabled=not stratum.active,
                  on_click=_decide, args=(identity, "revoke", stratum), width="stretch")


def _policy_export() -> None:
    payload = data.cached("policy_export")
    st.download_button(
        "Download policy (JSON)", data=policy_json(payload),
        file_name="fieldtrust-policy.json", mime="application/json",
        icon=":material/download:", on_click="ignore", key="automation.policy_download",
    )


st.title("Automation")
settings = views.settings()
scope = sidebar.current_scope()
identity = auth.current_identity()
report = data.cached("calibration_report", *views.report_args(scope, settings))
assessments = views.assessments(report)
policy = data.cached("current_policy")
warnings = data.cached("revocations", settings.target, settings.confidence)
strata = views.decision_strata(assessments, policy)

for warning in warnings:
    st.warning(views.revocation_text(warning), icon=":material/warning:")

st.subheader("Candidates")
candidates = views.candidates_frame(assessments)
if candidates.empty:
    st.info("No stratum is an automation candidate for these filters; see why below.")
else:
    downloads.show_table("candidates", candidates)

with st.expander("Why the others are not candidates, and the labels that would settle it"):
    downloads.show_table("non_candidates", views.non_candidates_frame(report))

_decision_form(identity, strata)

st.subheader("Current policy")
if policy:
    downloads.show_table("policy", views.policy_frame(policy))
else:
    st.caption("No decisions yet: nothing is automated.")
_policy_export()

st.subheader("Decision history")
history = data.cached("decision_history")
if history:
    downloads.show_table("decision_history", views.history_frame(history))
else:
    st.caption("No decisions yet.")
