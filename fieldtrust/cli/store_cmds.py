"""Commands that fill and describe the store: info, settings, ingest, labels import."""

from __future__ import annotations

import dataclasses

import click

from fieldtrust.cli.common import echo_json, open_db, settings
from fieldtrust.settings import Settings
from store.ingest import ingest_files
from store.label_import import import_labels
from store.summary import store_summary


@click.command(epilog="Example: fieldtrust --db demo.duckdb info --json")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def info(ctx: click.Context, as_json: bool) -> None:
    """Summarise what the store holds."""
    summary = store_summary(open_db(ctx, read_only=True))
    if as_json:
        echo_json(dataclasses.asdict(summary))
        return
    for name, value in dataclasses.asdict(summary).items():
        click.echo(f"{name.replace('_', ' '):>14}: {value if value is not None else '-'}")


@click.command("settings", epilog="Example: FIELDTRUST_TARGET=0.98 fieldtrust settings")
@click.pass_context
def show_settings(ctx: click.Context) -> None:
    """Print every setting, its resolved value and what it means."""
    resolved = settings(ctx)
    for name, help_line in Settings.help_lines().items():
        click.echo(f"{name:>16} = {getattr(resolved, name)!s:<22} {help_line}")


def _progress_line(stage: str, done: int, total: int) -> None:
    """One line per step on stderr, so stdout keeps only the result."""
    if stage != "done":
        click.echo(f"[{done + 1}/{total}] {stage}", err=True)


@click.command(epilog="Example: fieldtrust --db audit.duckdb ingest week48.parquet week49.csv")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.pass_context
def ingest(ctx: click.Context, files: tuple[str, ...], quiet: bool, as_json: bool) -> None:
    """Validate extraction files and add their new rows to the store.

    Formats by extension: .csv, .parquet, .jsonl / .ndjson, .json. Required
    columns: doc_id, doc_type, field, confidence, extracted_at. Any bad row
    rejects the whole call and nothing is written (exit code 2). Files and
    rows already stored are skipped, so ingesting again is safe. See
    docs/ingest.md.
    """
    results = ingest_files(open_db(ctx), files, progress=None if quiet else _progress_line)
    if as_json:
        echo_json([dataclasses.asdict(r) for r in results])
        return
    for r in results:
        click.echo(
            f"{r.source}: {r.rows_in_file:,} rows read, {r.rows_added:,} added,"
            f" {r.rows_already_stored:,} already stored"
        )


@click.group(
    "labels",
    epilog="Example: fieldtrust labels import w48-labelled.csv",
)
def labels_group() -> None:
    """Move human labels in and out of the store."""


@labels_group.command("import", epilog="Example: fieldtrust labels import w48.csv --reviewer alice")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--reviewer",
    default="import",
    show_default=True,
    help="Reviewer recorded for rows whose reviewer column is blank or absent.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def labels_import(ctx: click.Context, file: str, reviewer: str, as_json: bool) -> None:
    """Import labels from a CSV or JSON Lines file, such as a filled `sample --out` file.

    Columns: extraction_id, verdict (correct / incorrect / unclear); optional
    reviewer, corrected_value, corrected_status, error_type, error_detail,
    labeled_at, sample_id. Rows whose verdict is blank are skipped. Any bad
    row rejects the file and nothing is written (exit code 2). See
    docs/ingest.md.
    """
    result = import_labels(open_db(ctx), file, reviewer_default=reviewer)
    if as_json:
        echo_json(dataclasses.asdict(result))
        return
    click.echo(
        f"{result.source}: {result.rows_in_file:,} rows read, {result.rows_added:,} labels added,"
        f" {result.rows_already_stored:,} already stored,"
        f" {result.rows_without_verdict:,} without a verdict"
    )


def register(group: click.Group) -> None:
    group.add_command(info)
    group.add_command(show_settings)
    group.add_command(ingest)
    group.add_command(labels_group)
