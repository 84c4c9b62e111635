"""Audit commands: sample, plan, progress, report, queue.

The sampling modules (pandas, scipy) are imported inside the commands, so
`fieldtrust --help` and the other commands start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from fieldtrust.cli.common import (
    WEEK,
    acting_user,
    echo_json,
    echo_table,
    held_bar,
    open_db,
    settings,
)
from fieldtrust.sampling.design import Design, load_design
from fieldtrust.store.weeks import Week

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from fieldtrust.sampling.certify_plan import CertificatePlan
    from fieldtrust.sampling.planner import DesignPreview

_CELL_COLUMNS = ["cell", "n_population", "n_sample", "inclusion_prob"]
_CERTIFY_COLUMNS = ["doc_type", "field", "n_population", "threshold", "labels_per_week",
                    "share_labelled", "certify_week", "reason"]

_DESIGN = click.option(
    "--design",
    "design_file",
    type=click.Path(dir_okay=False),
    help="Sampling design, .toml or .json (default: the built-in design).",
)


def _design(path: str | None) -> Design:
    return load_design(path) if path else Design()


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [
        {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
        for row in frame.astype(object).to_dict(orient="records")
    ]


@click.command(
    epilog="Example: fieldtrust sample --week 2026-W48 --design design.toml --out w48.csv"
    " --as carol\n\n"
    "Fill the verdict and reviewer columns of w48.csv, then: fieldtrust labels import w48.csv"
    " --as carol\n\n"
    "Label Studio: fieldtrust sample --week 2026-W48 --out tasks.json --format label-studio"
    " --label-config config.xml, then fieldtrust labels import export.json --format"
    " label-studio\n\n"
    "Drawing needs a user with the qa_lead role. A scheduled nightly draw runs as a user"
    " granted qa_lead for it: fieldtrust users grant nightly-audit qa_lead --as ADMIN, then"
    " fieldtrust sample --week ... --as nightly-audit.",
)
@click.option("--week", type=WEEK, required=True,
              help="ISO week to sample, e.g. 2026-W48 (UTC).")
@_DESIGN
@click.option("--seed", type=int, default=None, help="PRN seed [default: setting seed].")
@click.option(
    "--out",
    type=click.Path(dir_okay=False),
    help="Write the items to this file for offline labelling (see --format).",
)
@click.option(
    "--format", "out_format", type=click.Choice(["csv", "label-studio"]), default="csv",
    show_default=True,
    help="--out as a CSV with every column `labels import` reads, or as Label Studio tasks"
         " (JSON; import the export back with `labels import --format label-studio`).",
)
@click.option(
    "--label-config", "label_config_file", type=click.Path(dir_okay=False), default=None,
    help="With --format label-studio: also write the matching Label Studio labelling config"
         " (XML) to this file.",
)
@click.option(
    "--show-confidence", is_flag=True,
    help="With --format label-studio: show annotators the stated confidence (hidden by"
         " default, so it does not anchor their verdict).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("--preview", is_flag=True, help="Show what would be drawn; write nothing.")
@click.option(
    "--skip-invalid", is_flag=True,
    help="A lake source: leave the week's rows an ingest rule rejects (a bad id, value or"
         " status, which a refresh does not check) out of the sample and its population,"
         " recorded with the sample, instead of refusing the draw.",
)
@click.option(
    "--redraw",
    is_flag=True,
    help="Draw a new version even if this design and seed were drawn already.",
)
@click.option(
    "--as",
    "actor",
    default=None,
    metavar="NAME",
    help="Who draws: a user with the qa_lead role, checked in the store and recorded with"
    " the sample [default: setting user, env FIELDTRUST_USER].",
)
@click.pass_context
def sample(
    ctx: click.Context,
    week: Week,
    design_file: str | None,
    seed: int | None,
    out: str | None,
    as_json: bool,
    preview: bool,
    skip_invalid: bool,
    redraw: bool,
    actor: str | None,
    out_format: str,
    label_config_file: str | None,
    show_confidence: bool,
) -> None:
    """Draw the week's audit sample (or return it if drawn already) and show its cells."""
    from fieldtrust.sampling.draw import draw_sample
    from fieldtrust.sampling.items_csv import check_writable
    from fieldtrust.sampling.planner import preview_design

    design = _design(design_file)
    if out_format != "label-studio" and (label_config_file or show_confidence):
        raise click.UsageError("--label-config and --show-confidence go with"
                               " --format label-studio")
    if preview:
        if out:
            raise click.UsageError("--preview writes nothing; drop --out or --preview")
        _print_preview(preview_design(open_db(ctx, read_only=True), week, design), as_json)
        return
    actor = acting_user(ctx, actor, what="drawing a sample")
    if out:
        check_writable(out)
    from fieldtrust.cli.progress_bars import stage_progress
    from fieldtrust.cli.source_cmds import open_configured_source

    con = open_db(ctx)
    result = draw_sample(
        con, week, design, seed=settings(ctx, seed=seed).seed, actor=actor, redraw=redraw,
        source=open_configured_source(ctx), skip_invalid=skip_invalid,
        progress=None if as_json else stage_progress("steps"),
    )
    written = _write_out(con, result.sample_id, out, out_format, show_confidence)
    if label_config_file:
        from pathlib import Path

        from fieldtrust.labels.label_studio import label_config

        Path(label_config_file).write_text(label_config(show_confidence=show_confidence),
                                           encoding="utf-8")
    if as_json:
        echo_json({**result.to_dict(), "out": out, "rows_written": written})
        return
    state = "drew" if result.created else "already drawn:"
    click.echo(
        f"{state} {result.sample_id} (seed {result.seed}, design {result.design_sha256[:12]})"
    )
    echo_table(result.cells.to_pylist(), _CELL_COLUMNS)
    click.echo(f"total: {result.n_sample} of {result.n_population} extractions")
    if result.rows_skipped:
        click.echo(f"skipped {result.rows_skipped:,} rows of {result.week} an ingest rule"
                   " rejects (left out of the sample and its population)")
    if result.replaced:
        click.echo(
            f"note: {result.sample_id} replaces {result.replaced} as the week's current sample;"
            f" estimates now use its items (labels are kept)"
        )
    if out:
        kind = "Label Studio tasks" if out_format == "label-studio" else "items"
        click.echo(f"wrote {written} {kind} to {out}")
    if label_config_file:
        click.echo(f"wrote the Label Studio labelling config to {label_config_file}")


def _write_out(
    con: duckdb.DuckDBPyConnection, sample_id: str, out: str | None, out_format: str,
    show_confidence: bool,
) -> int | None:
    """Write the sample's items to ``out`` as CSV or Label Studio tasks; the count."""
    from fieldtrust.sampling.samples import sample_items

    if out is None:
        return None
    items = sample_items(con, sample_id)
    if out_format == "label-studio":
        from fieldtrust.labels.label_studio import write_tasks

        return write_tasks(items, out, show_confidence=show_confidence)
    from fieldtrust.sampling.items_csv import write_items_csv

    return write_items_csv(items, out)


@click.command(
    epilog="Example: fieldtrust plan --week 2026-W48 --design design.toml\n\n"
    "Sized from a goal: fieldtrust plan --week 2026-W48 --goal \"invoice/total within 4"
    " weeks\"\n\n"
    "Below the cells, per (doc_type, field): the likely threshold (the design's band edge"
    " where a certificate comes soonest), the labels a week the design draws above it,"
    " the week a certificate becomes possible if errors keep the rates of past labels"
    " (1 = this week), or why none can within the policy's window. A planning figure at"
    " 80% power, each coming week assumed like WEEK; the certificate itself is decided"
    " on the labels."
)
@click.option("--week", type=WEEK, required=True, help="ISO week to plan, e.g. 2026-W48 (UTC).")
@_DESIGN
@click.option("--goal", "goal_text", metavar="TEXT",
              help='Size the design for a goal: "DOC_TYPE/FIELD within N weeks".')
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def plan(ctx: click.Context, week: Week, design_file: str | None, goal_text: str | None,
         as_json: bool) -> None:
    """Preview a design on a week: cells, sizes, margins, and what it can certify when."""
    from fieldtrust.sampling.certify_plan import Goal, plan_certificates
    from fieldtrust.sampling.planner import preview_design

    design = _design(design_file)
    goal = Goal.parse(goal_text) if goal_text else None
    con = open_db(ctx, read_only=True)
    preview = preview_design(con, week, design)
    certify = plan_certificates(con, week, design, held_bar(ctx, con), goal=goal)
    if as_json:
        echo_json({**preview.to_dict(), "certify": certify.to_dict()})
        return
    _print_preview(preview, as_json=False)
    _print_certify(certify)


def _print_preview(preview: DesignPreview, as_json: bool) -> None:
    if as_json:
        echo_json(preview.to_dict())
        return
    echo_table(preview.cells.to_pylist(), [*_CELL_COLUMNS, "boosted", "margin"])
    budget = preview.budget
    tail = (
        ""
        if budget is None
        else f" (budget {budget}{', minimums exceed it' if preview.over_budget else ''})"
    )
    click.echo(f"total: {preview.n_sample} of {preview.n_population} extractions{tail}")


def _print_certify(certify: CertificatePlan) -> None:
    click.echo("")
    click.echo(f"what it can certify: {certify.population}")
    echo_table(certify.strata.to_pylist(), _CERTIFY_COLUMNS)
    sizing = certify.sizing
    if sizing is None:
        return
    goal = f"{sizing.goal.doc_type}/{sizing.goal.field} within {sizing.goal.weeks} weeks"
    if sizing.labels_per_week is None:
        click.echo(f"goal {goal}: {sizing.reason}")
        return
    click.echo(f"goal {goal}: label {sizing.labels_per_week} a week above {sizing.threshold:g}"
               f" ({sizing.share_labelled:.0%} of its {sizing.n_above} items a week)")


@click.command(epilog="Example: fieldtrust report --weeks 8 --json")
@click.option("--weeks", type=int, default=None,
              help="Weeks to show [default: the store's policy window, or setting weeks].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def report(ctx: click.Context, weeks: int | None, as_json: bool) -> None:
    """Weekly design-weighted accuracy per (doc_type, field), and this week's alerts."""
    from fieldtrust.sampling.audit_report import audit_report

    con = open_db(ctx, read_only=True)
    bar = held_bar(ctx, con, weeks=weeks)
    result = audit_report(con, weeks=bar.weeks, target=bar.target, confidence=bar.confidence)
    if as_json:
        echo_json(result.to_dict())
        return
    if result.trend.num_rows == 0:
        click.echo("no audit labels yet: draw a sample (fieldtrust sample) and label it")
        return
    click.echo("accuracy by week (design-weighted; Korn-Graubard 95% interval of the last week):")
    echo_table(_records(_trend_grid(result.trend.to_pandas(), result.overall.to_pandas())))
    click.echo("")
    if not result.alerts:
        click.echo(f"no alerts for {result.weeks[-1]}")
    for alert in result.alerts:
        click.echo(f"ALERT [{alert.kind}] {alert.message}")
    if result.alert_note:
        click.echo(result.alert_note)


def _trend_grid(trend: pd.DataFrame, overall: pd.DataFrame) -> pd.DataFrame:
    """Strata as rows, weeks as columns, with the last week's interval and label count."""
    import pandas as pd

    rows = pd.concat([trend, overall.assign(doc_type="(overall)", field="")], ignore_index=True)
    grid = rows.pivot_table(
        index=["doc_type", "field"], columns="week", values="estimate", aggfunc="first", sort=True
    )
    last = rows[rows["week"] == rows["week"].max()].set_index(["doc_type", "field"])
    grid.columns = [str(c) for c in grid.columns]
    grid["last_interval"] = last.apply(lambda r: f"[{r['lower']:.3f}, {r['upper']:.3f}]", axis=1)
    grid["last_n"] = last["n"]
    return grid.reset_index()


@click.command(epilog="Example: fieldtrust queue --limit 20")
@click.option("--limit", type=int, default=100, show_default=True, help="Rows to show.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def queue(ctx: click.Context, limit: int, as_json: bool) -> None:
    """The priority review queue: unautomated extractions most likely wrong, first."""
    from fieldtrust.cli.source_cmds import open_configured_source
    from fieldtrust.sampling.queue import priority_queue

    rows = priority_queue(open_db(ctx, read_only=True), limit=limit,
                          source=open_configured_source(ctx)).to_pylist()
    if as_json:
        echo_json({"queue": rows})
        return
    echo_table(
        rows,
        [
            "position",
            "extraction_id",
            "doc_type",
            "field",
            "value",
            "confidence",
            "calibrated_confidence",
            "reason",
        ],
    )


@click.command(
    epilog="Example: fieldtrust progress --sample 2026-W48/v1\n\n"
    "A cell counts an item as labelled once it has a primary, imported or adjudicated"
    " label (second reviews are shown by the dashboard's progress bar).",
)
@click.option("--sample", "sample_id", default=None,
              help="Sample id like 2026-W48/v1 (default: the newest sample).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def progress(ctx: click.Context, sample_id: str | None, as_json: bool) -> None:
    """How far the labelling of an audit sample has got, per sampling cell."""
    from fieldtrust.labels.review_progress import cell_progress

    rows = cell_progress(open_db(ctx, read_only=True), sample_id).to_pylist()
    shown = rows[0]["sample_id"] if rows else sample_id
    labelled = sum(r["n_labelled"] for r in rows)
    drawn = sum(r["n_sample"] for r in rows)
    missing = [r["cell"] for r in rows if r["n_labelled"] == 0]
    if as_json:
        echo_json({"sample_id": shown, "labelled": labelled, "items": drawn,
                   "usable": sum(r["n_usable"] for r in rows),
                   "cells_without_labels": missing, "cells": rows})
        return
    usable = sum(r["n_usable"] for r in rows)
    echo_table(rows, ["cell", "n_population", "n_sample", "n_labelled", "n_usable",
                      "inclusion_prob"])
    click.echo(f"{shown}: {labelled} of {drawn} items labelled, {usable} usable (each cell's"
               f" labelled prefix in PRN order; labels past a gap wait until it is filled);"
               f" {len(missing)} of {len(rows)} cells without a label yet")


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
    for command in (sample, plan, progress, report, queue):
        group.add_command(command)
