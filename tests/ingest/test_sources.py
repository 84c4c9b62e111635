"""Lake sources read by DuckDB: the rollup, incremental refresh, bad rows, unreachable sources."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from click.testing import CliRunner
from fieldtrust.ingest.extractions import ingest_table
from fieldtrust.ingest.readers import shown
from fieldtrust.ingest.sources import SourceConfig, open_source, refresh_source
from fieldtrust.ingest.sources.dialect import to_spark
from fieldtrust.sampling.draw import draw_sample
from fieldtrust.sampling.samples import load_sample, sample_items
from fieldtrust.store import rollup
from fieldtrust.store.summary import store_summary

from fieldtrust.cli.main import cli
from fieldtrust.errors import SourceError, ValidationError
from tests.conftest import table_fingerprint
from tests.ingest.lake import (
    fresh_store,
    lake_env,
    lake_rows,
    refreshed_store,
    write_delta_lake,
    write_parquet_lake,
)


def counts(con: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    """The rollup as rows, with the confidence sums rounded (engines add in their own order)."""
    table = rollup.population_counts(con)
    rows = zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True)
    return sorted((*row[:-1], round(row[-1], 9)) for row in rows)


def form_versions(con: duckdb.DuckDBPyConnection) -> list[tuple[object, ...]]:
    return con.execute("SELECT * FROM form_versions ORDER BY ALL").fetchall()


@pytest.fixture(scope="module")
def rows() -> pa.Table:
    return lake_rows(3000, weeks=3)


@pytest.fixture(scope="module")
def ingested(rows: pa.Table, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same rows ingested into an embedded store: what every source must match."""
    path = tmp_path_factory.mktemp("ingested") / "a.duckdb"
    con = fresh_store(path)
    ingest_table(con, rows, source="rows")
    con.close()
    return path


@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_a_refresh_counts_what_ingest_counts_and_reads_nothing_twice(
    kind: str, rows: pa.Table, ingested: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "lake"
    (write_parquet_lake if kind == "parquet" else write_delta_lake)(rows, folder)
    con = fresh_store(tmp_path / "b.duckdb")
    source = open_source(SourceConfig(kind, str(folder)))
    result = refresh_source(con, source)
    assert (result.files_read, result.rows_counted, result.rows_skipped) == (3, 3000, 0)
    assert con.execute("SELECT count(*) FROM extractions").fetchall() == [(0,)]
    reference = duckdb.connect(str(ingested), read_only=True)
    assert counts(con) == counts(reference)
    assert form_versions(con) == form_versions(reference)
    assert rollup.is_current(con)
    summary = store_summary(con)
    assert (summary.extractions, summary.documents, summary.first_week, summary.last_week) == (
        3000, None, "2026-W02", "2026-W04")
    assert refresh_source(con, source).refresh_id is None  # nothing new: nothing read

    # A new week arrives: only its file is read.
    later = lake_rows(400, weeks=1, seed=9, prefix="y", first_week=5)
    (write_parquet_lake if kind == "parquet" else write_delta_lake)(later, folder)
    again = refresh_source(con, source)
    assert (again.files_read, again.rows_counted) == (1, 400)
    assert sum(r[5] for r in counts(con)) == 3400
    source.close()
    reference.close()


def test_a_file_changed_after_it_was_counted_is_reported_not_recounted(
    rows: pa.Table, tmp_path: Path
) -> None:
    folder = write_parquet_lake(rows, tmp_path / "lake")
    con = fresh_store(tmp_path / "b.duckdb")
    source = open_source(SourceConfig("parquet", str(folder)))
    refresh_source(con, source)
    before = counts(con)
    first = sorted(folder.glob("week=*/*.parquet"))[0]
    os.utime(first, (1, 1))  # rewritten, as far as anyone can tell
    gone = sorted(folder.glob("week=*/*.parquet"))[1]
    gone.unlink()
    result = refresh_source(con, source)
    assert result.refresh_id is None
    assert result.changed_files == [str(first.relative_to(folder))]
    assert result.missing_files == [str(gone.relative_to(folder))]
    assert counts(con) == before


def test_an_acknowledged_change_is_not_reported_again_until_the_file_changes_once_more(
    rows: pa.Table, tmp_path: Path
) -> None:
    folder = write_parquet_lake(rows, tmp_path / "lake")
    db = tmp_path / "s.duckdb"
    fresh_store(db).close()
    env = {"FIELDTRUST_SOURCE": "parquet", "FIELDTRUST_SOURCE_PATH": str(folder)}
    runner = CliRunner()

    def refresh(*options: str) -> Any:
        return runner.invoke(cli, ["--db", str(db), "refresh", "--quiet", *options], env=env)

    assert refresh().exit_code == 0
    first, gone = sorted(folder.glob("week=*/*.parquet"))[:2]
    changed_path, gone_path = (str(p.relative_to(folder)) for p in (first, gone))
    os.utime(first, (1, 1))
    gone.unlink()
    for _ in range(2):  # reported on every refresh
        warned = refresh()
        assert [line for line in warned.output.splitlines() if line.startswith("warning")] == [
            f"warning: {changed_path} changed after it was counted; it was not counted again"
            f" (write its rows as a new file; `fieldtrust refresh --acknowledge {changed_path}`"
            " once you have looked)",
            f"warning: {gone_path} was counted but is gone from the source"
            f" (`fieldtrust refresh --acknowledge {gone_path}` once you have looked)",
        ]
    # A reviewer may not acknowledge, nor may anyone acknowledge a file that did not change.
    before = table_fingerprint(duckdb.connect(str(db), read_only=True))
    refused = refresh("--acknowledge", changed_path, "--as", "alice")
    assert refused.exit_code == 2 and "alice (role reviewer) may not acknowledge" in refused.output
    unchanged = str(sorted(folder.glob("week=*/*.parquet"))[-1].relative_to(folder))
    refused = refresh("--acknowledge", unchanged, "--as", "quinn")
    assert refused.exit_code == 2
    assert refused.output.strip() == (
        f"error: {unchanged} is not a counted file of parquet:{folder} that changed or went"
        f" away; those waiting to be acknowledged: {changed_path}, {gone_path}")
    assert table_fingerprint(duckdb.connect(str(db), read_only=True)) == before

    done = refresh("--acknowledge", changed_path, "--acknowledge", gone_path, "--as", "quinn")
    assert done.exit_code == 0, done.output
    assert done.output.splitlines()[:2] == [
        f"{changed_path}: acknowledged by quinn; reported again if it changes",
        f"{gone_path}: acknowledged by quinn; reported again if it changes",
    ]
    assert "warning" not in done.output and "warning" not in refresh().output
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT path, size IS NULL, acknowledged_by"
                           " FROM source_file_acknowledgements ORDER BY path").fetchall() == sorted(
            [(changed_path, False, "quinn"), (gone_path, True, "quinn")])
    os.utime(first, (2, 2))  # it changes again: reported again
    assert f"warning: {changed_path} changed" in refresh().output


def test_bad_rows_are_refused_with_the_ingest_messages_unless_skipped(
    rows: pa.Table, tmp_path: Path
) -> None:
    folder = write_parquet_lake(rows.slice(0, 50), tmp_path / "lake")
    bad = rows.slice(50, 30).to_pylist()
    bad[3]["confidence"] = 1.5
    bad[7]["doc_type"] = "  "
    write_parquet_lake(pa.Table.from_pylist(bad, schema=rows.schema), tmp_path / "lake")
    con = fresh_store(tmp_path / "b.duckdb")
    source = open_source(SourceConfig("parquet", str(folder)))
    before = table_fingerprint(con)
    with pytest.raises(ValidationError) as caught:
        refresh_source(con, source)
    problems = caught.value.problems
    assert caught.value.total == 2
    found = [re.fullmatch(r"file (week=2026-W\d\d/\S+\.parquet), row (\d+), column (\w+): (.*)", p)
             for p in problems]
    assert all(found)
    assert sorted(m.group(3, 4) for m in found if m) == [
        ("confidence", "1.5 is outside [0, 1]"), ("doc_type", "missing (a value is required)")]
    for match in found:  # the file and row named hold the bad value
        assert match is not None
        file, row = folder / match.group(1), int(match.group(2))
        value = duckdb.sql(f"SELECT {match.group(3)} FROM read_parquet('{file}')"
                           f" LIMIT 1 OFFSET {row - 1}").fetchall()[0][0]
        assert value in (1.5, "  ")
    assert table_fingerprint(con) == before

    result = refresh_source(con, source, skip_invalid=True)
    assert (result.rows_counted, result.rows_skipped) == (78, 2)
    assert con.execute("SELECT rows_skipped FROM source_refreshes").fetchall() == [(2,)]


def test_a_bad_id_is_counted_by_the_refresh_and_refused_by_the_draw_unless_skipped(
    rows: pa.Table, tmp_path: Path
) -> None:
    """The refresh checks what a row is counted by; the draw checks the rest of its week.

    With the bad rows skipped, the draw is the one the embedded store makes
    from the same rows without them (what ingest --skip-invalid keeps).
    """
    week = "2026-W03"
    in_week = [i for i, t in enumerate(rows["extracted_at"].to_pylist())
               if t.strftime("%G-W%V") == week]
    bad = rows.to_pylist()
    bad[in_week[0]]["extraction_id"] += "\u200b"
    bad[in_week[1]]["doc_id"] = None
    bad[in_week[2]]["extraction_id"] = "x" * 300
    bad[in_week[3]]["confidence"] = 1.5  # what a row is counted by: the refresh's to check
    folder = write_parquet_lake(pa.Table.from_pylist(bad, schema=rows.schema), tmp_path / "lake")
    con = fresh_store(tmp_path / "b.duckdb")
    source = open_source(SourceConfig("parquet", str(folder)))
    with pytest.raises(ValidationError, match="1 problem") as caught:
        refresh_source(con, source)
    assert caught.value.problems[0].endswith("column confidence: 1.5 is outside [0, 1]")
    result = refresh_source(con, source, skip_invalid=True)
    assert (result.rows_counted, result.rows_skipped) == (2999, 1)

    before = table_fingerprint(con)
    with pytest.raises(ValidationError) as caught:
        draw_sample(con, week, seed=11, actor="quinn", source=source)
    assert caught.value.total == 3
    found = [re.fullmatch(r"file (week=2026-W03/\S+\.parquet), row (\d+), column (\w+): (.*)", p)
             for p in caught.value.problems]
    assert all(found)
    assert sorted(m.group(3, 4) for m in found if m) == [
        ("doc_id", "missing (a value is required)"),
        ("extraction_id", f"'{bad[in_week[0]]['extraction_id'][:-1]}<U+200B>' holds the invisible"
                          " character U+200B (a control, zero-width or direction character);"
                          " keys must be plain text"),
        ("extraction_id", f"'{shown('x' * 300)}' is 300 characters long; keys may have at most"
                          " 256"),
    ]
    assert table_fingerprint(con) == before
    assert draw_sample(con, "2026-W02", seed=11, actor="quinn", source=source).rows_skipped == 0

    drawn = draw_sample(con, week, seed=11, actor="quinn", source=source, skip_invalid=True)
    assert drawn.rows_skipped == 3
    assert load_sample(con, drawn.sample_id).rows_skipped == 3
    reference = fresh_store(tmp_path / "a.duckdb")
    kept = [row for i, row in enumerate(bad) if i not in in_week[:4]]
    ingest_table(reference, pa.Table.from_pylist(kept, schema=rows.schema), source="rows")
    expected = draw_sample(reference, week, seed=11, actor="quinn")
    assert drawn.n_population == expected.n_population == len(in_week) - 4
    assert sorted(sample_items(con, drawn.sample_id)["extraction_id"].to_pylist()) == sorted(
        sample_items(reference, expected.sample_id)["extraction_id"].to_pylist())


def test_the_sample_command_refuses_a_week_with_bad_rows_with_exit_2(
    rows: pa.Table, tmp_path: Path
) -> None:
    bad = rows.to_pylist()
    week = bad[0]["extracted_at"].strftime("%G-W%V")
    bad[0]["extraction_id"] = "a\tb"
    folder = write_parquet_lake(pa.Table.from_pylist(bad, schema=rows.schema), tmp_path / "lake")
    db = tmp_path / "s.duckdb"
    env = refreshed_store(db, folder)
    runner = CliRunner()
    refused = runner.invoke(cli, ["--db", str(db), "sample", "--week", week, "--as", "quinn"],
                            env=env)
    assert refused.exit_code == 2
    assert f"week {week}: rejected, 1 problem; nothing was written" in refused.output
    assert "column extraction_id: 'a<U+0009>b' holds the invisible character U+0009" in (
        refused.output)
    assert "Traceback" not in refused.output
    skipped = runner.invoke(cli, ["--db", str(db), "sample", "--week", week, "--as", "quinn",
                                  "--skip-invalid", "--json"], env=env)
    assert skipped.exit_code == 0, skipped.output
    assert json.loads(skipped.output)["rows_skipped"] == 1
    embedded = runner.invoke(cli, ["--db", str(tmp_path / "e.duckdb"), "sample", "--week", week,
                                   "--as", "quinn", "--skip-invalid"])
    assert embedded.exit_code == 2
    assert "(--skip-invalid) is for a lake source" in embedded.output


def test_columns_are_read_under_the_mapped_names(rows: pa.Table, ingested: Path,
                                                 tmp_path: Path) -> None:
    folder = write_parquet_lake(rows, tmp_path / "lake",
                                rename={"confidence": "score", "extraction_id": "id"})
    con = fresh_store(tmp_path / "b.duckdb")
    config = SourceConfig("parquet", str(folder),
                          columns=(("confidence", "score"), ("extraction_id", "id")))
    refresh_source(con, open_source(config))
    assert counts(con) == counts(duckdb.connect(str(ingested), read_only=True))
    unmapped = open_source(SourceConfig("parquet", str(folder)))
    with pytest.raises(ValidationError, match=r"missing required column confidence \(read as"):
        refresh_source(fresh_store(tmp_path / "c.duckdb"), unmapped)


def test_an_unreachable_source_is_one_message_and_exit_2(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SourceError, match=r"source path .*nowhere does not exist"):
        open_source(SourceConfig("parquet", str(tmp_path / "nowhere")))
    with pytest.raises(SourceError, match="is not a Delta table"):
        open_source(SourceConfig("delta", str(tmp_path)))
    with pytest.raises(SourceError, match=r"Spark Connect \(sc://127.0.0.1:1\) needs|cannot reach"):
        open_source(SourceConfig("spark", str(tmp_path), spark="sc://127.0.0.1:1"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SourceError, match="local Spark needs Java 17"):
        open_source(SourceConfig("spark", str(tmp_path), spark="local[1]"))
    monkeypatch.undo()
    result = CliRunner().invoke(
        cli, ["--db", str(tmp_path / "s.duckdb"), "refresh"],
        env={"FIELDTRUST_SOURCE": "parquet", "FIELDTRUST_SOURCE_PATH": str(tmp_path / "no")},
    )
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: source path {tmp_path / 'no'} does not exist"
    ]


def test_the_settings_read_a_source_table(tmp_path: Path) -> None:
    from fieldtrust.cli.source_cmds import source_config
    from fieldtrust.settings import load_settings

    path = tmp_path / "fieldtrust.toml"
    path.write_text('[source]\nkind = "delta"\npath = "lake"\n'
                    '[source.columns]\nconfidence = "score"\n')
    config = source_config(load_settings(config_file=path, environ={}))
    assert config == SourceConfig("delta", "lake", columns=(("confidence", "score"),))
    with pytest.raises(SourceError, match="'spark ' is not one of"):
        SourceConfig("spark ", "x")


def test_isfinite_has_a_spark_form() -> None:
    assert to_spark("SELECT isfinite(c + 0) FROM t") == (
        "SELECT (NOT ISNAN(c + 0) AND ABS(c + 0) < CAST('Infinity' AS DOUBLE)) FROM t"
    )


def test_refresh_shows_progress_lines_off_a_terminal_and_none_with_json(
    rows: pa.Table, tmp_path: Path
) -> None:
    import json

    folder = write_parquet_lake(rows, tmp_path / "lake")
    env = lake_env(folder)
    db = ["--db", str(tmp_path / "s.duckdb")]
    shown = CliRunner().invoke(cli, [*db, "refresh"], env=env)
    assert shown.exit_code == 0, shown.output
    assert shown.stdout.strip().endswith("new files (" + shown.stdout.split("(")[-1].strip())
    lines = shown.stderr.splitlines()
    assert any(re.fullmatch(r"\[\d+/3 files, [\d.]+ s\] counting: [\d,]+ rows", x) for x in lines)
    assert lines[-1].startswith("[0/1 files") and "storing counts of 3,000 rows" in lines[-1]
    write_parquet_lake(lake_rows(10, weeks=1, seed=2, prefix="z", first_week=6), folder)
    quiet = CliRunner().invoke(cli, [*db, "refresh", "--json"], env=env)
    assert quiet.stderr == ""
    assert json.loads(quiet.stdout)["rows_counted"] == 10


@pytest.fixture
def lake_and_ingested(
    rows: pa.Table, ingested: Path, tmp_path: Path
) -> Iterator[tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection]]:
    """A store counting the rows as a Parquet lake, and the store that ingested them."""
    lake = fresh_store(tmp_path / "b.duckdb")
    refresh_source(lake, open_source(SourceConfig("parquet", str(
        write_parquet_lake(rows, tmp_path / "lake")))))
    reference = duckdb.connect(str(ingested), read_only=True)
    yield lake, reference
    reference.close()
    lake.close()


def test_the_confidence_histogram_of_a_lake_is_read_from_its_rollup(
    lake_and_ingested: tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection],
) -> None:
    from fieldtrust.calibration.histogram import confidence_histogram
    from fieldtrust.store import Scope

    con, reference = lake_and_ingested
    for scope in (Scope(), Scope(weeks=("2026-W03",))):
        lake = confidence_histogram(con, "invoice", "total", scope, bins=20)
        rows_ = confidence_histogram(reference, "invoice", "total", scope, bins=20)
        assert lake.to_pylist() == rows_.to_pylist()
        assert sum(lake["count"].to_pylist()) > 100


def test_the_audit_planner_of_a_lake_store_counts_the_week_from_its_rollup(
    lake_and_ingested: tuple[duckdb.DuckDBPyConnection, duckdb.DuckDBPyConnection],
) -> None:
    from fieldtrust.sampling.cells import plan_cells
    from fieldtrust.sampling.design import Design

    con, reference = lake_and_ingested
    lake = plan_cells(con, "2026-W03", Design())
    stored = plan_cells(reference, "2026-W03", Design())
    assert lake.drop_columns("form_versions").equals(stored.drop_columns("form_versions"))
    assert sum(lake["n_population"].to_pylist()) > 900


def test_a_refresh_holds_lake_rows_to_the_settings_time_window(tmp_path: Path) -> None:
    import datetime as dt

    from fieldtrust.ingest.rules import TimeWindow

    rows = lake_rows(40, weeks=1)
    folder = write_parquet_lake(rows, tmp_path / "lake")
    earliest = dt.datetime(2026, 1, 8)
    early = sorted(t for t in rows.column("extracted_at").to_pylist() if t < earliest)
    assert 0 < len(early) < 40
    con = fresh_store(tmp_path / "lib.duckdb")
    before = table_fingerprint(con)
    narrowed = open_source(SourceConfig("parquet", str(folder)), window=TimeWindow(earliest))
    with pytest.raises(ValidationError) as caught:
        refresh_source(con, narrowed)
    assert caught.value.total == len(early)
    pattern = (r"file (week=2026-W02/\S+\.parquet), row (\d+), column extracted_at:"
               r" '([^']+)' is outside the accepted times, 2026-01-08 to \S+ \S+ UTC"
               r" \(settings earliest_time, future_days\)")
    found = [re.fullmatch(pattern, p) for p in caught.value.problems]
    assert all(found) and len(found) == len(early)
    named = sorted(dt.datetime.fromisoformat(m.group(3)) for m in found if m)
    assert named == early
    for match in found:  # the file and row named hold the refused time
        assert match is not None
        held = duckdb.sql(f"SELECT CAST(extracted_at AS VARCHAR) FROM read_parquet("
                          f"'{folder / match.group(1)}') LIMIT 1 OFFSET {int(match.group(2)) - 1}")
        assert held.fetchall()[0][0] == match.group(3)
    assert table_fingerprint(con) == before
    assert refresh_source(con, open_source(SourceConfig("parquet", str(folder)))).rows_counted == 40
    con.close()

    db = tmp_path / "cli.duckdb"
    fresh_store(db).close()
    env = lake_env(folder, earliest_time="2026-01-08")
    refused = CliRunner().invoke(cli, ["--db", str(db), "refresh", "--quiet"], env=env)
    assert refused.exit_code == 2, refused.output
    assert "Traceback" not in refused.output
    shown = [line.strip() for line in refused.stderr.splitlines()]
    assert sum(bool(re.fullmatch(pattern, line)) for line in shown) == min(len(early), 20)
    con = duckdb.connect(str(db), read_only=True)
    assert con.execute("SELECT count(*) FROM source_refreshes").fetchall() == [(0,)]
    con.close()


@pytest.mark.parametrize("kind", ["parquet", "delta"])
def test_a_lake_engine_draws_no_progress_bar_on_stdout(kind: str, rows: pa.Table,
                                                       tmp_path: Path) -> None:
    # DuckDB draws one for queries over two seconds: it would corrupt `refresh --json`.
    folder = (write_parquet_lake if kind == "parquet" else write_delta_lake)(
        rows.slice(0, 10), tmp_path / "lake")
    source = open_source(SourceConfig(kind, str(folder)))
    setting = "SELECT current_setting('enable_progress_bar')"
    assert source.con.execute(setting).fetchall() == [(False,)]  # type: ignore[attr-defined]
    source.close()


def _with_locations(rows: pa.Table) -> pa.Table:
    """``rows`` with a document, page, box and excerpt per row, under the lake's own names."""
    n = rows.num_rows
    return (rows.append_column("doc_path", pa.array([f"docs/{i // 3}.pdf" for i in range(n)]))
                .append_column("page_no", pa.array([1 + i % 2 for i in range(n)], pa.int64()))
                .append_column("box", pa.array(["0.1,0.2,0.3,0.25"] * n))
                .append_column("snippet", pa.array([f"Total {i}.00" for i in range(n)])))


LOCATION_MAPPING = (("bbox", "box"), ("document_uri", "doc_path"), ("page", "page_no"),
                    ("source_excerpt", "snippet"))


@pytest.mark.parametrize("kind", [
    "parquet", "delta",
    pytest.param("spark", marks=pytest.mark.xdist_group("spark")),  # the run's one Spark worker
])
def test_a_lake_draw_brings_home_the_document_page_box_and_excerpt(
    kind: str, rows: pa.Table, tmp_path: Path
) -> None:
    """[columns] document_uri = ... was refused, and the draw dropped the location."""
    if kind == "spark":
        import shutil

        if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
            pytest.skip("local Spark needs Java 17")
    lake = _with_locations(rows)
    folder = tmp_path / "lake"
    (write_delta_lake if kind == "delta" else write_parquet_lake)(lake, folder)
    con = fresh_store(tmp_path / "b.duckdb")
    source = open_source(SourceConfig(kind, str(folder), columns=LOCATION_MAPPING))
    try:
        refresh_source(con, source)
        result = draw_sample(con, "2026-W02", seed=5, actor="quinn", source=source)
    finally:
        source.close()
    items = sample_items(con, result.sample_id).to_pylist()
    assert items
    by_id = {r["extraction_id"]: r for r in lake.to_pylist()}
    stored = con.execute(
        "SELECT extraction_id, document_uri, page, bbox_x0, bbox_y0, bbox_x1, bbox_y1,"
        " source_excerpt FROM extractions"
    ).fetchall()
    assert len(stored) == len(items)
    for extraction_id, uri, page, *box, excerpt in stored:
        row = by_id[extraction_id]
        assert (uri, page, excerpt) == (row["doc_path"], row["page_no"], row["snippet"])
        assert box == [0.1, 0.2, 0.3, 0.25]
    from fieldtrust.store.locations import document_location

    located = document_location(con, items[0]["extraction_id"])
    assert located is not None and located.bbox == (0.1, 0.2, 0.3, 0.25)


def test_the_settings_columns_table_maps_ingest_and_a_lake_alike(tmp_path: Path) -> None:
    from fieldtrust.cli.source_cmds import column_mapping, source_config
    from fieldtrust.settings import load_settings

    path = tmp_path / "fieldtrust.toml"
    path.write_text('[columns]\ndocument_uri = "doc_path"\nconfidence = "score"\n'
                    '[source]\nkind = "parquet"\npath = "lake"\n'
                    '[source.columns]\nconfidence = "prob"\n')
    resolved = load_settings(config_file=path, environ={})
    assert column_mapping(resolved) == {"document_uri": "doc_path", "confidence": "prob"}
    assert source_config(resolved).columns == (("confidence", "prob"),
                                               ("document_uri", "doc_path"))
