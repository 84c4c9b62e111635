"""``python -m bench.certificates``: the certificate goals, measured (docs/statistics.md).

Runs every goal of :mod:`bench.certificates.goals` at full size (400 runs,
52 weeks) unless told otherwise, prints each figure with its Monte Carlo
interval beside its goal, and with ``--markdown FILE`` writes the table the
docs quote. Single-process and vectorised; the full set takes a while on
two cores (about an hour), one goal a few minutes.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import time
from pathlib import Path

from bench.certificates.goals import GOALS, Row


def _markdown(rows: list[tuple[str, Row]]) -> str:
    lines = ["| goal | measured | value | 95% interval | goal bound | met |",
             "|---|---|---|---|---|---|"]
    for _, row in rows:
        bound = "" if row.limit is None else f"<= {row.limit:.3f}"
        met = {None: "", True: "yes", False: "no"}[row.passed]
        lines.append(f"| {row.goal} | {row.measured} | {row.value:.3f} |"
                     f" [{row.low:.3f}, {row.high:.3f}] | {bound} | {met} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.certificates", description=__doc__)
    parser.add_argument("--goals", default=",".join(GOALS),
                        help=f"comma-separated, any of {', '.join(GOALS)}")
    parser.add_argument("--runs", type=int, default=400, help="replications per scenario")
    parser.add_argument("--weeks", type=int, default=52, help="weeks per run (weekly goals)")
    parser.add_argument("--markdown", type=Path, help="write the results table here")
    args = parser.parse_args(argv)
    rows: list[tuple[str, Row]] = []
    for name in args.goals.split(","):
        if name not in GOALS:
            parser.error(f"unknown goal {name!r}")
        goal = GOALS[name]
        params = inspect.signature(goal).parameters
        kwargs = {key: value for key, value in (("runs", args.runs), ("reps", args.runs),
                                                ("weeks", args.weeks)) if key in params}
        started = time.monotonic()
        for row in goal(**kwargs):
            rows.append((name, row))
            print(row.text(), flush=True)
        print(f"[{name}: {time.monotonic() - started:.0f} s]", file=sys.stderr, flush=True)
    if args.markdown:
        args.markdown.write_text(_markdown(rows))
    return 0 if all(row.passed is not False for _, row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
