"""Who is looking: OIDC sign-in when configured, else a clearly labelled demo picker.

The dashboard never decides what a role may do. It finds out who the user is
and passes that name to the library, whose permission checks refuse what the
role does not allow (a reviewer's forged "approve" request fails in
``labels``, not here). The UI only hides buttons a role could not use anyway.

* With an ``[auth]`` section in ``.streamlit/secrets.toml``, ``st.login``
  signs the user in with OpenID Connect; the store's role grants
  (``user_roles``, managed by an admin) map the signed-in e-mail to a role.
  Only an e-mail the provider verified signs anyone in
  (:func:`fieldtrust.store.access.signed_in_user`), never a display name.
* Without it, ``fieldtrust serve --as NAME`` makes the dashboard act as that
  one local user (their role read from the store's grants on every run).
* ``fieldtrust serve --demo`` (this machine only) runs it in DEMO MODE: a
  sidebar picker lists the users the store knows with their roles, and anyone
  can act as anyone. The banner says so, because that is fine for a demo and
  wrong for production.
* With none of these, nobody gets in: a page says how to configure sign-in.
"""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st
from fieldtrust.dashboard import data, layout, state
from fieldtrust.store import hosts
from fieldtrust.store.access import ROLES, signed_in_user

from fieldtrust.errors import PermissionDenied


@dataclass(frozen=True)
class Identity:
    """The acting user, the roles they hold in the store, and how we know."""

    user: str
    roles: frozenset[str]
    demo: bool

    @property
    def role(self) -> str | None:
        """The roles as one text ("qa_lead, admin"), None when they hold none."""
        return ", ".join(r for r in ROLES if r in self.roles) or None


def oidc_configured() -> bool:
    """Whether ``st.secrets`` holds an ``[auth]`` section for ``st.login``."""
    try:
        return "auth" in st.secrets
    except Exception:  # no secrets file at all: Streamlit raises, we run in demo mode
        return False


def draw_identity(path: str, *, has_store: bool) -> Identity | None:
    """Sign the user in (or let them pick a demo user) in the sidebar; the identity."""
    mode = data.serve_mode()
    if oidc_configured():
        identity: Identity | None = _oidc_identity()
    elif mode.user is not None:
        identity = _local_identity(mode.user, has_store)
    elif mode.demo:
        identity = _demo_identity(has_store)
    else:
        _no_sign_in()
    st.session_state[state.AUTH_IDENTITY] = identity
    return identity


def _no_sign_in() -> None:
    """No sign-in configured and no local user named: nobody gets in."""
    st.title("fieldtrust")
    st.error(
        "Sign-in is not configured. Add an `[auth]` section to `.streamlit/secrets.toml`"
        " (docs/dashboard.md), or start the dashboard as one local user with"
        " `fieldtrust serve --as NAME` (or `FIELDTRUST_USER=NAME fieldtrust serve`), or with"
        " demo users on this machine with `fieldtrust serve --demo`.",
        icon=":material/lock:",
    )
    st.stop()


def _local_identity(user: str, has_store: bool) -> Identity:
    """The one local user ``fieldtrust serve --as NAME`` named; their roles from the store."""
    identity = Identity(
        user=user, roles=frozenset(data.cached("role_of", user) if has_store else ()), demo=False
    )
    st.sidebar.markdown(
        f"Acting as **{layout.plain(user)}** (local)  \nroles: **{identity.role or 'none'}**"
    )
    if identity.role is None:
        st.sidebar.caption("Ask an admin to grant you a role (`fieldtrust users grant`).")
    return identity


def remember_pick() -> None:
    """Keep the demo user picked in the browser before anything can find the store busy.

    A pick arrives as the picker's widget state at the start of a run; if that
    run ends on the busy warning, the picker is not drawn and Streamlit drops
    the state, so the next run would fall back to the previous pick.
    """
    picked = st.session_state.get(state.AUTH_DEMO_USER)
    if picked is not None:
        st.session_state[state.AUTH_DEMO_KEPT] = picked


def current_identity() -> Identity | None:
    """The identity the entry point established on this run."""
    identity = st.session_state.get(state.AUTH_IDENTITY)
    return identity if isinstance(identity, Identity) else None


def _oidc_identity() -> Identity:
    if not st.user.get("is_logged_in", False):
        st.title("fieldtrust")
        st.write("Sign in to see where the extraction model can be trusted.")
        st.button("Sign in", on_click=st.login, type="primary")
        st.stop()
    try:
        user = signed_in_user({claim: st.user.get(claim) for claim in ("email", "email_verified")})
    except PermissionDenied as exc:
        st.title("fieldtrust")
        st.error(f"Your sign-in did not give a verified e-mail address, so you are nobody"
                 f" here. {layout.plain(exc)}", icon=":material/lock:")
        st.button("Sign out", on_click=st.logout)
        st.stop()
    roles = frozenset(data.cached("role_of", user))
    identity = Identity(user=user, roles=roles, demo=False)
    st.sidebar.markdown(
        f"Signed in as **{layout.plain(user)}**  \nroles: **{identity.role or 'none'}**"
    )
    if not roles:
        st.sidebar.caption("Ask an admin to grant you a role (`fieldtrust users grant`).")
    st.sidebar.button("Sign out", on_click=st.logout)
    return identity


def _demo_identity(has_store: bool) -> Identity | None:
    if not _reached_on_loopback():
        _no_sign_in()
    st.sidebar.warning(
        "**DEMO MODE**: no sign-in; act as any user below. Configure `[auth]` in"
        " `.streamlit/secrets.toml` for real sign-in.",
        icon=":material/theater_comedy:",
    )
    users = data.cached("users") if has_store else ()
    if not users:
        st.sidebar.caption("No users in this store yet (an admin grants roles).")
        return None
    roles = dict(users)
    names = list(roles)
    # A run that cannot draw the picker (the store was busy) drops the widget's
    # state; the copy kept outside it stops the next run from quietly acting as
    # the default user instead of the one picked.
    chosen = st.session_state.get(state.AUTH_DEMO_USER, st.session_state.get(state.AUTH_DEMO_KEPT))
    st.session_state[state.AUTH_DEMO_USER] = chosen if chosen in roles else default_user(roles)
    user = st.sidebar.selectbox(
        "Act as (demo)", names, key=state.AUTH_DEMO_USER,
        format_func=lambda name: f"{name} ({', '.join(roles[name])})",
    )
    st.session_state[state.AUTH_DEMO_KEPT] = user
    return Identity(user=user, roles=frozenset(roles[user]), demo=True)


def _reached_on_loopback() -> bool:
    """Whether this session's page was asked for by a loopback name (the demo picker's only one).

    ``fieldtrust serve`` already refuses other names; this holds for a dashboard
    started some other way too. A session without request headers (a test) came
    through no network.
    """
    host = st.context.headers.get("Host")
    return host is None or hosts.is_loopback_host(host)


def default_user(roles: dict[str, tuple[str, ...]]) -> str:
    """Start as the QA lead: the overview is theirs."""
    for wanted in ("qa_lead", "manager", "admin", "reviewer"):
        for name, held in roles.items():
            if wanted in held:
                return name
    return next(iter(roles))
