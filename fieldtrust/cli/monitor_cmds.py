"""`fieldtrust monitor`: each approved segment's monitoring chart, and resuming a suspended one.

The charts are :func:`fieldtrust.governance.monitoring.monitor_approvals`,
the one path the dashboard and the policy export read; resuming is the
library act :func:`fieldtrust.governance.acts.resume` (role manager or admin).
"""

from __future__ import annotations

import click

from fieldtrust.cli.common import AS_HELP, acting_user, echo_json, echo_table, open_db
from fieldtrust.cli.terminal import echo

_COLUMNS = ["doc_type", "field", "form_version", "extractor_version", "status", "statistic",
            "alarm_threshold", "weeks_monitored", "labels_per_week", "detection_rate",
            "alarm_week", "since_week"]


@click.group("monitor", invoke_without_command=True,
             epilog="Example: fieldtrust monitor --json")
@click.option("--until", default=None, metavar="WEEK",
              help="Chart through this ISO week (default: the last closed week).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def monitor_group(ctx: click.Context, until: str | None, as_json: bool) -> None:
    """Each approved segment (form version x extractor version) and its monitoring chart.

    From the approval's own week on, each covered segment's weekly audit
    labels above the threshold feed a CUSUM whose parameters were frozen with
    the approval. A segment whose chart alarmed is suspended: the exported
    policy sends it to people until a manager revokes the stratum or resumes
    the segment (`fieldtrust monitor resume`).
    """
    if ctx.invoked_subcommand is not None:
        return
    from fieldtrust.governance.monitoring import monitor_approvals

    monitors = monitor_approvals(open_db(ctx, read_only=True), until=until)
    rows = [m.to_dict() for m in monitors]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no approved stratum: nothing is monitored")
        return
    echo_table([{k: _shown(r[k]) for k in _COLUMNS} for r in rows], _COLUMNS)
    for m in monitors:
        if m.reason:
            echo(f"{m.doc_type}/{m.field} {m.form_version} x {m.extractor_version}:"
                       f" {m.reason}")


@monitor_group.command(
    "resume",
    epilog="Example: fieldtrust monitor resume --doc-type invoice --field total"
    " --form-version v1 --extractor-version m1 --as mona --comment 'scanner fixed in W48'",
)
@click.option("--doc-type", required=True, help="Document type of the stratum.")
@click.option("--field", "field_name", required=True, help="Field of the stratum.")
@click.option("--form-version", required=True, help="The suspended segment's form version.")
@click.option("--extractor-version", required=True,
              help="The suspended segment's extractor version ('*' for every extractor).")
@click.option("--as", "actor", default=None, metavar="NAME", help=AS_HELP)
@click.option("--comment", required=True, help="Why automation may resume (kept with it).")
@click.pass_context
def monitor_resume(
    ctx: click.Context, doc_type: str, field_name: str, form_version: str,
    extractor_version: str, actor: str | None, comment: str,
) -> None:
    """Resume a segment its chart suspended; the chart starts again after the alarm week."""
    from fieldtrust.governance.acts import resume

    actor = acting_user(ctx, actor, what="resuming")
    resumed = resume(open_db(ctx), actor, doc_type, field_name, form_version,
                     extractor_version, comment)
    echo(
        f"resumed {doc_type}/{field_name} {form_version} x {extractor_version} by {actor};"
        f" charted again from {resumed.since_week}, now {resumed.status}"
    )


def _shown(value: object) -> object:
    return round(value, 3) if isinstance(value, float) else value


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
    group.add_command(monitor_group)
