"""Fuzzing the files fieldtrust reads: Label Studio exports, lake files, settings files (issue 25).

For each, hypothesis builds inputs mostly of the right shape with parts of
the wrong one (a list where an object belongs, text where a number does,
NaN, huge numbers, glob characters in names, truncated or random bytes) and
runs the real CLI on them: every input ends in exit 0, or exit 2 with an
``error:`` line and the store's fingerprint unchanged; never a traceback.
Bounded: a fixed number of examples from a fixed seed, sizes capped, no
deadline.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, seed, settings
from hypothesis import strategies as st
from rel_store import QA_LEAD, WEEK, record_figure

from fieldtrust.cli.main import cli
from tests.conftest import copy_store, file_fingerprint
from tests.ingest.lake import fresh_store, lake_rows

#: Examples per property; a few hundred in all keeps the run well under a minute.
EXAMPLES = {"label_studio": 50, "lake": 30, "settings": 100}



def bounded(name: str) -> settings:
    """Hypothesis settings of one property: its examples, no deadline, no saved database."""
    return settings(max_examples=EXAMPLES[name], deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["correct", "incorrect", "unclear", "other", "", " ", "2026-11-30T10:00:00Z",
                     "yesterday", "ana@example.org", "misread_characters", "\u202e", "x\u0000y"]),
)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=8), inner, max_size=3), max_leaves=6)


def mostly(right: st.SearchStrategy[Any], odds: int = 8) -> st.SearchStrategy[Any]:
    """``right``, but one time in ``odds`` any JSON value: most parts right, some not.

    (Drawn by index: one_of would treat its repeated branch as one, and shrinks to the
    first, which is ``right`` here.)
    """
    return st.sampled_from(range(odds)).flatmap(lambda k: JSON if k == odds - 1 else right)


#: The tables a label import writes: what a refused one must leave as it was.
LABEL_TABLES = ["labels", "label_imports", "label_lead_times", "history_chain",
                "sampled_extractions", "label_import_designs"]


def _check(result: Any, before: Any, after: Any, shown: str) -> int:
    """The one property: exit 0, or exit 2 with an error line and nothing changed."""
    assert result.exit_code in (0, 2), (shown, result.output, result.exc_info)
    assert result.exception is None or isinstance(result.exception, SystemExit), \
        (shown, result.exc_info)
    assert "Traceback" not in result.output, (shown, result.output)
    if result.exit_code == 2:
        assert result.stderr.startswith("error: "), (shown, result.stderr)
        assert after() == before, (shown, result.stderr)
    return int(result.exit_code)


# --- Label Studio exports -----------------------------------------------------------------------


def _exports(ids: list[str], samples: list[str]) -> st.SearchStrategy[Any]:
    result = st.fixed_dictionaries({
        "from_name": mostly(st.sampled_from(["verdict", "corrected_value", "error_type",
                                             "error_detail"])),
    }, optional={"value": mostly(st.fixed_dictionaries({}, optional={
        "choices": mostly(st.lists(mostly(st.sampled_from(
            ["correct", "incorrect", "unclear", "misread_characters", "wrong_field"])),
            max_size=2)),
        "text": mostly(st.lists(mostly(st.text(max_size=10)), max_size=2)),
    }))})
    annotation = st.fixed_dictionaries({}, optional={
        "result": mostly(st.lists(mostly(result), max_size=3)),
        "completed_by": mostly(st.fixed_dictionaries({}, optional={
            "email": mostly(st.sampled_from(["ana@example.org", "ben@example.org"])),
            "id": mostly(st.integers(1, 5))})),
        "created_at": mostly(st.sampled_from(["2026-11-30T10:00:00Z", "2026-11-30T11:30:00Z",
                                              "2026-12-01T09:00:00.123456Z"])),
        "lead_time": mostly(st.floats(0, 300)),
        "was_cancelled": mostly(st.booleans()),
        "id": JSON,
    })
    # The task's frame is nearly always right, so the draw reaches the parts inside it.
    task = st.fixed_dictionaries({
        "data": mostly(st.fixed_dictionaries({
            "extraction_id": mostly(st.sampled_from(ids), 30),
            "fieldtrust_task": st.just(1),
        }, optional={"sample_id": mostly(st.sampled_from(samples))}), 30),
    }, optional={"annotations": mostly(st.lists(mostly(annotation), min_size=1, max_size=3)),
                 "id": st.integers(1, 99)})
    tasks = st.lists(mostly(task, 30), min_size=1, max_size=3)
    return mostly(tasks, 10).flatmap(
        lambda drawn: st.binary(max_size=40) if drawn is None else st.just(drawn))


@pytest.mark.slow
def test_label_studio_exports_never_crash_and_a_refusal_changes_nothing(
    populated: Path, tmp_path: Path
) -> None:
    from tests.conftest import file_rows

    # Items nobody has labelled yet, so a well-formed export can import.
    ids = [x for (x,) in file_rows(
        populated, "SELECT extraction_id FROM audit_items i WHERE NOT EXISTS (SELECT 1 FROM"
        " labels l WHERE l.extraction_id = i.extraction_id) ORDER BY 1 LIMIT 6")] + ["nope"]
    exits = {0: 0, 2: 0}
    started = time.monotonic()
    state = {"before": file_fingerprint(populated, LABEL_TABLES)}
    well_formed = [{"id": 1, "data": {"extraction_id": ids[0], "fieldtrust_task": 1},
                    "annotations": [{"completed_by": {"email": "ana@example.org"},
                                     "created_at": "2026-11-30T10:00:00Z",
                                     "result": [{"from_name": "verdict",
                                                 "value": {"choices": ["correct"]}}]}]}]

    @seed(20261202)
    @bounded("label_studio")
    @example(export=well_formed)
    @given(export=_exports(ids, [f"{WEEK}/v1", "2026-W47/v1"]))
    def run(export: Any) -> None:
        path = tmp_path / "export.json"
        if isinstance(export, bytes):
            path.write_bytes(export)
        else:
            path.write_text(json.dumps(export), encoding="utf-8")
        # Label Studio's e-mail mapped to the store's reviewer, as a team's import does.
        result = CliRunner().invoke(cli, ["--db", str(populated), "labels", "import", str(path),
                                          "--format", "label-studio", "--as", QA_LEAD,
                                          "--reviewer-map", "ana@example.org=ana"])
        code = _check(result, state["before"],
                      lambda: file_fingerprint(populated, LABEL_TABLES), repr(export))
        if code == 0:  # labels may have been added: the next refusal is held to these
            state["before"] = file_fingerprint(populated, LABEL_TABLES)
        exits[code] += 1

    run()
    record_figure("fuzz_label_studio", {"exits": exits,
                                        "seconds": round(time.monotonic() - started, 1)})
    assert exits[0] and exits[2]  # the draw reaches both outcomes


# --- lake files ---------------------------------------------------------------------------------

NAMES = ["p.parquet", "p[1].parquet", "q*.parquet", "a b.parquet", "x?.parquet",
         "week=2026-W02/p.parquet", "p1.parquet"]


def _retyped(rows: pa.Table, column: str, kind: str) -> pa.Table:
    values = rows[column].to_pylist()
    made = {
        "text": lambda: pa.array([None if v is None else str(v) for v in values]),
        "int": lambda: pa.array([len(str(v)) for v in values], pa.int64()),
        "float": lambda: pa.array([float(len(str(v))) / 10 for v in values]),
        "list": lambda: pa.array([[str(v)] for v in values]),
        "struct": lambda: pa.array([{"v": str(v)} for v in values]),
        "null": lambda: pa.nulls(len(values)),
        "nan": lambda: pa.array([math.nan] * len(values)),
    }[kind]()
    return rows.set_column(rows.column_names.index(column), column, made)


@st.composite
def lake_file(draw: st.DrawFn) -> tuple[str, bytes | pa.Table]:
    """One file of a lake: a name, and its rows (maybe retyped or missing columns) or bytes."""
    name = draw(st.sampled_from(NAMES))
    shape = draw(st.sampled_from(["rows", "rows", "rows", "bytes", "truncated", "empty"]))
    rows = lake_rows(draw(st.integers(1, 12)), weeks=1, seed=draw(st.integers(0, 9)),
                     prefix=draw(st.sampled_from(["a", "b", "c"])))
    if shape == "bytes":
        return name, draw(st.binary(max_size=300))
    if shape == "empty":
        return name, b""
    for _ in range(draw(st.integers(0, 2))):
        column = draw(st.sampled_from(rows.column_names))
        if draw(st.booleans()):
            rows = _retyped(rows, column, draw(st.sampled_from(
                ["text", "int", "float", "list", "struct", "null", "nan"])))
        else:
            rows = rows.drop_columns([column])
    if shape == "truncated":
        sink = pa.BufferOutputStream()
        pq.write_table(rows, sink)
        whole = sink.getvalue().to_pybytes()
        return name, whole[: draw(st.integers(0, len(whole) - 1))]
    return name, rows


@pytest.mark.slow
def test_lake_files_never_crash_and_a_refusal_changes_nothing(tmp_path: Path) -> None:
    template = tmp_path / "template.duckdb"
    fresh_store(template).close()
    exits = {0: 0, 2: 0}
    started = time.monotonic()

    @seed(20261203)
    @bounded("lake")
    @given(files=st.lists(lake_file(), min_size=1, max_size=3))
    def run(files: list[tuple[str, bytes | pa.Table]]) -> None:
        folder = tmp_path / "lake"
        shutil.rmtree(folder, ignore_errors=True)
        for name, content in files:
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                pq.write_table(content, path)
        db = copy_store(template, tmp_path / "s.duckdb")
        env = {"FIELDTRUST_SOURCE": "parquet", "FIELDTRUST_SOURCE_PATH": str(folder)}
        shown = repr([(n, c if isinstance(c, bytes) else c.schema) for n, c in files])
        for args in (["refresh", "--quiet"], ["sample", "--week", "2026-W02", "--as", "quinn"]):
            before = file_fingerprint(db)
            result = CliRunner(env=env).invoke(cli, ["--db", str(db), *args])
            code = _check(result, before, lambda: file_fingerprint(db), f"{args} {shown}")
            exits[code] += 1
            if code:
                break
        os.unlink(db)

    run()
    record_figure("fuzz_lake", {"exits": exits, "seconds": round(time.monotonic() - started, 1)})
    assert exits[0] and exits[2]


# --- settings files -----------------------------------------------------------------------------

KEYS = ["db", "target", "confidence", "weeks", "stability_weeks", "n_min", "seed", "port",
        "model", "future_days", "earliest_time", "user", "source", "source_path",
        "documents_root", "unknown_key"]
TOML_SCALARS = st.one_of(
    st.integers(-(2**63), 2**63 - 1), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.text(max_size=10), st.dates(dt.date(1, 1, 1), dt.date(9999, 12, 31)),
    st.sampled_from([0, 1, 8, 0.5, 0.95, "2026-01-01", "store", "parquet"]),
)
TOML_VALUES = st.recursive(TOML_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.sampled_from(KEYS), inner, max_size=2),
                           max_leaves=5)


def toml_value(value: Any) -> str:
    """``value`` written as TOML (inline arrays and tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value == math.inf else
                                             "-inf" if value == -math.inf else repr(value))
    if isinstance(value, int | dt.date):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string is JSON's
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + "}"


@st.composite
def settings_text(draw: st.DrawFn) -> str:
    """A settings file: keys at the top, in [fieldtrust] or [source], or text that is no TOML."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text(max_size=60))
    entries = draw(st.dictionaries(st.sampled_from(KEYS), TOML_VALUES, max_size=4))
    body = "".join(f"{key} = {toml_value(value)}\n" for key, value in entries.items())
    table = draw(st.sampled_from(["", "", "[fieldtrust]\n", "[source]\n"]))
    return table + body


@pytest.mark.slow
def test_settings_files_never_crash(populated: Path, tmp_path: Path) -> None:
    exits = {0: 0, 2: 0}
    started = time.monotonic()

    def unchanged() -> str:  # read-only commands: the file's bytes stay (and hash fast)
        return hashlib.sha256(populated.read_bytes()).hexdigest()

    before = unchanged()

    @seed(20261204)
    @bounded("settings")
    @example(text="[fieldtrust]\nweeks = 4\nport = 8600\ntarget = 0.9\n")
    @given(text=settings_text())
    def run(text: str) -> None:
        path = tmp_path / "fieldtrust.toml"
        path.write_text(text, encoding="utf-8")
        for args in (["settings"], ["info"]):
            result = CliRunner().invoke(cli, ["--db", str(populated), "--config", str(path),
                                              *args])
            exits[_check(result, before, unchanged, text)] += 1

    run()
    record_figure("fuzz_settings", {"exits": exits,
                                    "seconds": round(time.monotonic() - started, 1)})
    assert exits[0] and exits[2]
