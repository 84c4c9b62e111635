"""Audit commands: sample, plan, progress, report, queue.

The sampling modules (pandas, scipy) are imported inside the commands, so
`fieldtrust --help` and the other commands start fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from fieldtrust.calibration.figures import CELL_LEGEND, cell_text
from fieldtrust.cli.common import acting_user, echo_json, echo_table, held_bar, open_db, settings
from fieldtrust.sampling.design import Design, load_design

if TYPE_CHECKING:
    import duckdb
    import pandas as pd

    from fieldtrust.sampling.planner import DesignPreview

_CELL_COLUMNS = ["cell", "n_population", "n_sample", "inclusion_prob"]

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
@click.option("--week", required=True, help="ISO week to sample, e.g. 2026-W48 (UTC).")
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
    week: str,
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
    from fieldtrust.sampling.export import check_writable
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
    from fieldtrust.cli.source_cmds import open_configured_source

    con = open_db(ctx)
    lake = open_configured_source(ctx)
    seed = settings(ctx, seed=seed).seed
    if lake is not None:  # ranked on the lake's engine; only the picked rows come home
        from fieldtrust.cli.progress import stage_progress
        from fieldtrust.sampling.source_draw import draw_from_source

        result = draw_from_source(
            con, lake, week, design, seed=seed, actor=actor, redraw=redraw,
            skip_invalid=skip_invalid, progress=None if as_json else stage_progress("steps"),
        )
    elif skip_invalid:
        raise click.UsageError(
            "--skip-invalid is for a lake source: the store's own rows were checked at ingest"
        )
    else:
        result = draw_sample(con, week, design, seed=seed, actor=actor, redraw=redraw)
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
    from fieldtrust.sampling.draw import sample_items

    if out is None:
        return None
    items = sample_items(con, sample_id)
    if out_format == "label-studio":
        from fieldtrust.labels.label_studio import write_tasks

        return write_tasks(items, out, show_confidence=show_confidence)
    from fieldtrust.sampling.export import write_items_csv

    return write_items_csv(items, out)


@click.command(epilog="Example: fieldtrust plan --week 2026-W48 --design design.toml")
@click.option("--week", required=True, help="ISO week to plan, e.g. 2026-W48 (UTC).")
@_DESIGN
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def plan(ctx: click.Context, week: str, design_file: str | None, as_json: bool) -> None:
    """Preview a design on a week: cells, sizes, inclusion probabilities, expected margins."""
    from fieldtrust.sampling.planner import preview_design

    _print_preview(
        preview_design(open_db(ctx, read_only=True), week, _design(design_file)), as_json
    )


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


@click.command(epilog="Example: fieldtrust report --weeks 8 --json")
@click.option("--weeks", type=int, default=None,
              help="Weeks to show [default: the store's policy window, or setting weeks].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def report(ctx: click.Context, weeks: int | None, as_json: bool) -> None:
    """Weekly design-weighted accuracy per (doc_type, field), and this week's alerts."""
    from fieldtrust.sampling.report import audit_report

    con = open_db(ctx, read_only=True)
    bar = held_bar(ctx, con, weeks=weeks)
    result = audit_report(con, weeks=bar.weeks, target=bar.target, confidence=bar.confidence)
    if as_json:
        echo_json(result.to_dict())
        return
    if result.trend.num_rows == 0:
        click.echo("no audit labels yet: draw a sample (fieldtrust sample) and label it")
        return
    click.echo(
        f"Accuracy by ISO week, in %: design-weighted, with its {bar.confidence:.0%} interval"
        " (Korn-Graubard) and the audit labels it rests on (n). Each week's figure covers"
        " that week's extractions of the stratum (the row 'extractions covered' counts them"
        " for all strata together)."
    )
    grid = _trend_grid(result.trend.to_pandas(), result.overall.to_pandas())
    echo_table(grid)
    if any("[*]" in str(value) for row in grid for value in row.values()):
        click.echo(CELL_LEGEND)
    click.echo("")
    if not result.alerts:
        click.echo(f"no alerts for {result.weeks[-1]}")
    for alert in result.alerts:
        click.echo(f"ALERT [{alert.kind}] {alert.message}")
    if result.alert_note:
        click.echo(result.alert_note)


def _trend_grid(trend: pd.DataFrame, overall: pd.DataFrame) -> list[dict[str, Any]]:
    """Strata as rows (all strata together first), weeks as columns; every cell with n."""
    weeks = sorted(set(trend["week"]) | set(overall["week"]))

    def cells(rows: pd.DataFrame) -> dict[str, str]:
        by_week = {r["week"]: r for r in rows.to_dict(orient="records")}
        return {week: cell_text(*(by_week[week][k] for k in _FIGURE)) if week in by_week
                else "" for week in weeks}

    covered = {r["week"]: r["population"] for r in overall.to_dict(orient="records")}
    grid = [
        {"doc type": "(all strata)", "field": "", **cells(overall)},
        {"doc type": "(extractions covered)", "field": "",
         **{week: f"{covered[week]:,.0f}" if week in covered else "" for week in weeks}},
    ]
    for (doc_type, field), rows in trend.groupby(["doc_type", "field"], sort=True):
        grid.append({"doc type": doc_type, "field": field, **cells(rows)})
    return grid


#: The columns of an estimate :func:`cell_text` writes, in its argument order.
_FIGURE = ("estimate", "lower", "upper", "n", "n_eff")


@click.command(epilog="Example: fieldtrust queue --limit 20")
@click.option("--limit", type=int, default=100, show_default=True, help="Rows to show.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def queue(ctx: click.Context, limit: int, as_json: bool) -> None:
    """The priority review queue: unautomated extractions most likely wrong, first."""
    from fieldtrust.cli.source_cmds import open_configured_source
    from fieldtrust.sampling.queue import priority_queue

    lake = open_configured_source(ctx)
    if lake is not None:  # the source returns its lowest-confidence open rows
        from fieldtrust.sampling.source_queue import source_queue

        rows = source_queue(open_db(ctx, read_only=True), lake, limit=limit).to_pylist()
    else:
        rows = priority_queue(open_db(ctx, read_only=True), limit=limit).to_pylist()
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
    from fieldtrust.labels.progress import cell_progress

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
