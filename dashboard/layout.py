"""Small drawing helpers every page uses: empty states, numbers with n and interval."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import streamlit as st
from fieldtrust.dashboard import data, state
from fieldtrust.labels.verdict_rule import Choice, VerdictDetails, form_fields

EMPTY_HINT = (
    "No extractions yet: run `fieldtrust demo` (a demo store to explore) or"
    " `fieldtrust ingest FILE` (your own extractions), then reload this page."
)


#: Characters Streamlit markdown gives a meaning: CommonMark's, its :color[...] and
#: :emoji: directives (the colon) and $math$.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")
#: Where GitHub-flavoured markdown starts a link of its own in plain text, escapes or not:
#: ``www.``, ``scheme://`` and an e-mail address's ``@``.
_AUTOLINK = re.compile(r"(?i)(?<=www)(?=\.)|(?<=:)(?=//)|(?<=@)")
#: U+2060 WORD JOINER: invisible, and not a character a link can be made of.
_JOINER = "\u2060"


def plain(text: object) -> str:
    """``text`` escaped so markdown shows it as written: the one escape of every text from
    documents, files, the store or a sign-in that a page draws as markdown.

    A doc_type like ``[click](http://...)`` or ``:red[ALERT]`` must read as those
    characters, not become a link or a red word on a reviewer's screen: each
    character markdown gives a meaning is backslash-escaped. GitHub-flavoured
    markdown also turns ``https://...``, ``www.example`` and ``ana@example.com``
    into links after escapes are undone, so an invisible word joiner goes where
    such a link would begin; the text reads the same (copied, it holds U+2060
    there). HTML is never rendered: no page passes ``unsafe_allow_html``.
    """
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _AUTOLINK.sub(_JOINER, str(text)))


def code_span(text: object) -> str:
    """``text`` as inline code that no backtick inside it can close early."""
    value = str(text)
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    fence = "`" * (longest + 1)
    return f"{fence} {value} {fence}" if longest else f"`{value}`"


def page_icon() -> Any:
    """The browser tab's icon, drawn here: a material icon as page icon is an image the
    browser fetches from Google's font host, on every page, for every reviewer."""
    from PIL import Image, ImageDraw

    icon = Image.new("RGBA", (32, 32), (0, 0, 0, 0))
    draw = ImageDraw.Draw(icon)
    draw.rounded_rectangle((1, 1, 30, 30), radius=7, fill=(38, 110, 80, 255))
    draw.line((8, 17, 14, 23, 24, 10), fill=(255, 255, 255, 255), width=4)
    return icon


def empty_state(path: str) -> None:
    """What a page shows when the store is missing or holds no extractions."""
    st.info(EMPTY_HINT, icon=":material/inbox:")
    getting_started(None)
    st.caption(f"Store: {code_span(path)}")


#: The first steps on a team's own data, with the command of each (docs/quickstart.md).
GETTING_STARTED = (
    ("Ingest your extraction log", "fieldtrust ingest extractions.csv",
     "One row per extracted field: doc_id, doc_type, field, confidence, extracted_at."),
    ("Grant roles", "fieldtrust users grant NAME qa_lead",
     "An admin (fieldtrust init --admin NAME) grants qa_lead to whoever draws and labels;"
     " reviewers get reviewer."),
    ("Draw this week's audit sample", "fieldtrust sample --week WEEK --out sample.csv",
     "Or on the Weekly audit page. WEEK comes from fieldtrust info --values."),
    ("Label it", "fieldtrust labels import sample.csv",
     "Fill the verdict column and import it, or label item by item on the Review page."),
)


def getting_started(version: data.DataVersion | None) -> None:
    """The getting-started panel: the four first steps, each marked done or to do."""
    done = (
        version is not None and version.extractions > 0,
        version is not None and version.roles > 1,
        version is not None and version.samples > 0,
        version is not None and version.labels > 0,
    )
    with st.container(border=True, key="getting_started"):
        st.subheader("Getting started")
        st.caption("Four steps from your own extraction log to the first accuracy figures;"
                   " docs/quickstart.md shows each with its output.")
        for number, ((title, command, hint), finished) in enumerate(
            zip(GETTING_STARTED, done, strict=True), start=1
        ):
            mark = ":green[:material/check_circle:]" if finished else ":material/circle:"
            st.markdown(f"{mark} **{number}. {title}**{' (done)' if finished else ''}")
            if not finished:
                st.code(command, language="bash")
                st.caption(hint)


def sidebar_footer(path: str, version: data.DataVersion) -> None:
    """Which store the dashboard shows and how much is in it."""
    st.sidebar.divider()
    st.sidebar.caption(
        f"Store {code_span(path)}  \n{version.extractions:,} extractions"
        f" · {version.labels:,} labels recorded (every review; estimates use the"
        f" design-based ones) · {version.decisions:,} decisions"
    )


def pct(value: float | None, digits: int = 1) -> str:
    """``0.9712`` -> ``'97.1%'``; a dash when undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{100 * value:.{digits}f}%"


def with_interval(value: float | None, low: float | None, high: float | None,
                  n: int | None = None) -> str:
    """``97.1% [96.5, 97.6] (n = 1,204)``: every number carries its interval and n."""
    text = pct(value)
    if low is not None and high is not None and not (math.isnan(low) or math.isnan(high)):
        text += f" [{100 * low:.1f}, {100 * high:.1f}]"
    if n is not None:
        text += f" (n = {n:,})"
    return text


def fmt(value: Any, digits: int = 3) -> str:
    """A number for prose: a dash when undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def verdict_fields(verdict: str, form: state.VerdictForm) -> VerdictDetails:
    """The label fields of ``verdict`` from ``form``'s widgets as they stand (one rule for both)."""
    return form_fields(
        verdict,
        corrected_value=st.session_state.get(form.corrected_value),
        corrected_status=st.session_state.get(form.corrected_status),
        error_type=st.session_state.get(form.error_type),
        error_detail=st.session_state.get(form.error_detail),
    )


def verdict_details(form: state.VerdictForm, *, columns: int = 2) -> None:
    """The details of an 'incorrect' verdict, in the rule's own words
    (:mod:`fieldtrust.labels.verdict_rule`): nothing is picked until the reviewer picks it.
    """
    from fieldtrust.labels.verdict_rule import CORRECTION_CHOICES, error_choices

    left, right = st.columns(2) if columns == 2 else (st.container(), st.container())
    left.text_input("Corrected value", key=form.corrected_value)
    _choice_box(left, "What the document holds", CORRECTION_CHOICES, form.corrected_status)
    _choice_box(right, "Error type", error_choices(), form.error_type)
    right.text_input("Detail (needed for 'Other')", key=form.error_detail)


def _choice_box(place: Any, label: str, choices: tuple[Choice, ...], key: str) -> None:
    """A selectbox of ``choices`` showing their labels, each one's help in the tooltip."""
    labels = {c.value: c.label for c in choices}
    place.selectbox(label, [c.value for c in choices], key=key,
                    format_func=lambda value: labels.get(value, str(value)),
                    help="\n\n".join(f"**{c.label}**: {c.help}" for c in choices))


def reset_verdict_form(form: state.VerdictForm) -> None:
    """Empty a verdict form for the next item (callbacks only: before its widgets are drawn)."""
    st.session_state[form.corrected_value] = ""
    st.session_state[form.error_detail] = ""
    st.session_state[form.corrected_status] = None
    st.session_state[form.error_type] = None


def lazy_tabs(sections: Mapping[str, Callable[[], None]], key: str) -> None:
    """Tabs titled by ``sections``' keys; only the open tab runs its section (and its queries)."""
    tabs = st.tabs(list(sections), key=key, on_change="rerun")
    for tab, show in zip(tabs, sections.values(), strict=True):
        if tab.open:
            with tab:
                show()


def flash(key: str) -> None:
    """Show (once) the message a previous run left under ``key``.

    The text is markdown: whoever stores it escapes library messages with
    :func:`plain` (they quote values from files).
    """
    message = st.session_state.pop(key, None)
    if message:
        kind, text = message
        getattr(st, kind)(text)
