"""Audit commands: sample, plan, progress, report, queue.

The sampling modules (pandas, scipy) are imported inside the commands, so
`fieldtrust --help` and the other commands start fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import click

from fieldtrust.calibration.figures import CELL_LEGEND, cell_text
from fieldtrust.cli.common import (
    FORCE_HELP,
    WEEK,
    acting_user,
    echo_json,
    echo_table,
    held_bar,
    open_db,
    settings,
)
from fieldtrust.cli.terminal import echo
from fieldtrust.sampling.design import Design, load_design
from fieldtrust.store.files import OutputKind, store_files
from fieldtrust.store.weeks import Week

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa

    from fieldtrust.labels.label_studio import TaskPage
    from fieldtrust.sampling.certify_plan import CertificatePlan
    from fieldtrust.sampling.planner import DesignPreview
    from fieldtrust.store.locations import Location

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
    " --label-config config.xml (the pages go to tasks-pages/, served by Label Studio's local"
    " files: docs/review.md), then fieldtrust labels import export.json --format"
    " label-studio --reviewer-map 1=ann\n\n"
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
    "--pages", "pages_dir", type=click.Path(file_okay=False), default=None,
    help="With --format label-studio: the folder the items' page images are written to, for"
         " Label Studio to show [default: OUT-pages beside --out].",
)
@click.option(
    "--pages-url", default=None, metavar="PREFIX",
    help="URL prefix of --pages as the annotators' browsers reach it [default: setting"
         " label_studio_pages_url, else Label Studio's local files: /data/local-files/?d=PAGES/].",
)
@click.option(
    "--show-confidence", is_flag=True,
    help="Show reviewers the stated confidence in --out (hidden by default, as on the review"
         " page, so it does not anchor their verdict).",
)
@click.option(
    "--open-only", is_flag=True,
    help="Write only the items without a label yet to --out (a redrawn week's sheet, without"
         " the items labelled already).",
)
@click.option("--force", is_flag=True, help=FORCE_HELP)
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
    force: bool,
    open_only: bool,
    pages_dir: str | None,
    pages_url: str | None,
) -> None:
    """Draw the week's audit sample (or return it if drawn already) and show its cells."""
    from fieldtrust.sampling.draw import draw_sample
    from fieldtrust.sampling.items_csv import check_writable
    from fieldtrust.sampling.planner import preview_design

    design = _design(design_file)
    if out_format != "label-studio" and (label_config_file or pages_dir or pages_url):
        raise click.UsageError("--label-config, --pages and --pages-url go with"
                               " --format label-studio")
    if (show_confidence or open_only) and not out:
        raise click.UsageError("--show-confidence and --open-only shape the --out file: give"
                               " --out FILE")
    if preview:
        if out:
            raise click.UsageError("--preview writes nothing; drop --out or --preview")
        _print_preview(preview_design(open_db(ctx, read_only=True), week, design), as_json)
        return
    actor = acting_user(ctx, actor, what="drawing a sample")
    from fieldtrust.cli.progress_bars import stage_progress
    from fieldtrust.cli.source_cmds import open_configured_source

    con = open_db(ctx)
    outputs = _outputs(out, out_format, label_config_file)
    for path, kind in outputs:  # before the draw: a refused output leaves the store as it was
        check_writable(path, kind, force=force, protect=store_files(con))
    resolved = settings(ctx, seed=seed)
    result = draw_sample(
        con, week, design, seed=resolved.seed, actor=actor, redraw=redraw,
        source=open_configured_source(ctx), skip_invalid=skip_invalid,
        progress=None if as_json else stage_progress("steps"),
    )
    from fieldtrust.store.locations import documents_root

    pages = _Pages(pages_dir, pages_url or resolved.label_studio_pages_url,
                   str(documents_root(resolved.documents_root, resolved.db)))
    written = _write_out(con, result.sample_id, out, out_format, show_confidence, force,
                         open_only, pages)
    if label_config_file:
        from fieldtrust.labels.label_studio import write_label_config

        write_label_config(label_config_file, show_confidence=show_confidence, force=force,
                           protect=store_files(con))
    if as_json:
        echo_json({**result.to_dict(), "out": out, "rows_written": written})
        return
    state = "drew" if result.created else "already drawn:"
    echo(
        f"{state} {result.sample_id} (seed {result.seed}, design {result.design_sha256[:12]})"
    )
    echo_table(result.cells.to_pylist(), _CELL_COLUMNS)
    echo(f"total: {result.n_sample} of {result.n_population} extractions")
    if result.rows_skipped:
        echo(f"skipped {result.rows_skipped:,} rows of {result.week} an ingest rule"
                   " rejects (left out of the sample and its population)")
    if result.replaced:
        echo(
            f"note: {result.sample_id} replaces {result.replaced} as the week's current sample;"
            f" estimates now use its items (labels are kept)"
        )
    if out:
        what = "Label Studio tasks" if out_format == "label-studio" else "items"
        which = " without a label yet" if open_only else ""
        echo(f"wrote {written} {what}{which} to {out}")
    if label_config_file:
        echo(f"wrote the Label Studio labelling config to {label_config_file}")


def _outputs(
    out: str | None, out_format: str, label_config_file: str | None
) -> list[tuple[str, OutputKind]]:
    """The files a draw writes, each with its kind."""
    from fieldtrust.labels.label_studio import LABEL_CONFIG_FILE, TASKS_FILE
    from fieldtrust.sampling.items_csv import SAMPLE_FILE

    outputs = []
    if out:
        outputs.append((out, TASKS_FILE if out_format == "label-studio" else SAMPLE_FILE))
    if label_config_file:
        outputs.append((label_config_file, LABEL_CONFIG_FILE))
    return outputs


@dataclass(frozen=True)
class _Pages:
    """Where a Label Studio export's page images go (None: beside --out), their URL, and
    the documents root the documents are read under."""

    folder: str | None
    url: str
    documents_root: str = "."


def _write_out(
    con: duckdb.DuckDBPyConnection, sample_id: str, out: str | None, out_format: str,
    show_confidence: bool, force: bool, open_only: bool = False, pages: _Pages | None = None,
) -> int | None:
    """Write the sample's (open) items to ``out`` as CSV or Label Studio tasks; the count."""
    from fieldtrust.sampling.samples import sample_items

    if out is None:
        return None
    items = sample_items(con, sample_id, open_only=open_only)
    protect = store_files(con)
    if out_format == "label-studio":
        from fieldtrust.labels.label_studio import write_tasks

        written = _task_pages(con, items, out, pages or _Pages(None, ""))
        return write_tasks(items, out, show_confidence=show_confidence, force=force,
                           protect=protect, pages=written)
    from fieldtrust.sampling.items_csv import write_items_csv

    return write_items_csv(items, out, show_confidence=show_confidence, force=force,
                           protect=protect)


def _task_pages(
    con: duckdb.DuckDBPyConnection, items: pa.Table, out: str, pages: _Pages
) -> dict[str, TaskPage]:
    """Render the items' pages for Label Studio into their folder; each item's page."""
    from pathlib import Path

    from fieldtrust.labels.label_studio_pages import local_files_prefix, write_pages

    target = Path(out)
    folder = Path(pages.folder) if pages.folder else target.with_name(f"{target.stem}-pages")
    prefix = pages.url or local_files_prefix(folder, folder.resolve().parent)
    return write_pages(items, folder, url_prefix=prefix,
                       open_document=_document_opener(con, pages.documents_root))


def _document_opener(
    con: duckdb.DuckDBPyConnection, root: str
) -> Callable[[Location], bytes | None]:
    """The bytes of a stored document: a file under the documents root, or a demo document.

    Drawn documents come from the installed drawers, as in the dashboard. Never fetched
    from the network here: a remote document's page is not written.
    """
    from fieldtrust.errors import DocumentError
    from fieldtrust.store.locations import document_drawers, resolve_document

    def read(location: Location) -> bytes | None:
        uri = location.document_uri or ""
        try:
            resolved = resolve_document(uri, root=root)
        except DocumentError:
            return None
        if resolved.path is not None and resolved.path.is_file():
            return resolved.path.read_bytes()
        for draw in document_drawers():  # documents drawn from the store's rows (the demo's)
            drawn = draw(con, location)
            if drawn is not None:
                return drawn
        return None

    return read


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
    echo(f"total: {preview.n_sample} of {preview.n_population} extractions{tail}")


def _print_certify(certify: CertificatePlan) -> None:
    echo("")
    echo(f"what it can certify: {certify.population}")
    echo_table(certify.strata.to_pylist(), _CERTIFY_COLUMNS)
    sizing = certify.sizing
    if sizing is None:
        return
    goal = f"{sizing.goal.doc_type}/{sizing.goal.field} within {sizing.goal.weeks} weeks"
    if sizing.labels_per_week is None:
        echo(f"goal {goal}: {sizing.reason}")
        return
    echo(f"goal {goal}: label {sizing.labels_per_week} a week above {sizing.threshold:g}"
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
        echo("no audit labels yet: draw a sample (fieldtrust sample) and label it")
        return
    echo(
        f"Accuracy by ISO week, in %: design-weighted, with its {bar.confidence:.0%} interval"
        " (Korn-Graubard) and the audit labels it rests on (n). Each week's figure covers"
        " that week's extractions of the stratum (the row 'extractions covered' counts them"
        " for all strata together)."
    )
    grid = _trend_grid(result.trend.to_pandas(), result.overall.to_pandas())
    echo_table(grid)
    if any("[*]" in str(value) for row in grid for value in row.values()):
        echo(CELL_LEGEND)
    echo("")
    if not result.alerts:
        echo(f"no alerts for {result.weeks[-1]}")
    for alert in result.alerts:
        echo(f"ALERT [{alert.kind}] {alert.message}")
    if result.alert_note:
        echo(result.alert_note)


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
    echo(f"{shown}: {labelled} of {drawn} items labelled, {usable} usable (each cell's"
               f" labelled prefix in PRN order; labels past a gap wait until it is filled);"
               f" {len(missing)} of {len(rows)} cells without a label yet")


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
    for command in (sample, plan, progress, report, queue):
        group.add_command(command)
