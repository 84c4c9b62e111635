"""Automation (manager): candidates with their evidence, decisions, policy, warnings.

Approving, rejecting and revoking call the library's acts
(:mod:`fieldtrust.governance.acts`), as the CLI does: they check the role,
certify the whole stratum from the store at the store's policy settings (not
the sidebar's filters, this page's cached report or settings looser than the
policy) and freeze the evidence. The buttons only appear for
roles the library's permission table allows to decide.
Approving and revoking open a dialog that restates the threshold, coverage and
evidence first.
"""

from __future__ import annotations

import streamlit as st
from fieldtrust.dashboard import auth, data, downloads, layout, sidebar, state, views
from fieldtrust.governance import acts
from fieldtrust.governance.monitoring import SegmentMonitor
from fieldtrust.governance.policy import policy_json
from fieldtrust.store.access import allowed

from fieldtrust.errors import FieldtrustError


def _decide(identity: auth.Identity, action: str, stratum: views.Stratum) -> None:
    """Button callback: record the decision, then report how it went."""
    comment = st.session_state.get(state.AUTO_COMMENT, "")
    act = {"approve": acts.approve, "reject": acts.reject, "revoke": acts.revoke}[action]
    try:
        decision = data.write(
            act, identity.user, stratum.doc_type, stratum.field, comment,
            criteria=data.settings().criteria,
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


#: What confirming each act means, restated in its dialog.
_CONSEQUENCE = {
    "approve": "From now on, extractions of this stratum at or above the threshold are no"
               " longer checked by people.",
    "revoke": "Every extraction of this stratum goes back to people.",
}


def _open_dialog(action: str, key: str) -> None:
    """Button callback: ask for confirmation of ``action`` on the stratum ``key``."""
    st.session_state[state.AUTO_DIALOG] = (action, key)


def _close_dialog() -> None:
    st.session_state.pop(state.AUTO_DIALOG, None)


def _confirmed(identity: auth.Identity, action: str, stratum: views.Stratum) -> None:
    """Confirm button callback: close the dialog and record the decision."""
    _close_dialog()
    _decide(identity, action, stratum)


@st.dialog("Confirm the decision", on_dismiss=_close_dialog)
def _confirm(identity: auth.Identity, action: str, stratum: views.Stratum) -> None:
    """Restate what the decision rests on; record it only when confirmed."""
    if state.AUTO_DIALOG not in st.session_state:  # confirmed or cancelled just now
        st.rerun()
    st.markdown(f"**{action.capitalize()}** automation of **{layout.plain(stratum.label)}**")
    if stratum.threshold is not None:
        st.markdown(f"Threshold: **{stratum.threshold:.3f}**")
    st.markdown(stratum.summary)
    if action == "approve":
        _own_labels_warning(identity, stratum)
    st.caption(_CONSEQUENCE[action] + " The evidence above is frozen with the decision.")
    comment = st.session_state.get(state.AUTO_COMMENT, "")
    st.markdown(f"Comment: {layout.plain(comment) if comment else '(none: it will be refused)'}")
    confirm, cancel = st.columns(2)
    confirm.button(f"Confirm {action}", key=state.AUTO_CONFIRM, type="primary",
                   on_click=_confirmed, args=(identity, action, stratum), width="stretch")
    cancel.button("Cancel", key=state.AUTO_CANCEL, on_click=_close_dialog, width="stretch")


def _decision_form(identity: auth.Identity | None, strata: list[views.Stratum]) -> None:
    st.subheader("Decide")
    if identity is None or not allowed(identity.roles, "decide"):
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
    _own_labels_warning(identity, stratum)
    st.caption(
        "Approving certifies the whole stratum, every form version, at the store's policy"
        " settings, whatever these filters show; production automates only the form"
        " versions the approval covers."
    )
    st.text_area("Comment", key=state.AUTO_COMMENT,
                 placeholder="Why: what you checked, who agreed, any conditions.")
    approve, reject, revoke, _ = st.columns([1, 1, 1, 3])
    # Approving and revoking change what people check: a dialog restates the evidence first.
    approve.button("Approve", key=state.AUTO_APPROVE, type="primary",
                   disabled=not stratum.candidate, on_click=_open_dialog,
                   args=("approve", stratum.key), width="stretch")
    reject.button("Reject", key=state.AUTO_REJECT, on_click=_decide,
                  args=(identity, "reject", stratum), width="stretch")
    revoke.button("Revoke", key=state.AUTO_REVOKE, disabled=not stratum.active,
                  on_click=_open_dialog, args=("revoke", stratum.key), width="stretch")
    asked = st.session_state.get(state.AUTO_DIALOG)
    if asked is not None and asked[1] == stratum.key:
        _confirm(identity, asked[0], stratum)


def _resume(identity: auth.Identity, monitor: SegmentMonitor) -> None:
    """Button callback: resume a suspended segment through the library act."""
    comment = st.session_state.get(state.AUTO_RESUME_COMMENT, "")
    try:
        resumed = data.write(acts.resume, identity.user, monitor.doc_type, monitor.field,
                             monitor.form_version, monitor.extractor_version, comment)
    except FieldtrustError as exc:
        st.session_state[state.AUTO_FLASH] = ("error", layout.plain(exc))
        return
    st.session_state[state.AUTO_RESUME_COMMENT] = ""
    st.session_state[state.AUTO_FLASH] = (
        "success", f"resumed; charted again from {layout.plain(resumed.since_week)}")


def _monitoring(identity: auth.Identity | None) -> None:
    st.subheader("Monitoring after approval")
    monitors = data.cached("monitoring")
    if not monitors:
        st.caption("No approved stratum: nothing is monitored.")
        return
    for monitor in monitors:
        if monitor.suspended:
            st.warning(views.suspension_text(monitor), icon=":material/pause_circle:")
    downloads.show_table("monitoring", views.monitoring_frame(monitors))
    st.caption(
        "Each covered segment (form version x extractor version) is charted from the"
        " approval's own week through the last closed week, with the chart frozen at"
        " approval; a suspended segment goes to people in the exported policy."
    )
    suspended = [m for m in monitors if m.suspended]
    if not suspended or identity is None or not allowed(identity.roles, "decide"):
        return
    names = {f"{m.doc_type} · {m.field} · {m.form_version} x {m.extractor_version}": m
             for m in suspended}
    chosen = st.selectbox("Suspended segment", list(names), key=state.AUTO_RESUME_SEGMENT)
    st.text_input("Why automation may resume", key=state.AUTO_RESUME_COMMENT)
    st.button("Resume", key=state.AUTO_RESUME, on_click=_resume,
              args=(identity, names[chosen]))


def _own_labels_warning(identity: auth.Identity, stratum: views.Stratum) -> None:
    """Say so when every label this approval would rest on is the approver's own."""
    if not stratum.candidate:
        return
    warning = data.cached("own_labels", identity.user, stratum.doc_type, stratum.field).warning()
    if warning:
        st.warning(layout.plain(warning), icon=":material/warning:")


def _policy_export() -> None:
    try:
        payload = data.cached("policy_export")
    except FieldtrustError as exc:  # a history that does not verify, or no signing key
        st.warning(f"No policy file to download: {layout.plain(exc)}",
                   icon=":material/gpp_bad:")
        return
    st.download_button(
        "Download policy (JSON)", data=policy_json(payload),
        file_name="fieldtrust-policy.json", mime="application/json",
        icon=":material/download:", on_click="ignore", key="automation.policy_download",
    )


st.title("Automation")
bar = data.bar()
scope = sidebar.current_scope()
identity = auth.current_identity()
report = data.cached("calibration_report", *views.report_args(scope, bar))
assessments = views.assessments(report)
policy = data.cached("current_policy")
# A looser ask never hides a recommendation (as `fieldtrust policy show`).
warnings = data.cached("revocations", bar.policy_or_stricter())
strata = views.decision_strata(assessments, policy)

loosened = views.not_approvable_text(bar)
if loosened:
    st.warning(loosened, icon=":material/rule:")

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
_monitoring(identity)

st.subheader("Decision history")
history = data.cached("decision_history")
if history:
    downloads.show_table("decision_history", views.history_frame(history))
else:
    st.caption("No decisions yet.")
