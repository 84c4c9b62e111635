"""Calibration commands: calibrate, candidates, recalibrate, maps, histogram.

The calibration modules (numpy, scipy, scikit-learn) are imported inside the
commands, so `fieldtrust --help` and the other commands start fast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click
import duckdb

from fieldtrust.calibration.figures import CELL_LEGEND
from fieldtrust.cli.common import echo_json, echo_table, held_bar, open_db, settings
from fieldtrust.cli.terminal import echo
from fieldtrust.store.scope import Scope, last_weeks

if TYPE_CHECKING:
    from fieldtrust.calibration.candidates import CandidateAssessment
    from fieldtrust.calibration.report import CalibrationReport
    from fieldtrust.store.bar import Bar

_Command = TypeVar("_Command", bound=Callable[..., Any])


def _scope(con: duckdb.DuckDBPyConnection, weeks: int) -> Scope:
    return Scope(weeks=last_weeks(con, weeks))


def _missing(value: float | None) -> bool:
    """No number: None, or NaN (an estimate over no labels)."""
    return value is None or value != value


def _pct(value: float | None, digits: int = 1) -> str | None:
    return None if _missing(value) else f"{value:.{digits}%}"


def _interval(low: float | None, high: float | None) -> str | None:
    if _missing(low) or _missing(high):
        return None
    return f"[{low:.1%}, {high:.1%}]"


def _t(value: float | None) -> str | None:
    return None if _missing(value) else f"{value:.3f}"


def _report_rows(report: CalibrationReport) -> list[dict[str, Any]]:
    rows = []
    for stratum in report.strata:
        s = stratum.to_dict()
        verdict = "yes" if s["candidate"] else s["reason"]
        note = s["interval_note"]
        rows.append(
            {
                "doc type": s["doc_type"],
                "field": s["field"],
                "extractions": s["n_population"],
                "labels": s["n_labeled"],
                "accuracy": _pct(s["accuracy"]),
                "95% interval": "no usable interval*" if note
                else _interval(s["accuracy_low"], s["accuracy_high"]),
                "stated": _pct(s["mean_confidence"]),
                "ECE": s["ece"],
                "Brier": s["brier"],
                "point threshold": _t(s["point_threshold"]),
                "certified threshold": _t(s["certified_threshold"]),
                "lower bound": _pct(s["certified_accuracy_low"]),
                "coverage": _pct(s["coverage"]),
                "labels needed": s["labels_needed"],
                "candidate": verdict,
            }
        )
    return rows


#: Under the calibrate table: what its columns are, in a few words.
_CALIBRATE_LEGEND = (
    "labels: design-based labels (audit samples, declared random samples), the ones every"
    " figure uses; stated: mean stated confidence; point threshold: an estimate without a"
    " guarantee; certified threshold: accuracy above it is at least the target with the"
    " stated confidence, with its lower bound and coverage of the extractions"
)


def _bar_options(confidence_help: str) -> Callable[[_Command], _Command]:
    """--target, --confidence, --weeks (the command's ``**asks`` of the bar) and --json."""
    policy = " [default: the store's policy, or setting {}]"
    options = (
        click.option("--target", type=float, default=None,
                     help="Accuracy to reach" + policy.format("target") + "."),
        click.option("--confidence", type=float, default=None,
                     help=confidence_help + policy.format("confidence") + "."),
        click.option("--weeks", type=int, default=None,
                     help="Look at the last N weeks" + policy.format("weeks") + "."),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
    )

    def apply(command: _Command) -> _Command:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


def _weeks_text(scope: Scope) -> str:
    if not scope.weeks:
        return "all weeks"
    return f"weeks {scope.weeks[0]}..{scope.weeks[-1]}"


def _echo_not_approvable(bar: Bar) -> None:
    """One line when the settings asked depart from the store's policy."""
    if not bar.approvable:
        echo(f"at these settings, not approvable: {bar.loosened_text()}")


@click.command(
    epilog="Example: fieldtrust calibrate --weeks 8 --target 0.95\n\n"
    "Example: fieldtrust calibrate --json | jq '.strata[] | select(.candidate)'\n\n"
    "Strata are listed worst accuracy first; 'point threshold' is an estimate without a"
    " guarantee, 'certified threshold' holds the target with the stated confidence"
    " (see docs/calibration.md). A candidate is approvable at the store's policy;"
    " at settings looser than it, nothing is.",
)
@_bar_options("Confidence of certified thresholds and intervals")
@click.pass_context
def calibrate(ctx: click.Context, /, as_json: bool, **asks: float | int | None) -> None:
    """Per (document type, field): accuracy, calibration and thresholds."""
    from fieldtrust.calibration.report import calibration_report

    con = open_db(ctx, read_only=True)
    bar = held_bar(ctx, con, **asks)
    scope = _scope(con, bar.weeks)
    report = calibration_report(con, scope, bar)
    if as_json:
        echo_json(report.to_dict())
        return
    overall = report.overall
    echo(f"overall: {overall.summary}")
    accuracy = _pct(overall.accuracy)
    shown = (f"accuracy {accuracy} {_interval(overall.accuracy_low, overall.accuracy_high) or ''}"
             .rstrip() if accuracy else "no accuracy yet")
    echo(
        f"         {overall.n_population:,} extractions, {overall.labels_text()},"
        f" {_weeks_text(scope)}; {shown}"
        f" (target {report.target:.0%}, confidence {report.confidence:.0%})"
    )
    _echo_not_approvable(bar)
    echo("")
    rows = _report_rows(report)
    echo_table(rows)
    echo(_CALIBRATE_LEGEND)
    if any(row["95% interval"] == "no usable interval*" for row in rows):
        echo(f"*: {CELL_LEGEND.split(': ', 1)[1]}")


def _candidate_row(a: CandidateAssessment) -> dict[str, Any]:
    e = a.evidence
    return {
        "doc type": a.doc_type,
        "field": a.field,
        "certified threshold": _t(a.threshold),
        "coverage": _pct(e["coverage"]),
        "labels above": e["labels_above"],
        "accuracy above": _pct(e["accuracy"]),
        "lower bound": _pct(e["accuracy_low"]),
        "weeks checked": len(e["weeks_checked"]),
        "covers": e.get("coverage_text") or "",
        "form versions": ", ".join(e["form_versions"]),
    }


@click.command(
    epilog="Example: fieldtrust candidates --weeks 8 --json > candidates.json\n\n"
    "A candidate has a certified threshold, holds the target in each recent week"
    " of the window, covers only the form versions whose own labels certify it,"
    " and is approvable: at settings looser than the store's policy nothing is.",
)
@_bar_options("Confidence of the guarantee")
@click.pass_context
def candidates(ctx: click.Context, /, as_json: bool, **asks: float | int | None) -> None:
    """Strata that may be automated above a threshold, with evidence; why others may not."""
    from fieldtrust.calibration.candidates import across_strata, automation_candidates

    con = open_db(ctx, read_only=True)
    bar = held_bar(ctx, con, **asks)
    assessments = automation_candidates(con, _scope(con, bar.weeks), bar)
    chosen = [a for a in assessments if a.candidate]
    others = [a for a in assessments if not a.candidate]
    promise = across_strata(assessments, bar)
    if as_json:
        echo_json(
            {
                "target": bar.target,
                "confidence": bar.confidence,
                "bar": bar.values(),
                "approvable": bar.approvable,
                "not_approvable_because": bar.loosened_text() or None,
                "across_strata": promise,
                "candidates": [a.to_dict() for a in chosen],
                "not_candidates": [a.to_dict() for a in others],
            }
        )
        return
    echo(f"{len(chosen)} automation candidate(s) at target {bar.target:.0%}:")
    _echo_not_approvable(bar)
    echo(f"promised: {promise['text']}")
    if chosen:
        echo_table([_candidate_row(a) for a in chosen])
    echo("")
    echo(f"{len(others)} not candidates:")
    echo_table(
        [
            {"doc type": a.doc_type, "field": a.field, "why not": a.reason_text,
             "labels needed": a.labels_needed, "needed above": _t(a.labels_needed_threshold)}
            for a in others
        ]
    )


@click.command(
    epilog="Example: fieldtrust recalibrate --weeks 8\n\n"
    "Stores one map per stratum; the view calibrated_confidence applies it to every"
    " extraction (the review queue sorts by it).",
)
@click.option("--weeks", type=int, default=None,
              help="Fit on the last N weeks [default: the store's policy window, or setting"
              " weeks].")
@click.option("--non-random", "non_random", is_flag=True,
              help="Let non-random labels (review queue, ad hoc) join the fit, assuming their"
              " items were chosen by stated confidence alone; scores stay on audit labels.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.pass_context
def recalibrate(ctx: click.Context, weeks: int | None, non_random: bool, as_json: bool) -> None:
    """Fit and store a confidence recalibration map per (document type, field)."""
    from fieldtrust.calibration.recalibrate import fit_recalibration

    con = open_db(ctx)
    results = fit_recalibration(con, _scope(con, held_bar(ctx, con, weeks=weeks).weeks),
                                seed=settings(ctx).seed, non_random=non_random)
    rows = [r.to_dict() for r in results]
    if as_json:
        echo_json(rows)
        return
    echo_table(rows, columns=[c for c in rows[0] if c != "map_id"] if rows else None)


@click.command(
    epilog="Example: fieldtrust maps --json\n\n"
    "ECE before and after are measured on held-out folds when the map was fitted;"
    " `fieldtrust recalibrate` fits new maps.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.pass_context
def maps(ctx: click.Context, as_json: bool) -> None:
    """The recalibration map in force per (document type, field), and how much it helped."""
    from fieldtrust.calibration.maps import current_maps

    rows = [m.to_dict() for m in current_maps(open_db(ctx, read_only=True))]
    if as_json:
        echo_json(rows)
        return
    if not rows:
        echo("no recalibration maps yet: run `fieldtrust recalibrate`")
        return
    echo_table(rows, ["doc_type", "field", "method", "n_labels", "ece_before", "ece_after",
                      "cv_score", "n_knots", "fitted_at"])


@click.command(
    epilog="Example: fieldtrust histogram --doc-type invoice --field total --bins 10 --weeks 4",
)
@click.option("--doc-type", required=True, help="Document type of the stratum.")
@click.option("--field", "field_name", required=True, help="Field of the stratum.")
@click.option("--bins", type=click.IntRange(min=1, max=1000), default=10, show_default=True,
              help="Number of equal-width bins on [0, 1].")
@click.option("--weeks", type=int, default=None,
              help="Look at the last N weeks [default: the store's policy window, or setting"
              " weeks].")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list.")
@click.pass_context
def histogram(
    ctx: click.Context, doc_type: str, field_name: str, bins: int, weeks: int | None,
    as_json: bool,
) -> None:
    """How many extractions of a stratum state each level of confidence (all, not only labelled)."""
    from fieldtrust.calibration.histogram import confidence_histogram

    con = open_db(ctx, read_only=True)
    scope = _scope(con, held_bar(ctx, con, weeks=weeks).weeks)
    rows = confidence_histogram(con, doc_type, field_name, scope, bins=bins).to_pylist()
    if as_json:
        echo_json(rows)
        return
    total = sum(r["count"] for r in rows)
    echo(f"{doc_type} / {field_name}: {total:,} extractions, {_weeks_text(scope)}")
    echo_table([
        {"confidence": f"[{r['lower']:.3f}, {r['upper']:.3f}{']' if r['upper'] >= 1 else ')'}",
         "count": r["count"], "share": _pct(r["count"] / total if total else None)}
        for r in rows
    ])


def register(group: click.Group) -> None:
    """Add this module's commands to ``group``."""
    for command in (calibrate, candidates, recalibrate, maps, histogram):
        group.add_command(command)
