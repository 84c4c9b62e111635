"""Review and governance commands: users, decide, policy, agreement, adjudicate, errors.

Also `labels export`, added to the `labels` group of store_cmds.

Every command that changes something acts as ``--as NAME`` or, without it, as
the ``user`` setting (``FIELDTRUST_USER``); the library checks NAME's roles in
the store (docs/governance.md), so the CLI grants nothing the dashboard would
refuse.

Reports that need scipy or pyarrow (revocation, agreement, exports) are
imported inside their commands, so `fieldtrust --help` starts fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, Unpack

import click
import duckdb

from fieldtrust.cli.common import (
    AS_HELP,
    FORCE_HELP,
    acting_user,
    echo_json,
    echo_table,
    held_bar,
    open_db,
    settings,
)
from fieldtrust.cli.terminal import echo
from fieldtrust.governance.decisions import DECISION_ACTIONS
from fieldtrust.labels.taxonomy import CORRECTED_STATUSES, ERROR_TYPES
from fieldtrust.labels.verdict_rule import VerdictDetails
from fieldtrust.labels.verdicts import VERDICTS
from fieldtrust.store.access import (
    ROLES,
    current_roles,
    grant_role,
    list_users,
    revoke_role,
    role_history,
    roles_text,
)
from fieldtrust.store.bar import SETTINGS as BAR_SETTINGS
from fieldtrust.store.bar import setting_help, setting_type
from fieldtrust.store.scope import Scope, last_weeks

_Command = TypeVar("_Command", bound=Callable[..., Any])

_AS = click.option("--as", "actor", default=None, metavar="NAME", help=AS_HELP)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON.")
_WEEKS = click.option("--weeks", type=click.IntRange(min=1), default=None,
                      help="Only the last N weeks (default: everything in the store).")


def _verdict_options(command: _Command) -> _Command:
    """What goes with an 'incorrect' verdict: the corrected value or its absence, and why.

    The command receives them as ``**details`` (:class:`VerdictDetails`).
    """
    for option in reversed((
        click.option("--corrected-value", default=None, help="incorrect: the right value."),
        click.option("--corrected-status", type=click.Choice(list(CORRECTED_STATUSES)),
                     default=None, help="incorrect without a value: null (field absent) or"
                     " unclear (unreadable)."),
        click.option("--error-type", type=click.Choice(list(ERROR_TYPES)), default=None,
                     help="incorrect: why (docs/review.md lists the types)."),
        click.option("--error-detail", default=None, help="Required with --error-type other."),
    )):
        command = option(command)
    return command


def _scope(con: duckdb.DuckDBPyConnection, weeks: int | None) -> Scope:
    if weeks is None:
        return Scope()
    # A cursor of its own: store.scope.latest_week leaves a fetchone() result open.
    cursor = con.cursor()
    try:
        return Scope(weeks=last_weeks(cursor, weeks))
    finally:
        cursor.close()


# --- users -------------------------------------------------------------------


@click.group("users", epilog="Example: fieldtrust users grant alice reviewer --as root")
def users_group() -> None:
    """Grant and revoke roles and list who holds which (reviewer, qa_lead, manager, admin).

    A user holds a set of roles: one person may be admin and qa_lead at once.
    """


@users_group.command("grant", epilog="Example: fieldtrust users grant alice reviewer --as root")
@click.argument("name")
@click.argument("role", type=click.Choice([*ROLES, "none"]))
@_AS
@click.pass_context
def users_grant(ctx: click.Context, name: str, role: str, actor: str | None) -> None:
    """Add the role ROLE to NAME's roles ('none' takes them all away). Only an admin
    may, except the first grant of a new store, which must make an admin
    (fieldtrust init --admin NAME does that).
    """
    con = open_db(ctx)
    grant = grant_role(con, acting_user(ctx, actor, what="granting"), name, role)
    held = roles_text(current_roles(con, grant.user_name)) or "no role"
    echo(f"{grant.user_name} now holds: {held} (granted {role} by {grant.granted_by})")


@users_group.command("revoke", epilog="Example: fieldtrust users revoke alice qa_lead --as root")
@click.argument("name")
@click.argument("role", type=click.Choice(ROLES))
@_AS
@click.pass_context
def users_revoke(ctx: click.Context, name: str, role: str, actor: str | None) -> None:
    """Take the role ROLE from NAME; their other roles stay. Only an admin may, and
    the last admin keeps the admin role.
    """
    con = open_db(ctx)
    revoked = revoke_role(con, acting_user(ctx, actor, what="revoking"), name, role)
    held = roles_text(current_roles(con, revoked.user_name)) or "no role"
    echo(f"{revoked.user_name} now holds: {held} (revoked {role} by {revoked.revoked_by})")


@users_group.command("list", epilog="Example: fieldtrust users list --history")
@click.option("--history", is_flag=True, help="Every grant and revocation ever made.")
@_JSON
@click.pass_context
def users_list(ctx: click.Context, history: bool, as_json: bool) -> None:
    """List users and the roles they hold now."""
    con = open_db(ctx, read_only=True)
    if history:
        rows = [c.to_dict() for c in role_history(con)]
    elif as_json:
        rows = [u.to_dict() for u in list_users(con)]
    else:
        rows = [{"user_name": u.user_name, "roles": u.role} for u in list_users(con)]
    echo_json(rows) if as_json else echo_table(rows)


# --- decisions and policy ------------------------------------------------------


@click.command(
    "decide",
    epilog="Example: fieldtrust decide approve --doc-type invoice --field total"
    " --as mona --comment 'certified 4 weeks running'",
)
@click.argument("action", type=click.Choice(DECISION_ACTIONS))
@click.option("--doc-type", required=True, help="Document type of the stratum.")
@click.option("--field", "field_name", required=True, help="Field of the stratum.")
@click.option("--threshold", type=click.FloatRange(0, 1), default=None,
              help="approve: at or above the certified threshold (checked; default: the"
              " certified one); revoke: optional.")
@_AS
@click.option("--comment", required=True, help="Why (kept with the decision).")
@click.pass_context
def decide_cmd(
    ctx: click.Context, action: str, doc_type: str, field_name: str,
    threshold: float | None, actor: str | None, comment: str,
) -> None:
    """Approve, reject or revoke automation of a (doc_type, field) stratum.

    approve certifies the whole stratum from the store at the store's policy
    settings (`fieldtrust policy settings`) and takes its certified threshold;
    a stratum that is not a candidate cannot be approved. Settings from
    flags, the environment or fieldtrust.toml may only make it stricter: a
    looser one is refused. reject freezes that certification as its
    evidence, revoke the revocation recommendation (if any). Needs the role
    manager or admin.
    """
    from fieldtrust.governance import acts
    from fieldtrust.governance.duties import own_labels
    from fieldtrust.governance.evidence import load_evidence

    actor = acting_user(ctx, actor, what="deciding")
    con = open_db(ctx)
    act = {"approve": acts.approve, "reject": acts.reject, "revoke": acts.revoke}[action]
    decision = act(con, actor, doc_type, field_name, comment,
                   criteria=settings(ctx).criteria, threshold=threshold)
    shown = "" if decision.threshold is None else f" at {decision.threshold}"
    echo(
        f"{decision.action} {decision.doc_type}/{decision.field}{shown} by"
        f" {decision.decided_by} ({decision.role}); decision {decision.decision_id},"
        f" evidence {decision.evidence_id}"
    )
    if decision.action == "approve" and decision.evidence_id is not None:
        certification = load_evidence(con, decision.evidence_id).certification
        covered = certification.covered_versions if certification else ()
        segments = certification.covered_segments if certification else ()
        echo(
            f"covers form versions {', '.join(covered) or '(none)'}; segments (form x"
            f" extractor version) {', '.join(f'{f} x {e}' for f, e in segments) or '(none)'};"
            " production sends any other to a human, and `fieldtrust monitor` charts each"
            " covered segment from this week on"
        )
        window = certification.window if certification else None
        warning = own_labels(con, decision.decided_by, doc_type, field_name, window).warning()
        if warning:
            echo(f"warning: {warning}")


@click.group("policy", epilog="Example: fieldtrust policy export --out policy.json")
def policy_group() -> None:
    """The current automation policy: approved thresholds per stratum, and its settings."""


@policy_group.command("export", epilog="Example: fieldtrust policy export --out policy.json")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write to this file (default: print to stdout).")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@click.pass_context
def policy_export(ctx: click.Context, out: str | None, force: bool) -> None:
    """Write the approved thresholds as JSON, signed, for production pipelines to read.

    Each approved stratum lists its covered segments (form version x extractor
    version); the file's "monitoring" gives each segment's status: a segment
    its monitoring chart flagged is "suspended" and goes to people until a
    manager revokes or resumes it (`fieldtrust monitor`).
    """
    from fieldtrust.governance.policy import export_policy, policy_json, write_policy

    con = open_db(ctx, read_only=True)
    if out is None:
        echo(policy_json(export_policy(con)), nl=False)
        return
    write_policy(con, out, force=force)
    echo(f"wrote {out}")


def _policy_options(command: _Command) -> _Command:
    """One option per setting of the bar (``--n-min``...), typed and helped as the bar says."""
    for name in reversed(BAR_SETTINGS):
        command = click.option("--" + name.replace("_", "-"), name, type=setting_type(name),
                               default=None, help=setting_help(name) + " [unchanged]")(command)
    return command


@policy_group.command(
    "settings",
    epilog="Examples: fieldtrust policy settings --json\n\n"
    "fieldtrust policy settings --n-min 600 --target 0.97 --as root",
)
@_policy_options
@click.option("--as", "actor", default=None, metavar="NAME",
              help="Who changes them (an admin); needed to change anything.")
@_JSON
@click.pass_context
def policy_settings_cmd(ctx: click.Context, /, actor: str | None, as_json: bool,
                        **changes: float | int | None) -> None:
    """Show the policy settings every approval is held to, or (admin, with --as) change them.

    Approvals certify at these settings, stored in the store and chained;
    flags and FIELDTRUST_* variables may only make an approval stricter.
    Settings not given keep their value.
    """
    from fieldtrust.governance.bar_admin import set_policy_settings
    from fieldtrust.store.bar import policy_bar

    given = {name: value for name, value in changes.items() if value is not None}
    if given and actor is None:
        raise click.UsageError("changing the policy settings needs --as NAME (an admin)")
    if actor is not None and not given:
        raise click.UsageError(
            "--as without a setting to change; give e.g. --n-min 600 (or leave out --as to show)"
        )
    if given:
        current = set_policy_settings(open_db(ctx), str(actor), **given)
    else:
        current = policy_bar(open_db(ctx, read_only=True))
    shown = current.as_dict()
    if as_json:
        echo_json(shown)
        return
    if given:
        echo(f"policy settings changed by {current.set_by}: "
                   + ", ".join(f"{k} = {v}" for k, v in given.items()))
    who = (f"set by {current.set_by} at {shown['set_at']}" if current.set_by
           else "the defaults: no admin has set them")
    echo(f"policy settings every approval is held to ({who}):")
    echo_table([{"setting": name, "value": value, "meaning": setting_help(name)}
                for name, value in current.bar.values().items()])


@policy_group.command("show", epilog="Example: fieldtrust policy show")
@_JSON
@click.pass_context
def policy_show(ctx: click.Context, as_json: bool) -> None:
    """Every decided stratum with its latest decision, and revocation recommendations."""
    from fieldtrust.governance.revocation import policy_review

    con = open_db(ctx, read_only=True)
    # A looser ask never hides a recommendation: the policy's bar, or a stricter one.
    rows = [r.to_dict() for r in policy_review(con, held_bar(ctx, con).policy_or_stricter())]
    if as_json:
        echo_json(rows)
        return
    echo_table(rows, ["doc_type", "field", "status", "threshold", "last_action", "decided_by",
                      "decided_at", "revocation"])


# --- agreement, adjudication, errors -------------------------------------------


@click.command("agreement", epilog="Example: fieldtrust agreement --weeks 4 --json")
@_WEEKS
@_JSON
@click.pass_context
def agreement_cmd(ctx: click.Context, weeks: int | None, as_json: bool) -> None:
    """Percent agreement and Cohen's kappa of double reviews, per field and reviewer pair."""
    from fieldtrust.labels.agreement import agreement

    con = open_db(ctx, read_only=True)
    report = agreement(con, _scope(con, weeks))
    shown = report.to_dict()
    if as_json:
        echo_json(shown)
        return
    per_field, per_pair = shown["per_field"], shown["per_pair"]
    echo(f"{report.n_items} double-reviewed items, {report.to_adjudicate} to adjudicate")
    echo("\nper field")
    echo_table(per_field)
    echo("\nper reviewer pair")
    echo_table(per_pair)


@click.command("reviewers", epilog="Example: fieldtrust reviewers --json")
@_JSON
@click.pass_context
def reviewers_cmd(ctx: click.Context, as_json: bool) -> None:
    """Each reviewer's miss rate on seeds and false-flag rate, with n and 95% Wilson intervals."""
    from fieldtrust.labels.reviewer_rates import reviewer_rates

    rows = [r.to_dict() for r in reviewer_rates(open_db(ctx, read_only=True))]
    if as_json:
        echo_json(rows)
        return
    echo("miss = a seed (a known wrong value) judged correct; false flag = a"
               " double-reviewed item settled correct, marked incorrect")
    echo_table([{
        "reviewer": r["reviewer"],
        "seeds": r["seeds_judged"], "misses": r["misses"],
        "miss rate [95%]": _rate_text(r["miss_rate"], r["miss_low"], r["miss_high"]),
        "settled correct": r["settled_correct"], "false flags": r["false_flags"],
        "false-flag rate [95%]": _rate_text(r["false_flag_rate"], r["false_flag_low"],
                                            r["false_flag_high"]),
    } for r in rows])


def _rate_text(rate: float | None, low: float | None, high: float | None) -> str:
    if rate is None or low is None or high is None:
        return "no n"
    return f"{rate:.1%} [{low:.1%}, {high:.1%}]"


@click.command(
    "rekey",
    epilog="Example: fieldtrust rekey --next --as ana, then fieldtrust rekey e-17 1234.50"
    " --as ana   (or: fieldtrust rekey --queue)",
)
@click.argument("extraction_id", required=False)
@click.argument("value", required=False)
@click.option("--next", "next_item", is_flag=True,
              help="Hand out your next high-confidence item, its value hidden.")
@click.option("--above", type=click.FloatRange(0, 1), default=0.95, show_default=True,
              help="With --next: only items stated at least this confident.")
@click.option("--absent", is_flag=True, help="The field is absent from the document.")
@click.option("--queue", is_flag=True, help="List the typed values that differ, waiting for"
              " a qa_lead (`fieldtrust adjudicate ID VERDICT`).")
@_AS
@_JSON
@click.pass_context
def rekey_cmd(
    ctx: click.Context, extraction_id: str | None, value: str | None, next_item: bool,
    above: float, absent: bool, queue: bool, actor: str | None, as_json: bool,
) -> None:
    """Blind re-keying: type an item's value without seeing the extraction's (reviewer).

    A typed value equal to the extraction's is a correct label; one that differs
    waits for adjudication. See docs/review.md.
    """
    import dataclasses

    from fieldtrust.labels.rekey import next_blind_items, record_rekey, rekey_queue

    if queue:
        rows = [dataclasses.asdict(r) for r in rekey_queue(open_db(ctx, read_only=True))]
        echo_json(rows) if as_json else echo_table(rows)
        return
    actor = acting_user(ctx, actor, what="re-keying")
    if next_item:
        items = next_blind_items(open_db(ctx), actor, above=above, count=1)
        if as_json:
            echo_json([dataclasses.asdict(i) for i in items])
        elif not items:
            echo("nothing left for you to re-key in this sample")
        else:
            i = items[0]
            echo(f"{i.extraction_id}: {i.doc_type} / {i.field} of document {i.doc_id}"
                       f" (form {i.form_version}); type its value:"
                       f" fieldtrust rekey {i.extraction_id} VALUE --as {actor}")
        return
    if extraction_id is None or (value is None) == (not absent):
        raise click.UsageError("give EXTRACTION_ID and VALUE (or --absent), or --next, or"
                               " --queue")
    keyed = record_rekey(open_db(ctx), actor=actor, extraction_id=extraction_id,
                         typed_value=None if absent else value)
    # The same words whether it matched or not, or was a seed: a reviewer learns
    # nothing per item.
    if as_json:
        echo_json({"rekey_id": keyed.rekey_id, "extraction_id": keyed.extraction_id})
        return
    echo(f"{keyed.extraction_id}: recorded (re-key {keyed.rekey_id})")


@click.command(
    "adjudicate",
    epilog="Example: fieldtrust adjudicate e-123 incorrect --corrected-value 12.50"
    " --error-type misread_characters --as carol   (or: fieldtrust adjudicate --queue)",
)
@click.argument("extraction_id", required=False)
@click.argument("verdict", required=False, type=click.Choice(VERDICTS))
@click.option("--queue", is_flag=True, help="List the disagreements waiting for a verdict.")
@_verdict_options
@click.option("--as", "actor", default=None, metavar="NAME",
              help="The qa_lead adjudicating [default: setting user].")
@_JSON
@click.pass_context
def adjudicate_cmd(
    ctx: click.Context, extraction_id: str | None, verdict: str | None, queue: bool,
    actor: str | None, as_json: bool, **details: Unpack[VerdictDetails],
) -> None:
    """Settle a double-review disagreement (qa_lead); the verdict becomes the truth."""
    from fieldtrust.labels.agreement import adjudicate, adjudication_queue

    if queue:
        pairs = adjudication_queue(open_db(ctx, read_only=True))
        rows = [p.to_dict() for p in pairs]
        if as_json:
            echo_json(rows)
            return
        echo_table(rows, ["extraction_id", "doc_type", "field", "value", "primary_reviewer",
                          "primary_verdict", "second_reviewer", "second_verdict"])
        return
    if extraction_id is None or verdict is None:
        raise click.UsageError("give EXTRACTION_ID VERDICT, or --queue")
    actor = acting_user(ctx, actor, what="adjudicating")
    label = adjudicate(open_db(ctx), actor, extraction_id, verdict, **details)
    if as_json:
        echo_json(label.to_dict())
        return
    echo(f"{extraction_id}: {label.verdict} (adjudicated by {label.reviewer},"
               f" label {label.label_id})")


@click.command("errors", epilog="Example: fieldtrust errors --weeks 8 --json")
@_WEEKS
@_JSON
@click.pass_context
def errors_cmd(ctx: click.Context, weeks: int | None, as_json: bool) -> None:
    """Error types found by reviewers, per (doc_type, field, form_version)."""
    from fieldtrust.labels.errors_report import error_report

    con = open_db(ctx, read_only=True)
    rows = error_report(con, _scope(con, weeks)).to_pylist()
    echo_json(rows) if as_json else echo_table(rows)


@click.command("export", epilog="Example: fieldtrust labels export --out labels.csv")
@click.option("--out", required=True, type=click.Path(dir_okay=False),
              help="A .csv or .parquet file.")
@click.option("--force", is_flag=True, help=FORCE_HELP)
@click.pass_context
def labels_export(ctx: click.Context, out: str, force: bool) -> None:
    """Write every label with its history (superseded rows included) to CSV or Parquet.

    In CSV, text starting with = + - @ (or a tab / carriage return) gets a
    leading single quote so spreadsheets do not run it as a formula.
    """
    from fieldtrust.labels.export import export_labels

    rows = export_labels(open_db(ctx, read_only=True), out, force=force)
    echo(f"wrote {rows:,} labels to {out}")


@click.command(
    "correct",
    epilog="Example: fieldtrust labels correct last incorrect --corrected-value 12.50"
    " --error-type misread_characters --as ana   (or a label id from fieldtrust labels"
    " recent instead of last)",
)
@click.argument("label_id")
@click.argument("verdict", type=click.Choice(VERDICTS))
@_verdict_options
@_AS
@_JSON
@click.pass_context
def labels_correct(
    ctx: click.Context, label_id: str, verdict: str, actor: str | None, as_json: bool,
    **details: Unpack[VerdictDetails],
) -> None:
    """Change a verdict: a new label supersedes LABEL_ID, which stays in the history.

    LABEL_ID is an id from `fieldtrust labels recent`, or `last`: your newest
    verdict that still stands. A reviewer changes their own review verdicts
    within 7 days of their first verdict on the item, until a qa_lead has
    adjudicated it; a qa_lead anyone's, at any time. The same rules as Undo
    and "My recent labels" on the Review page (docs/review.md, "Fixing a slip").
    """
    from fieldtrust.errors import InputError
    from fieldtrust.labels.corrections import recent_labels
    from fieldtrust.labels.verdicts import get_label, supersede

    actor = acting_user(ctx, actor, what="correcting a label")
    con = open_db(ctx)
    if label_id == "last":
        newest = recent_labels(con, actor, limit=1)
        if not newest:
            raise InputError(f"{actor} has no verdict of their own that still stands")
        label_id = newest[0].label_id
    before = get_label(con, label_id)
    label = supersede(con, actor=actor, label_id=label_id, verdict=verdict, **details)
    if as_json:
        echo_json(label.to_dict())
        return
    echo(f"{label.extraction_id}: {label.verdict} (was {before.verdict}) by"
               f" {label.reviewer}; label {label.label_id} supersedes {before.label_id},"
               " which stays in the history")


@click.command("recent", epilog="Example: fieldtrust labels recent --as ana --limit 5")
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True,
              help="How many verdicts, newest first.")
@click.option("--sample", "sample_id", default=None,
              help="Only verdicts given in this audit sample (e.g. 2026-W48/v1).")
@click.option("--as", "actor", default=None, metavar="NAME",
              help="Whose verdicts [default: setting user, env FIELDTRUST_USER].")
@_JSON
@click.pass_context
def labels_recent(
    ctx: click.Context, limit: int, sample_id: str | None, actor: str | None, as_json: bool,
) -> None:
    """Your newest verdicts that still stand, and whether you can still change each.

    Change one with `fieldtrust labels correct LABEL_ID VERDICT`.
    """
    from fieldtrust.labels.corrections import recent_labels

    actor = acting_user(ctx, actor, what="listing your labels")
    mine = recent_labels(open_db(ctx, read_only=True), actor, sample_id=sample_id, limit=limit)
    rows = [_recent_row(label) for label in mine]
    if as_json:
        echo_json(rows)
        return
    echo_table(rows, ["label_id", "labeled_at", "doc_id", "doc_type", "field", "value",
                      "verdict", "corrected_value", "can_change"])


def _recent_row(label: Any) -> dict[str, Any]:
    item = label.item
    return {
        "label_id": label.label_id, "labeled_at": label.labeled_at.isoformat(timespec="seconds"),
        "extraction_id": label.extraction_id, "sample_id": label.sample_id,
        "review_round": label.review_round,
        "doc_id": item.doc_id if item else None, "doc_type": item.doc_type if item else None,
        "field": item.field if item else None, "value": item.value if item else None,
        "verdict": label.verdict, "corrected_value": label.corrected_value,
        "corrected_status": label.corrected_status, "error_type": label.error_type,
        "can_change": "yes" if label.changeable else f"no: {label.why_fixed}",
    }


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
    group.add_command(users_group)
    group.add_command(decide_cmd)
    group.add_command(policy_group)
    group.add_command(agreement_cmd)
    group.add_command(reviewers_cmd)
    group.add_command(rekey_cmd)
    group.add_command(adjudicate_cmd)
    group.add_command(errors_cmd)
    # `fieldtrust labels` belongs to store_cmds (import); export joins it when it exists.
    from fieldtrust.cli import store_cmds

    labels_cli = getattr(store_cmds, "labels_group", None)
    if isinstance(labels_cli, click.Group):
        labels_cli.add_command(labels_export)
        labels_cli.add_command(labels_correct)
        labels_cli.add_command(labels_recent)
