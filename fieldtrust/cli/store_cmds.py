"""Commands that fill and describe the store: info, settings (ingest, labels, demo: below)."""

from __future__ import annotations

import dataclasses

import click

from fieldtrust.cli.common import echo_json, open_db, settings
from fieldtrust.settings import Settings
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


def register(group: click.Group) -> None:
    group.add_command(info)
    group.add_command(show_settings)
