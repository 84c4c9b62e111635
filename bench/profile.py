"""Profile one side of one case on a cached size: where does the time go?

    python -m bench.profile calibrate --rows 1M
    python -m bench.profile draw --rows 10M --side baseline
    python -m bench.profile overview --rows 1M          # a dashboard page, warm

Uses pyinstrument when it is installed (``pip install pyinstrument``), else
cProfile. The size's data must exist (run ``python -m bench`` at that size
first, or let this build it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from collections.abc import Callable
from typing import Any

from bench import cases, pages
from bench.generate import DEFAULT_ROOT, build_dataset
from bench.run import SEED, parse_size
from fieldtrust.settings import Settings


def _profiled(fn: Callable[[], object]) -> str:
    try:
        from pyinstrument import Profiler
    except ImportError:
        profile = cProfile.Profile()
        profile.runcall(fn)
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("cumulative").print_stats(40)
        return out.getvalue()
    profiler = Profiler(interval=0.001)
    profiler.start()
    fn()
    profiler.stop()
    text: str = profiler.output_text(unicode=False, color=False)
    return text


def main(argv: list[str] | None = None) -> int:
    names = [c.name for c in cases.CASES] + list(pages.PAGES)
    parser = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__)
    parser.add_argument("case", choices=names)
    parser.add_argument("--rows", type=parse_size, default=1_000_000)
    parser.add_argument("--side", choices=["library", "baseline"], default="library")
    args = parser.parse_args(argv)
    dataset = build_dataset(args.rows, SEED, DEFAULT_ROOT)
    ctx = cases.Context(rows=args.rows, store=dataset.store, parquet=dataset.parquet,
                        work=dataset.folder / "work", settings=Settings())
    ctx.work.mkdir(parents=True, exist_ok=True)
    if args.case in pages.PAGES:
        inputs = pages.resolve_inputs(ctx.store, ctx.settings)
        pages.render_page(args.case, ctx.store, inputs, ctx.settings)  # warm-up

        def run() -> object:
            return pages.render_page(args.case, ctx.store, inputs, ctx.settings)

        print(_profiled(run))
        return 0
    case = cases.case_named(args.case)
    side = case.library if args.side == "library" else case.baseline
    state: dict[str, Any] = side.prepare(ctx)
    try:
        for _ in range(2):  # a warm-up, then the profiled run
            if side.reset is not None:
                side.reset(state)
            started = time.perf_counter()
            report = _profiled(lambda: side.run(state))
            elapsed = time.perf_counter() - started
        print(f"{args.case} ({args.side}), {args.rows:,} rows: {elapsed:.3f} s profiled")
        print(report)
    finally:
        if side.finish is not None:
            side.finish(state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
