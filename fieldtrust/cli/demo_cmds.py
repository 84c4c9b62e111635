"""`fieldtrust demo`: build the demo store and say what is planted in it.

The demo generator (numpy, scipy, the sampling package) is imported inside the
command: every other `fieldtrust` command would otherwise pay seconds for it
at start-up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from fieldtrust.cli.common import CLI_LOCK_WAIT, echo_table, settings
from fieldtrust.cli.terminal import echo

if TYPE_CHECKING:
    from fieldtrust.demo import DemoSummary


@click.command(
    "demo",
    epilog="Example: fieldtrust --db demo.duckdb demo --seed 7 --rows 300000 --force",
)
@click.option("--seed", type=int, default=7, show_default=True, help="Seed of the generator.")
@click.option(
    "--rows",
    type=click.IntRange(min=1),
    default=300_000,
    show_default=True,
    help="Number of extractions.",
)
@click.option(
    "--force", is_flag=True,
    help="Empty a demo store first and rebuild it (refused for a store holding more than the"
         " demo).",
)
@click.option(
    "--no-labels",
    is_flag=True,
    help="Skip the simulated reviewers (no audit samples, no labels).",
)
@click.pass_context
def demo(ctx: click.Context, seed: int, rows: int, force: bool, no_labels: bool) -> None:
    """Build a demo store: 8 weeks of extractions with a hidden truth.

    The same seed and rows always give the same store. Refuses to touch a
    store that already holds extractions unless --force, which only rebuilds
    a demo store (never one holding your files or imported labels). See
    docs/demo.md for what is planted in it.
    """
    from fieldtrust.demo import build_demo_store

    path = settings(ctx).db
    summary = build_demo_store(
        path, seed=seed, rows=rows, force=force, labelled=not no_labels,
        lock_timeout=CLI_LOCK_WAIT,
    )
    _print_summary(path, seed, summary)


def _print_summary(path: str, seed: int, s: DemoSummary) -> None:
    echo(f"Built demo store {path} (seed {seed}) in {s.build_seconds:.1f} s")
    echo(
        f"  {s.rows:,} extractions from {s.documents:,} documents; {len(s.doc_types)} doc types"
        f" ({', '.join(s.doc_types)}), {s.strata} strata,"
        f" {len(s.weeks)} weeks ({s.weeks[0]}..{s.weeks[-1]})"
    )
    echo(f"  true accuracy overall {s.overall_accuracy:.1%}, but by stratum the worst are:")
    echo_table(
        [
            {
                "doc_type": w.doc_type,
                "field": w.field,
                "rows": w.rows,
                "stated_confidence": w.mean_confidence,
                "true_accuracy": w.accuracy,
            }
            for w in s.worst_strata
        ]
    )
    for v in s.new_versions:
        if v.accuracy is None:
            continue  # a small demo may have no rows of it yet
        versus = (
            "no established versions in the same weeks"
            if v.established_accuracy is None
            else f"{v.established_accuracy:.1%} on the established versions in the same weeks"
        )
        echo(
            f"  new form version {v.doc_type} {v.form_version} (from {v.first_week}):"
            f" true accuracy {v.accuracy:.1%} vs {versus}"
        )
    if s.labels:
        echo(
            f"  {s.labels:,} labels from {s.audit_samples} weekly audit samples"
            " (simulated reviewers)"
        )
    echo("The truth stays in table demo_truth; every fieldtrust report uses labels only.")


def register(group: click.Group) -> None:
    """Add ``demo`` to ``group``."""
    group.add_command(demo)
