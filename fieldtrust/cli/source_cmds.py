"""Commands for a lake source: source (show and test it) and refresh (count what is new).

The source modules (pyarrow, deltalake, pyspark) are imported inside the
commands, so `fieldtrust --help` starts fast.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import click

from fieldtrust.cli.common import AS_HELP, acting_user, echo_json, open_db, settings, time_window
from fieldtrust.cli.terminal import echo
from fieldtrust.settings import Settings

if TYPE_CHECKING:
    from fieldtrust.ingest.sources import Source, SourceConfig


def source_config(resolved: Settings) -> SourceConfig:
    """The source the settings name (``source``, ``source_path``...)."""
    from fieldtrust.ingest.sources import SourceConfig

    return SourceConfig.from_settings(resolved)


def column_mapping(resolved: Settings, given: str | None = None) -> dict[str, str]:
    """Our column names to yours: ``columns``, ``source_columns`` over it, ``given`` over both.

    One mapping for ingest and a lake source, so the same log reads the same
    way wherever it lives.
    """
    from fieldtrust.ingest.sources import parse_columns

    mapping: dict[str, str] = {}
    for raw in (resolved.columns, resolved.source_columns, given):
        mapping.update(dict(parse_columns(raw)))
    return mapping


def open_configured_source(ctx: click.Context) -> Source | None:
    """The open source of the settings, closed when the command ends; None for ``store``.

    Its rows are held to the settings' time window (``earliest_time``,
    ``future_days``), as ingest holds a file's.
    """
    from fieldtrust.ingest.sources import open_configured

    source = open_configured(source_config(settings(ctx)), window=time_window(ctx))
    if source is not None:
        ctx.call_on_close(source.close)
    return source


@click.command(
    "source",
    epilog="Example: FIELDTRUST_SOURCE=parquet FIELDTRUST_SOURCE_PATH=lake/ fieldtrust source"
    " --test",
)
@click.option(
    "--test", "test", is_flag=True,
    help="Open the source, list its files and read their columns (nothing is written).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def source(ctx: click.Context, test: bool, as_json: bool) -> None:
    """Show the extraction source (settings `source`...) and what the store counted from it."""
    from fieldtrust.ingest.sources import source_summary

    config = source_config(settings(ctx))
    payload: dict[str, Any] = {
        "kind": config.kind, "path": config.path or None,
        "spark": config.spark if config.kind == "spark" else None,
        "columns": dict(config.columns),
    }
    if not config.is_store:
        payload |= source_summary(open_db(ctx), config)
    if test and not config.is_store:
        payload |= _test(ctx)
    if as_json:
        echo_json(payload)
        return
    for name, value in payload.items():
        shown = ", ".join(f"{k}={v}" for k, v in value.items()) if isinstance(value, dict) \
            else value
        echo(f"{name.replace('_', ' '):>14}: {shown if shown not in (None, '') else '-'}")


def _test(ctx: click.Context) -> dict[str, Any]:
    from fieldtrust.ingest.sources.changes import counted_files

    opened = open_configured_source(ctx)
    assert opened is not None
    files = opened.files()
    counted = counted_files(open_db(ctx), opened.config.name)
    opened.select(None if files is None else [f.path for f in files[:1]])
    return {
        "reachable": True,
        "files": None if files is None else len(files),
        "files_new": None if files is None else sum(f.path not in counted for f in files),
        "columns_read": dict(opened.dtypes),
    }


def _progress(as_json: bool, quiet: bool) -> Any:
    from fieldtrust.cli.progress_bars import stage_progress

    return None if as_json or quiet else stage_progress("files")


@click.command(epilog="Example: fieldtrust refresh --json")
@click.option(
    "--skip-invalid", is_flag=True,
    help="Leave rows an ingest rule on what they are counted by rejects out of the counts"
         " (recorded with the refresh) instead of refusing the refresh.",
)
@click.option(
    "--acknowledge", "acknowledged", multiple=True, metavar="PATH",
    help="A counted file the last refresh reported changed or gone: you have seen it, so"
         " later refreshes stop reporting it until it changes again (repeatable; needs"
         " qa_lead or admin).",
)
@click.option("--as", "actor", default=None, metavar="NAME", help=AS_HELP)
@click.option("--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def refresh(
    ctx: click.Context, skip_invalid: bool, acknowledged: tuple[str, ...], actor: str | None,
    quiet: bool, as_json: bool,
) -> None:
    """Count the source's new files (or rows) into the store's rollup, in one transaction.

    Files counted before are not read again; one that changed since (or is
    gone) is reported, not recounted, on every refresh until someone
    acknowledges it with --acknowledge PATH. A Delta table is counted by what
    its new versions add and remove: compaction changes no count. A store that
    holds ingested rows, or counts another source, is refused (it would count
    rows twice). Rows an ingest rule on what they are counted by
    rejects (doc_type, field, form_version, confidence, extracted_at, with the
    settings' earliest_time and future_days) refuse the refresh (exit 2, the
    store unchanged) unless --skip-invalid. The other rules (ids, values,
    statuses) are checked by `fieldtrust sample`, on the week it draws.
    """
    from fieldtrust.ingest.sources import refresh_source

    opened = open_configured_source(ctx)
    if opened is None:
        raise click.UsageError(
            "the source is the store itself (setting source = store): its rollup is kept at"
            " ingest; set source to parquet, delta or spark to refresh from a lake"
        )
    con = open_db(ctx)
    if acknowledged:
        from fieldtrust.ingest.sources.changes import acknowledge_changes

        who = acting_user(ctx, actor, what="acknowledging a changed file")
        for path in acknowledge_changes(con, opened, who, acknowledged):
            if not as_json:
                echo(f"{path}: acknowledged by {who}; reported again if it changes")
    progress = _progress(as_json, quiet)
    result = refresh_source(con, opened, skip_invalid=skip_invalid, progress=progress)
    if as_json:
        echo_json(dataclasses.asdict(result))
        return
    if result.refresh_id is None:
        echo(f"{result.source}: nothing new to count")
    else:
        echo(
            f"{result.source}: counted {result.rows_counted:,} rows from {result.files_read}"
            f" new files ({result.refresh_id})"
            + (f"; skipped {result.rows_skipped:,} invalid rows" if result.rows_skipped else "")
            + (f"; took out {result.rows_removed:,} rows the table's new versions removed"
               if result.rows_removed else "")
            + (f"; {result.files_rewritten} files rewritten by compaction hold rows counted"
               " before" if result.files_rewritten else "")
        )
    for path in result.changed_files:
        echo(f"warning: {path} changed after it was counted; it was not counted again"
                   " (write its rows as a new file;"
                   f" `fieldtrust refresh --acknowledge {path}` once you have looked)")
    for path in result.missing_files:
        echo(f"warning: {path} was counted but is gone from the source"
                   f" (`fieldtrust refresh --acknowledge {path}` once you have looked)")


def register(group: click.Group) -> None:
    group.add_command(source)
    group.add_command(refresh)
