"""`fieldtrust extract`: read invoices and receipts with Claude into the store.

The anthropic SDK and the extraction loop are imported inside the command:
they take seconds to import, and every other `fieldtrust` command would pay
for them at start-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from fieldtrust.cli.common import echo_json, echo_table, settings
from fieldtrust.cli.terminal import echo
from fieldtrust.errors import InputError
from fieldtrust.extraction.schemas import DOC_TYPE_CHOICES
from fieldtrust.settings import Settings
from fieldtrust.store.connection import open_store

if TYPE_CHECKING:
    import anthropic

    from fieldtrust.extraction.results import DocumentResult, RunSummary

DEFAULT_MANIFEST = "extract-batches.json"

#: Exit code of a batch run that stopped waiting with documents still in a batch.
EXIT_PENDING = 3


def make_client(api_key: str) -> anthropic.Anthropic:
    """The Anthropic client the command uses (tests swap in one over a mock transport)."""
    from fieldtrust.extraction.client import make_client as build

    return build(api_key)


def _progress(position: int, count: int, result: DocumentResult) -> None:
    attempts = len(result.attempts)
    noun = "attempt" if attempts == 1 else "attempts"
    name = Path(result.source_path).name
    echo(f"[{position}/{count}] {name}: {result.status} ({attempts} {noun})", err=True)


def _say(line: str) -> None:
    echo(line, err=True)


@click.command(
    "extract",
    epilog="Example: ANTHROPIC_API_KEY=... fieldtrust --db audit.duckdb extract"
    " inbox/ --doc-type auto --form-version 2026-03",
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@click.option(
    "--doc-type",
    type=click.Choice(DOC_TYPE_CHOICES),
    required=True,
    help="Document type, or auto to let the model choose per document.",
)
@click.option("--model", default=None,
              help=f"Claude model id [setting model; default {Settings().model}].")
@click.option("--form-version", default=None, help="Form version of these documents, if known.")
@click.option("--batch", is_flag=True, help="Use the Message Batches API (cheaper, asynchronous).")
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False),
    default=DEFAULT_MANIFEST,
    show_default=True,
    help="With --batch: the run's manifest; run again with it to resume.",
)
@click.option(
    "--wait", type=float, default=None, help="With --batch: stop waiting after N seconds."
)
@click.option("--poll-interval", type=float, default=60.0, show_default=True,
              help="With --batch: seconds between checks of a running batch.")
@click.option("--redo", is_flag=True, help="Extract documents the store already holds, again.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_context
def extract(
    ctx: click.Context,
    paths: tuple[str, ...],
    doc_type: str,
    model: str | None,
    form_version: str | None,
    batch: bool,
    manifest: str,
    wait: float | None,
    poll_interval: float,
    redo: bool,
    as_json: bool,
) -> None:
    """Extract fields from invoices and receipts (PDF, image, text) into the store.

    Reads ANTHROPIC_API_KEY from the environment. Progress goes to stderr;
    the summary, with every document that failed or was flagged, to stdout.
    Exits 1 when a document failed, 3 when --batch stopped waiting with
    documents still in a batch (run again with the same --manifest to resume;
    documents that failed are tried again), 2 when PATHS hold no document.
    """
    from fieldtrust.extraction.batch import run_batch
    from fieldtrust.extraction.client import api_key_from_env
    from fieldtrust.extraction.loop import extract_paths
    from fieldtrust.extraction.sink import StoreSink

    _check_batch_options(ctx, batch)
    from fieldtrust.extraction.documents import SUPPORTED_SUFFIXES, expand_paths

    if not expand_paths(list(paths)):
        raise InputError(
            f"no documents in {', '.join(paths)}: fieldtrust reads"
            f" {' '.join(SUPPORTED_SUFFIXES)} files"
        )
    api_key = api_key_from_env()
    resolved = settings(ctx, model=model)
    with open_store(resolved.db):
        pass  # creates and migrates the store now, so a bad --db fails before any API call
    client = make_client(api_key)
    from fieldtrust.store.locations import documents_root

    _show_warnings()
    root = documents_root(resolved.documents_root, resolved.db)
    sink = StoreSink(resolved.db, form_version=form_version, documents_root=root)
    chosen_model = resolved.model
    if redo:
        _warn_redo(sink, paths)
    if batch:
        _say(f"manifest: {manifest}")
        summary = run_batch(
            client, paths, manifest_path=manifest, doc_type=doc_type, model=chosen_model,
            sink=sink, redo=redo, poll_interval=poll_interval, wait=wait,
            progress=_say,
        )
    else:
        summary = extract_paths(
            client, paths, doc_type=doc_type, model=chosen_model, sink=sink, redo=redo,
            progress=_progress,
        )
    _print(summary, as_json)
    if summary.failed:
        ctx.exit(1)
    if summary.pending:
        _say(f"{summary.pending} documents are still in a batch: run the same command again"
             f" (--manifest {manifest}) to collect them")
        ctx.exit(EXIT_PENDING)


def _check_batch_options(ctx: click.Context, batch: bool) -> None:
    """--manifest, --wait and --poll-interval mean something only with --batch."""
    if batch:
        return
    given = [f"--{name.replace('_', '-')}" for name in ("manifest", "wait", "poll_interval")
             if ctx.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]
    if given:
        raise click.UsageError(f"{', '.join(given)} only apply with --batch")


def _warn_redo(sink: object, paths: tuple[str, ...]) -> None:
    """Say that --redo adds a second set of rows beside the stored ones."""
    from fieldtrust.extraction.loop import identify_files

    ids = [doc_id for _, doc_id, error in identify_files(paths) if error is None]
    stored = sink.stored(ids)  # type: ignore[attr-defined]
    if stored:
        _say(f"--redo: {len(stored)} of {len(ids)} documents are already in the store; their"
             " earlier rows stay and this run adds a second set beside them (each set keeps"
             " its run id)")


def _show_warnings() -> None:
    """Let the extractor's warnings (a quote not found on its page) reach stderr."""
    import logging

    logger = logging.getLogger("fieldtrust.extraction")
    if not logger.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("warning: %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)


def _print(summary: RunSummary, as_json: bool) -> None:
    shown = summary.to_dict()
    gaps = shown["gaps"]
    if as_json:
        echo_json(shown)
        return
    echo(
        f"run {summary.run_id}: {summary.documents} documents, {summary.ok} stored"
        f" ({summary.flagged} flagged), {summary.failed} failed, {summary.pending} pending,"
        f" {summary.skipped} already stored; {summary.attempts} model calls,"
        f" {summary.input_tokens} input / {summary.output_tokens} output tokens"
    )
    if gaps:
        echo_table(gaps, ["source_path", "kind", "message", "hint"])


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
    group.add_command(extract)
