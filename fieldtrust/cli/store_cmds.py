"""Commands that fill, describe and check the store: info, settings, ingest, labels import,
verify.

Ingest and label import (pyarrow, the readers) are imported inside their
commands, so `fieldtrust --help` and `fieldtrust info` start fast.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import duckdb

from fieldtrust.cli.common import AS_HELP, acting_user, echo_json, open_db, settings, time_window
from fieldtrust.cli.terminal import echo
from fieldtrust.errors import StoreError
from fieldtrust.settings import Settings
from fieldtrust.store.bar import SETTINGS as BAR_SETTINGS
from fieldtrust.store.bar import setting_help
from fieldtrust.store.chain import ChainHead
from fieldtrust.store.summary import filter_options, store_summary
from fieldtrust.store.verify import verify_history


@click.command(epilog="Example: fieldtrust --db demo.duckdb info --json")
@click.option(
    "--values", "list_values", is_flag=True,
    help="List the weeks, document types and form versions in the store instead (the values"
         " --week, the dashboard's filters and the design files can name).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def info(ctx: click.Context, list_values: bool, as_json: bool) -> None:
    """Summarise what the store holds."""
    if list_values:
        _print_values(open_db(ctx, read_only=True), as_json)
        return
    summary = store_summary(open_db(ctx, read_only=True))
    if as_json:
        echo_json(summary.to_dict())
        return
    for name, value in summary.to_dict().items():
        echo(f"{name.replace('_', ' '):>14}: {value if value is not None else '-'}")


def _print_values(con: duckdb.DuckDBPyConnection, as_json: bool) -> None:
    options = filter_options(con)
    if as_json:
        echo_json(options.to_dict())
        return
    echo(f"weeks: {', '.join(options.weeks) or '-'}")
    for doc_type in options.doc_types:
        versions = [v for d, v in options.form_versions if d == doc_type]
        echo(f"{doc_type}: form versions {', '.join(versions)}")


@click.command(
    "init",
    epilog="Example: fieldtrust --db audit.duckdb init   (your own DuckDB file:"
           " fieldtrust --db mine.duckdb init --adopt)",
)
@click.option(
    "--adopt", is_flag=True,
    help="Make a DuckDB file that already holds other tables a store (its tables are kept).",
)
@click.option("--admin", "admin", default=None, metavar="NAME",
              help="Your user name: the store's first admin (then the next three commands).")
@click.pass_context
def init(ctx: click.Context, adopt: bool, admin: str | None) -> None:
    """Make a new store, or bring an existing store up to this version.

    A DuckDB file that is not a store (it holds your own tables) is refused
    and left as it is, unless --adopt: the store's tables are then added next
    to yours. With --admin NAME the store gets its first admin.
    """
    from fieldtrust.errors import NotAStoreError
    from fieldtrust.store.migrations import MIGRATIONS

    path = settings(ctx).db
    existed = Path(path).exists()
    try:
        con = open_db(ctx, adopt=adopt)
    except NotAStoreError as exc:
        raise StoreError(
            f"{path} is a DuckDB file that is not a fieldtrust store: it was left unchanged;"
            " pass --adopt to add the store's tables next to what it holds"
        ) from exc
    applied = con.execute("SELECT count(*) FROM schema_migrations").fetchall()[0][0]
    verb = "upgraded" if existed else "created"
    echo(f"{verb} store {path} ({applied} of {len(MIGRATIONS)} migrations applied)")
    if admin is not None:
        _init_with_admin(ctx, con, admin)


@click.command("settings", epilog="Example: FIELDTRUST_TARGET=0.98 fieldtrust settings")
@click.pass_context
def show_settings(ctx: click.Context) -> None:
    """Print every setting, its resolved value and what it means."""
    resolved = settings(ctx)
    for name, help_line in Settings.help_lines().items():
        echo(f"{name:>16} = {getattr(resolved, name)!s:<22} {help_line}")
    asked = {ask.name: ask for ask in resolved.criteria.asks}
    echo("bar settings: the store's policy (`fieldtrust policy settings`) unless asked:")
    for name in BAR_SETTINGS:
        ask = asked.get(name)
        shown = f"{ask.value} (from {ask.source})" if ask else "policy"
        echo(f"{name:>16} = {shown:<22} {setting_help(name)}")


@click.command(
    epilog="Your own names: fieldtrust ingest log.csv --columns doc_type=kind,confidence=score"
    " --ignore-unknown (or a [columns] table in fieldtrust.toml)\n\n"
    "Example: fieldtrust --db audit.duckdb ingest week48.parquet week49.csv",
)
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--columns", "columns", default=None, metavar="OURS=YOURS,...",
    help="Your column names for ours, over the setting columns ([columns] in fieldtrust.toml),"
         " e.g. doc_type=kind,confidence=score.",
)
@click.option(
    "--ignore-unknown", is_flag=True,
    help="Leave out columns that are none of ours (latency_ms, ...) instead of refusing the"
         " file; the summary names them.",
)
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.pass_context
def ingest(
    ctx: click.Context, files: tuple[str, ...], columns: str | None, ignore_unknown: bool,
    quiet: bool, as_json: bool,
) -> None:
    """Validate extraction files and add their new rows to the store.

    Formats by extension: .csv, .parquet, .jsonl / .ndjson, .json. Required
    columns: doc_id, doc_type, field, confidence, extracted_at. Any bad row
    rejects the whole call and nothing is written (exit code 2). Files and
    rows already stored are skipped, so ingesting again is safe. Columns
    named your way are mapped with --columns or the [columns] table, the
    same mapping a lake source reads. See docs/ingest.md.
    """
    from fieldtrust.cli.progress_bars import stage_progress
    from fieldtrust.cli.source_cmds import column_mapping
    from fieldtrust.ingest.extractions import ingest_files

    mapping = column_mapping(settings(ctx), columns)
    progress = None if quiet or as_json else stage_progress("rows")
    results = ingest_files(open_db(ctx), files, progress=progress, window=time_window(ctx),
                           columns=mapping, ignore_unknown=ignore_unknown)
    if as_json:
        echo_json([r.to_dict() for r in results])
        return
    for r in results:
        ignored = f"; columns left out: {', '.join(r.columns_ignored)}" \
            if r.columns_ignored else ""
        echo(
            f"{r.source}: {r.rows_in_file:,} rows read, {r.rows_added:,} added,"
            f" {r.rows_already_stored:,} already stored{ignored}"
        )


@click.group(
    "labels",
    epilog="Example: fieldtrust labels import w48-labelled.csv --as carol",
)
def labels_group() -> None:
    """Move human labels in and out of the store."""


@labels_group.command(
    "import",
    epilog="Label Studio, checked first: fieldtrust labels import export.json --format"
    " label-studio --reviewer-map 1=ann --reviewer-map bob@example.com=bob --dry-run\n\n"
    "Example: fieldtrust labels import w48.csv --reviewer alice --as carol",
)
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--as", "actor", default=None, metavar="NAME",
              help="Who imports: a qa_lead or admin. " + AS_HELP)
@click.option(
    "--reviewer",
    default=None,
    metavar="NAME",
    help="Reviewer recorded for rows whose reviewer column is blank or absent (a store user"
         " with a reviewer role); without it such rows are refused.",
)
@click.option(
    "--reviewer-map", "reviewer_map", multiple=True, metavar="THEIRS=NAME",
    help="A name in the file (a Label Studio user id or e-mail, another tool's name) and the"
         " store user it is; repeat for each person.",
)
@click.option(
    "--dry-run", is_flag=True,
    help="Check the whole file and say what it would add and replace; write nothing.",
)
@click.option(
    "--random-sample", is_flag=True,
    help="Declare the file's items a simple random sample of each (doc_type, field) and ISO"
         " week they cover, so its labels enter estimates; without it they are non-random.",
)
@click.option(
    "--format", "file_format", type=click.Choice(["auto", "label-studio"]), default="auto",
    show_default=True,
    help="auto: by extension (.csv, .jsonl, .json, .parquet); label-studio: a Label Studio"
         " JSON export of tasks written by `sample --format label-studio`.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def labels_import(
    ctx: click.Context, file: str, actor: str | None, reviewer: str | None,
    reviewer_map: tuple[str, ...], dry_run: bool, random_sample: bool, file_format: str,
    as_json: bool,
) -> None:
    """Import labels from a CSV or JSON Lines file, such as a filled `sample --out` file.

    Columns: extraction_id, verdict (correct / incorrect / unclear); optional
    reviewer, corrected_value, corrected_status, error_type, error_detail,
    labeled_at, sample_id. Rows are held to the verdict rule of the review
    page: an 'incorrect' row without an error_type is stored as not_recorded,
    without a corrected value as unknown (the summary counts them). Every
    reviewer must be a store user with a reviewer role (--reviewer-map turns
    other names into store users). A row for an item its reviewer labelled
    before replaces that label when it says something else; another
    reviewer's label on the item refuses the row. Every problem of the file
    is reported in one run; --dry-run checks and counts without writing.

    --format label-studio reads a Label Studio JSON export: each annotation not
    cancelled is a label (the annotator as reviewer, created_at as the label
    time), a task's second annotation a blind second review; cancelled ones
    are counted and skipped. See docs/review.md.
    Rows whose verdict is blank are skipped. Any bad row rejects the file and
    nothing is written (exit code 2). Rows without a sample_id count in
    estimates only with --random-sample (the items were drawn at random,
    STATS.md section 2). See docs/ingest.md.
    """
    from fieldtrust.labels.label_import import import_labels

    actor = acting_user(ctx, actor, what="importing labels")
    result = import_labels(
        open_db(ctx), file, actor=actor, reviewer_default=reviewer,
        reviewer_map=_pairs(reviewer_map), window=time_window(ctx),
        random_sample=random_sample, format=file_format, dry_run=dry_run,
    )
    if as_json:
        echo_json(result.to_dict())
        return
    verb = "would add" if result.dry_run else "added"
    echo(
        f"{result.source}: {result.rows_in_file:,} rows read; {verb} {result.rows_added:,} new"
        f" labels and {result.rows_replaced:,} replacing their reviewer's earlier label;"
        f" {result.rows_already_stored:,} already stored,"
        f" {result.rows_without_verdict:,} without a verdict"
    )
    if result.dry_run:
        echo("dry run: nothing was written")
    if result.rows_cancelled:
        echo(f"{result.rows_cancelled:,} cancelled Label Studio annotations skipped")
    if result.rows_without_details:
        echo(
            f"note: {result.rows_without_details:,} 'incorrect' rows lack an error type or a"
            " corrected value: stored with the error type not_recorded / an unknown correction"
        )


def _pairs(given: tuple[str, ...]) -> dict[str, str]:
    """``THEIRS=NAME`` options as a mapping; a one-line error for anything else."""
    pairs: dict[str, str] = {}
    for text in given:
        theirs, sep, name = text.partition("=")
        if not sep or not theirs.strip() or not name.strip():
            raise click.BadParameter(f"{text!r} is not THEIRS=NAME (e.g. 7=ann)",
                                     param_hint="--reviewer-map")
        pairs[theirs.strip()] = name.strip()
    return pairs


@click.command(
    epilog="Example: fieldtrust --db audit.duckdb verify --policy policy-2026-W48.json"
)
@click.option("--head", metavar="SEQ:HASH", default=None,
              help="A head kept outside the store (printed by an earlier verify): the chain"
                   " must still hold it.")
@click.option("--policy", "policy_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="A policy file exported earlier: its signature, its head and"
                                 " every threshold in it are checked against the store.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_context
def verify(ctx: click.Context, head: str | None, policy_file: str | None, as_json: bool) -> None:
    """Check that no history row was changed, deleted or inserted outside fieldtrust.

    Recomputes the hash chain over labels, decisions, evidence snapshots, role
    grants, skips and label imports, and checks that every decision and policy
    setting is signed by a trusted key (docs/governance.md). Intact: prints
    the head (SEQ:HASH) and the row counts, exit code 0. Otherwise names the
    first row that does not match (table, id, chain entry, what changed) and
    exits with code 2. Keep the head (or a policy export, which carries it)
    outside the store to also catch a chain rewritten to match an edit; with
    --policy the file's signature and whole content are checked too. See
    docs/reliability.md.
    """
    from fieldtrust.governance.policy import load_policy_file, policy_file_problems

    if head is not None and policy_file is not None:
        raise click.UsageError("give --head or --policy, not both")
    payload = load_policy_file(policy_file) if policy_file is not None else None
    expected = _policy_head(policy_file, payload) if payload is not None else _parsed_head(head)
    con = open_db(ctx, read_only=True)
    check = verify_history(con, expected_head=expected)
    in_file = policy_file_problems(con, payload) if payload is not None else []
    if as_json:
        shown = check.to_dict()
        if payload is not None:
            shown["policy_file"] = {"path": policy_file, "intact": not in_file,
                                    "problems": in_file}
        echo_json(shown)
        if not check.intact or in_file:
            ctx.exit(2)
        return
    if not check.intact:
        raise StoreError(check.summary())
    if in_file:
        more = f"; {len(in_file) - 1} more" if len(in_file) > 1 else ""
        raise StoreError(f"policy file {policy_file} does not match the store it names:"
                         f" {in_file[0]}{more}. Do not automate on it; export the policy again")
    echo(check.summary())
    if payload is not None:
        echo(f"policy file {policy_file}: signed by a trusted key, and every threshold"
                   f" in it is the store's at chain entry {expected.seq if expected else 0}")


def _policy_head(policy_file: str | None, payload: dict[str, Any]) -> ChainHead:
    from fieldtrust.governance.policy import policy_head

    kept = policy_head(payload)
    if kept is None:
        raise StoreError(
            f"{policy_file} holds no history_head: export the policy again with this"
            " fieldtrust (`fieldtrust policy export --out FILE`)"
        )
    return kept


def _parsed_head(head: str | None) -> ChainHead | None:
    if head is None:
        return None
    match = re.fullmatch(r"(\d+):([0-9a-f]{64})", head.strip())
    if match is None:
        raise click.BadParameter(f"{head!r} is not SEQ:HASH (e.g. 42:9f86d0...)",
                                 param_hint="--head")
    return ChainHead(int(match.group(1)), match.group(2))


def _init_with_admin(ctx: click.Context, con: duckdb.DuckDBPyConnection, admin: str) -> None:
    """Grant ``admin`` the admin role of a fresh store and say what comes next."""
    from fieldtrust.store.access import first_admin

    db = settings(ctx).db
    made = first_admin(con, admin)
    name = admin.strip()
    echo(f"{db}: {name} is {'now' if made else 'already'} the admin of this store")
    db_flag = "" if db == Settings().db else f" --db {db}"
    echo(f"\nTell fieldtrust who you are once: export FIELDTRUST_USER={name}"
               f"  (or user = \"{name}\" in fieldtrust.toml)\nNext:")
    echo(f"  1. fieldtrust ingest extractions.csv{db_flag}"
               "          # your extraction log (docs/ingest.md)")
    echo(f"  2. fieldtrust users grant {name} qa_lead{db_flag}"
               "        # to draw samples and label them yourself")
    echo(f"  3. fieldtrust sample --week WEEK --out sample.csv{db_flag}"
               "  # WEEK from `fieldtrust info --values`")


def register(group: click.Group) -> None:
    group.add_command(init)
    group.add_command(info)
    group.add_command(verify)
    group.add_command(show_settings)
    group.add_command(ingest)
    group.add_command(labels_group)
