"""The markdown report: machine, data, each case beside its baseline, pages, scaling, memory."""

from __future__ import annotations

import itertools
import os
import platform
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

GB = 1024**3
MB = 1024**2
TEN_M = 10_000_000
#: The sizes the page goals hold at (the embedded store's ceiling, issue 17, is 10M).
PAGE_GOAL_SIZES = (1_000_000, 10_000_000)
ONE_M = 1_000_000
#: The issue's goals that are not tied to one case.
SCALING_GOAL = 1.3
PAGE_WARM_GOAL, PAGE_COLD_GOAL = 1.0, 3.0
RSS_GOAL = 1.5 * GB
#: Cases whose goals carry seconds and memory at 10M: (seconds, bytes).
CASE_LIMITS = {"calibrate": (2.0, RSS_GOAL), "draw": (2.0, 1.0 * GB)}
CASE_RATIOS = {"ingest": 1.5, "calibrate": 0.1, "draw": 2.0}
#: Cases whose goal is seconds at every size (work that does not grow with the store).
CASE_SECONDS = {"render_page": 0.3}
#: Ratios the issue sets for the 10M store only (smaller sizes are shown, not judged):
#: the pandas baseline's full load grows with the rows, the report's fixed costs do not;
#: nor do the draw's (the sample's cells, items and transaction).
RATIOS_AT_10M = {"calibrate", "draw"}


def machine() -> dict[str, Any]:
    """Cores, memory, CPU, versions and the code's commit."""
    versions = {}
    for package in ("duckdb", "pandas", "pyarrow", "numpy", "scipy", "scikit-learn", "streamlit"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = "absent"
    return {
        "cores": os.cpu_count(),
        "memory_gb": round(_meminfo_kb("MemTotal") / 1024**2, 1),
        "cpu": _cpu_model(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": versions,
        "commit": _commit(),
    }


def _meminfo_kb(key: str) -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _commit() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, check=True,
                              capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=root, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" (with uncommitted changes)" if dirty.strip() else "")


# --- formatting -------------------------------------------------------------------------------


def seconds(value: float) -> str:
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 10:
        return f"{value:.1f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1000:.0f} ms" if value >= 0.01 else f"{value * 1000:.1f} ms"


def timing(side: dict[str, Any]) -> str:
    if "error" in side:
        return f"**failed**: {side['error']}"
    if len(side["times"]) == 1:
        return seconds(side["median"])
    return f"{seconds(side['median'])} ({seconds(side['min'])}–{seconds(side['max'])})"


def memory(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value / GB:.2f} GB" if value >= GB else f"{value / MB:.0f} MB"


def size_label(rows: int) -> str:
    if rows % ONE_M == 0:
        return f"{rows // ONE_M}M"
    if rows % 1000 == 0:
        return f"{rows // 1000}k"
    return f"{rows:,}"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


# --- goals ------------------------------------------------------------------------------------


def case_verdict(name: str, rows: int, result: dict[str, Any]) -> str:
    """Which of the case's goals hold at this size ("–" where none applies here)."""
    lib, base = result["library"], result["baseline"]
    if "error" in lib:
        return "**no** (failed)"
    ratio = lib["median"] / base["median"] if "error" not in base else None
    checks = []
    if name in CASE_RATIOS:
        limit = CASE_RATIOS[name]
        checks.append(("ratio", ratio is not None and ratio <= limit))
    if name in CASE_SECONDS:
        checks.append(("time", lib["median"] < CASE_SECONDS[name]))
    if rows >= TEN_M:
        limit_s, limit_rss = CASE_LIMITS.get(name, (None, RSS_GOAL))
        if limit_s is not None:
            checks.append(("time", lib["median"] < limit_s))
        checks.append(("memory", lib["peak_rss"] < limit_rss))
    if not checks:
        return "–"
    failed = [what for what, ok in checks if not ok]
    return "yes" if not failed else "**no** (" + ", ".join(failed) + ")"


def page_verdict(rows: int, result: dict[str, Any]) -> str:
    if "error" in result:
        return "**no** (failed)"
    if rows not in PAGE_GOAL_SIZES:
        return "– (goal at 1M and 10M)"
    failed = []
    if result["warm"]["median"] >= PAGE_WARM_GOAL:
        failed.append("warm")
    if result["cold"]["median"] >= PAGE_COLD_GOAL:
        failed.append("cold")
    return "yes" if not failed else "**no** (" + ", ".join(failed) + ")"


# --- sections ---------------------------------------------------------------------------------


def _machine_section(m: dict[str, Any]) -> list[str]:
    v = m["versions"]
    return [
        "## Machine",
        "",
        *_table(
            ["cores", "memory", "CPU", "OS", "Python", "DuckDB", "pandas", "pyarrow", "numpy",
             "scipy", "code"],
            [[str(m["cores"]), f"{m['memory_gb']} GB", m["cpu"], m["os"], m["python"],
              v["duckdb"], v["pandas"], v["pyarrow"], v["numpy"], v["scipy"], m["commit"]]],
        ),
        "",
    ]


def _data_section(sizes: list[dict[str, Any]]) -> list[str]:
    rows = []
    for s in sizes:
        d = s["dataset"]
        rows.append([
            size_label(s["rows"]), f"{s['rows']:,}",
            f"{d['labelled']:,} ({d['label_share']:.2%})", f"{d['audit_items']:,}",
            str(len(d["weeks"])), f"{d['parquet_mb']:,.0f} MB", f"{d['store_mb']:,.0f} MB",
            seconds(d["build_seconds"]), _dates(s), str(s["runs"]), _loads(s),
        ])
    return [
        "## Data",
        "",
        *_table(["size", "extractions", "labelled (share)", "audit items", "weeks",
                 "Parquet", "store", "built in", "measured", "runs", "load avg (1 min)"], rows),
        "",
        "Load average: the lowest and highest 1-minute figure seen at the start and end of"
        " the runs. The machine is shared: anything well above the core count means other"
        " work was competing for the CPUs (compare the CPU-time columns).",
        "",
    ]


def _entries(size: dict[str, Any]) -> list[dict[str, Any]]:
    return [*size.get("cases", {}).values(), *size.get("pages", {}).values()]


def _dates(size: dict[str, Any]) -> str:
    """When the size's cases were measured (several dates after partial reruns)."""
    dates = sorted({e.get("date", size["date"]) for e in _entries(size)} or {size["date"]})
    return ", ".join(dates)


def _loads(size: dict[str, Any]) -> str:
    """1-minute load average: lowest and highest seen at the start or end of a run."""
    values = [size["load_start"][0], size["load_end"][0]]
    for entry in _entries(size):
        if "load" in entry:
            values += [entry["load"][0][0], entry["load"][1][0]]
    return f"{min(values):.1f}–{max(values):.1f}"


def _cases_section(size: dict[str, Any]) -> list[str]:
    rows = []
    for name, result in size["cases"].items():
        lib, base = result["library"], result["baseline"]
        ok = "error" not in lib and "error" not in base
        rows.append([
            f"**{name}**", timing(lib), timing(base),
            f"{lib['median'] / base['median']:.2f}" if ok else "–",
            _cpu_ratio(lib, base) if ok else "–", result["goal"],
            case_verdict(name, size["rows"], result),
            memory(lib.get("peak_rss")), memory(base.get("peak_rss")),
        ])
    if not rows:
        return []
    return [
        f"### Library vs baseline, {size_label(size['rows'])} extractions",
        "",
        *_table(["case", "fieldtrust median (min–max)", "baseline median (min–max)",
                 "ratio", "CPU s fieldtrust / baseline (ratio)", "goal", "met",
                 "peak RSS fieldtrust", "peak RSS baseline"], rows),
        "",
    ]


def _cpu_ratio(lib: dict[str, Any], base: dict[str, Any]) -> str:
    """CPU seconds of both sides and their ratio: less disturbed by a busy machine."""
    if "cpu_median" not in lib or "cpu_median" not in base:
        return "–"
    a, b = lib["cpu_median"], base["cpu_median"]
    ratio = f"{a / b:.2f}" if b > 0 else "–"
    return f"{a:.2f} / {b:.2f} ({ratio})"


def _pages_section(size: dict[str, Any]) -> list[str]:
    rows = []
    for page, result in size["pages"].items():
        if "error" in result:
            rows.append([f"**{page}**", timing(result), "–", "–", "–", "",
                         page_verdict(0, result), "–", ""])
            continue
        warm, cold = result["warm"], result["cold"]
        slow = sorted(warm["detail"].items(), key=lambda kv: -kv[1])[:3]
        rows.append([
            f"**{page}**", timing(warm), timing(cold),
            f"{cold['median'] / warm['median']:.2f}",
            f"{warm.get('cpu_median', float('nan')):.2f}",
            f"< {PAGE_WARM_GOAL:g} s warm, < {PAGE_COLD_GOAL:g} s cold at 1M and 10M",
            page_verdict(size["rows"], result),
            memory(max(warm["peak_rss"], cold["peak_rss"])),
            ", ".join(f"{n} {seconds(t)}" for n, t in slow),
        ])
    if not rows:
        return []
    return [
        f"### Dashboard pages, {size_label(size['rows'])} extractions",
        "",
        *_table(["page", "warm median (min–max)", "cold median (min–max)", "ratio cold/warm",
                 "warm CPU s", "goal", "met", "peak RSS", "slowest reads (warm)"], rows),
        "",
    ]


#: (rows, median wall seconds, peak RSS, median CPU seconds) of one timed thing at one size.
Point = tuple[int, float, float, float]


def _series(sizes: list[dict[str, Any]]) -> dict[str, list[Point]]:
    """Every timed thing across sizes."""
    out: dict[str, list[Point]] = {}

    def add(name: str, rows: int, r: dict[str, Any]) -> None:
        out.setdefault(name, []).append(
            (rows, r["median"], r["peak_rss"], r.get("cpu_median", float("nan"))))

    for s in sizes:
        for name, result in s["cases"].items():
            for side in ("library", "baseline"):
                if "error" not in result[side]:
                    add(f"{name} ({side})", s["rows"], result[side])
        for page, result in s["pages"].items():
            if "error" not in result:
                for kind in ("warm", "cold"):
                    add(f"page {page} ({kind})", s["rows"], result[kind])
    return out


def growth(points: list[tuple[Any, ...]]) -> list[float]:
    """Time growth over row growth between consecutive sizes (1.0 = linear).

    Each point starts (rows, seconds, ...).
    """
    return [(b[1] / a[1]) / (b[0] / a[0]) for a, b in itertools.pairwise(points)]


def cpu_growth(points: list[Point]) -> list[float]:
    """:func:`growth` of the CPU seconds."""
    return growth([(p[0], p[3]) for p in points])


def _scaling_section(sizes: list[dict[str, Any]]) -> list[str]:
    if len(sizes) < 2:
        return []
    labels = [size_label(s["rows"]) for s in sizes]
    steps = [f"{a}→{b}" for a, b in itertools.pairwise(labels)]
    rows = []
    for name, points in _series(sizes).items():
        if len(points) != len(sizes):
            continue
        wall, cpu = growth(points), cpu_growth(points)
        library = "(baseline)" not in name
        met = ("yes" if max(cpu) <= SCALING_GOAL else "**no**") if library else "–"
        rows.append([
            name, *(seconds(p[1]) for p in points), *(seconds(p[3]) for p in points),
            *(f"{f:.2f}" for f in wall), *(f"{f:.2f}" for f in cpu), met,
        ])
    return [
        "## Scaling",
        "",
        "Growth factor = (time ratio) / (rows ratio) between consecutive sizes: 1.0 is"
        " linear, below 1 sub-linear (fixed costs still dominate). Goal for fieldtrust:"
        f" no step above {SCALING_GOAL}. It is judged on CPU time, which a busy shared"
        " machine disturbs far less than wall-clock time (both are shown).",
        "",
        *_table(["timed", *(f"wall {x}" for x in labels), *(f"CPU {x}" for x in labels),
                 *(f"growth wall {x}" for x in steps), *(f"growth CPU {x}" for x in steps),
                 "met"], rows),
        "",
    ]


def _memory_section(sizes: list[dict[str, Any]]) -> list[str]:
    labels = [size_label(s["rows"]) for s in sizes]
    rows = [[name, *(memory(p[2]) for p in points)]
            for name, points in _series(sizes).items() if len(points) == len(sizes)]
    return [
        "## Peak memory (RSS of the process running the side)",
        "",
        "Each side runs in its own forked process that starts with the libraries imported"
        " (about 0.2-0.3 GB of the figures below). Goal for fieldtrust: under 1.5 GB at 10M"
        " (the sample draw: under 1 GB).",
        "",
        *_table(["timed", *labels], rows),
        "",
    ]


def _sides_section(sizes: list[dict[str, Any]]) -> list[str]:
    seen: dict[str, tuple[str, str, str]] = {}
    for s in sizes:
        for name, result in s["cases"].items():
            seen[name] = (result["title"], result["library"]["label"],
                          result["baseline"]["label"])
    if not seen:
        return []
    rows = [[f"**{name}**", title, lib, base] for name, (title, lib, base) in seen.items()]
    return ["## What each case compares", "",
            *_table(["case", "what", "fieldtrust", "baseline"], rows), ""]


def _verdict(ok: bool | None) -> str:
    return "–" if ok is None else ("yes" if ok else "**no**")


def _goal_rows(sizes: list[dict[str, Any]]) -> list[list[str]]:
    """One row per goal of the issue, with what was measured and whether it holds."""
    rows = []
    for name, limit in CASE_RATIOS.items():
        found = [(s["rows"], s["cases"][name]) for s in sizes if name in s["cases"]]
        good = [(n, r) for n, r in found if "error" not in r["library"]
                and "error" not in r["baseline"]]
        ratios = [(n, r["library"]["median"] / r["baseline"]["median"],
                   r["library"].get("cpu_median", float("nan"))
                   / r["baseline"].get("cpu_median", float("nan"))) for n, r in good]
        text = ", ".join(f"{size_label(n)}: {x:.3f} (CPU {c:.3f})" for n, x, c in ratios)
        where = ""
        if name in RATIOS_AT_10M:
            where = " at 10M"
            found = [(n, r) for n, r in found if n >= TEN_M]
            ratios = [(n, x, c) for n, x, c in ratios if n >= TEN_M]
            good = [(n, r) for n, r in good if n >= TEN_M]
        ok = all(x <= limit for _, x, _ in ratios) and len(good) == len(found) if found else None
        cpu_ok = all(c <= limit for _, _, c in ratios) if ratios else None
        verdict = _verdict(ok) + (f" (CPU: {_verdict(cpu_ok)})" if cpu_ok != ok else "")
        rows.append([f"{name}: ratio <= {limit:g}{where}", text or "not measured", verdict])
    largest = sizes[-1] if sizes and sizes[-1]["rows"] >= TEN_M else None
    for name, (limit_s, limit_rss) in CASE_LIMITS.items():
        r = largest["cases"].get(name) if largest else None
        if r is None or "error" in r["library"]:
            rows.append([f"{name}: < {limit_s:g} s at 10M", "not measured at 10M", "–"])
            continue
        lib = r["library"]
        rows.append([f"{name}: < {limit_s:g} s at 10M", seconds(lib["median"]),
                     _verdict(lib["median"] < limit_s)])
        rows.append([f"{name}: peak < {memory(limit_rss)} at 10M", memory(lib["peak_rss"]),
                     _verdict(lib["peak_rss"] < limit_rss)])
    if largest:
        peaks = [(n, r["library"]["peak_rss"]) for n, r in largest["cases"].items()
                 if "error" not in r["library"]]
        worst = max(peaks, key=lambda kv: kv[1]) if peaks else None
        rows.append(["every case: peak < 1.5 GB at 10M",
                     f"highest: {worst[0]} {memory(worst[1])}" if worst else "not measured",
                     _verdict(all(m < RSS_GOAL for _, m in peaks)) if peaks else "–"])
    for size in (s for s in sizes if s["rows"] in PAGE_GOAL_SIZES):
        label = "1M" if size["rows"] == ONE_M else "10M"
        for page, r in size["pages"].items():
            goal = f"page {page}: < 1 s warm, < 3 s cold at {label}"
            if "error" in r:
                rows.append([goal, "failed", "**no**"])
                continue
            rows.append([goal,
                         f"{seconds(r['warm']['median'])} warm, {seconds(r['cold']['median'])}"
                         " cold", page_verdict(size["rows"], r).split(" (")[0]])
    if len(sizes) >= 2:
        worst_growth: list[tuple[float, str, float]] = []
        for name, points in _series(sizes).items():
            if "(baseline)" in name or len(points) != len(sizes):
                continue
            worst_growth.append((max(cpu_growth(points)), name, max(growth(points))))
        if worst_growth:
            factor, name, wall = max(worst_growth)
            rows.append([f"scaling: no fieldtrust step above {SCALING_GOAL}x linear (CPU)",
                         f"worst: {name} {factor:.2f} (wall {wall:.2f})",
                         _verdict(factor <= SCALING_GOAL)])
    return rows


def _goals_section(sizes: list[dict[str, Any]]) -> list[str]:
    rows = _goal_rows(sizes)
    if not rows:
        return []
    return ["## Goals", "", *_table(["goal", "measured", "met"], rows), ""]


def render(results: dict[str, Any]) -> str:
    """The whole report from the results JSON."""
    sizes = sorted(results["sizes"].values(), key=lambda s: s["rows"])
    commands = list(dict.fromkeys(
        c for s in sizes for c in s.get("commands", [s.get("command", "python -m bench")]) if c
    ))
    lines = [
        "# fieldtrust benchmarks",
        "",
        "Generated by " + ", ".join(f"`{c}`" for c in commands) + ". How the cases work and"
        " how to read the ratios: [docs/benchmarks.md](../docs/benchmarks.md). Ratio ="
        " fieldtrust median / baseline median (below 1: fieldtrust is faster).",
        "",
        *_machine_section(results["machine"]),
        *_data_section(sizes),
        *_goals_section(sizes),
        "## Results",
        "",
    ]
    for s in sizes:
        lines += _cases_section(s) + _pages_section(s)
    lines += _scaling_section(sizes) + _memory_section(sizes) + _sides_section(sizes)
    return "\n".join(lines).rstrip() + "\n"
