"""The served dashboard loads its pages' modules beside the server once its runtime is up."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fieldtrust.dashboard import serve_main


@pytest.fixture
def page_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "fieldtrust_test_page_module.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "fieldtrust_test_page_module", raising=False)
    return "fieldtrust_test_page_module"


def test_the_pages_modules_are_imported_once_the_runtime_exists(
    page_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serve_main.runtime, "exists", lambda: True)
    # A module that fails to import is the page's to report, in its own words, later.
    serve_main.import_pages_ahead(["fieldtrust_no_such_module", page_module])
    assert sys.modules[page_module].LOADED


def test_nothing_is_imported_before_the_runtime_exists(
    page_module: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Streamlit's caches belong to its runtime: a module imported before it would
    # bind its cached reads to a cache of its own.
    monkeypatch.setattr(serve_main.runtime, "exists", lambda: False)
    serve_main.import_pages_ahead([page_module], wait=0.2)
    assert page_module not in sys.modules


def test_every_module_named_ahead_exists() -> None:
    import importlib.util

    assert all(importlib.util.find_spec(name) is not None for name in serve_main.PAGE_MODULES)


@pytest.fixture
def counted_certificates(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every anytime certificate computed (not given back kept) from here on, by stratum."""
    from collections import OrderedDict

    from fieldtrust.calibration import anytime

    monkeypatch.setattr(anytime, "_KEPT", OrderedDict())
    computed: list[object] = []
    real = anytime._certify

    def counting(closed, *args, **kwargs):
        computed.append(closed)
        return real(closed, *args, **kwargs)

    monkeypatch.setattr(anytime, "_certify", counting)
    return computed


def test_the_first_pages_certificates_are_computed_at_the_servers_start(
    tmp_path: Path, use_db, counted_certificates: list[object]
) -> None:
    from fieldtrust.dashboard import data, views
    from fieldtrust.store.scope import Scope

    from tests.calibration.anytime_store import build_audited

    db = tmp_path / "audited.duckdb"
    build_audited(db, fields=("total", "date")).close()
    use_db(db)
    serve_main.compute_first_report()
    assert len(counted_certificates) == 2  # both strata, on the store's own bar
    # The report a first page reads (the sidebar's window of weeks, no other filter):
    # every certificate in it is one computed ahead.
    with data.reading(str(db)) as con:
        bar = data.bar()
        weeks = data.filter_options(con).weeks[-bar.weeks:]
        report = data.calibration_report(con, *views.report_args(Scope(weeks=weeks), bar))
    assert len(counted_certificates) == 2
    # The report's certificates are those: each stratum certified a threshold on them.
    assert all(s.assessment.certified is not None for s in report.strata)


def test_the_one_look_certificate_computes_no_anytime_one_and_a_missing_store_nothing(
    tmp_path: Path, use_db, monkeypatch: pytest.MonkeyPatch, counted_certificates: list[object]
) -> None:
    from fieldtrust.dashboard import data

    from tests.calibration.anytime_store import build_audited

    monkeypatch.setattr(data, "_AHEAD", {})
    use_db(tmp_path / "no-store-yet.duckdb")
    serve_main.compute_first_report()
    assert not (tmp_path / "no-store-yet.duckdb").exists() and data._AHEAD == {}
    db = tmp_path / "audited.duckdb"
    build_audited(db).close()
    use_db(db)
    monkeypatch.setenv("FIELDTRUST_CERTIFICATE", "fixed")
    serve_main.compute_first_report()
    assert counted_certificates == []
    (report,) = data._AHEAD.values()  # the first page's report, on the one-look certificate
    assert report.bar.certificate == "fixed"


def test_the_first_page_run_takes_its_report_from_the_servers_start(
    tmp_path: Path, use_db, monkeypatch: pytest.MonkeyPatch, counted_certificates: list[object]
) -> None:
    import streamlit as st
    from fieldtrust.dashboard import data
    from streamlit.testing.v1 import AppTest

    from tests.calibration.anytime_store import build_audited
    from tests.dashboard.test_apptest import APP, TIMEOUT

    db = tmp_path / "audited.duckdb"
    build_audited(db, fields=("total", "date")).close()
    use_db(db)
    monkeypatch.setattr(data, "_AHEAD", {})
    st.cache_data.clear()  # no report of an earlier test in this worker's cache
    serve_main.compute_first_report()
    assert len(data._AHEAD) == 1
    reports: list[object] = []
    real = data._QUERIES["calibration_report"]
    monkeypatch.setitem(data._QUERIES, "calibration_report",
                        lambda *args, **kwargs: reports.append(args) or real(*args, **kwargs))
    at = AppTest.from_file(APP, default_timeout=TIMEOUT).run()
    assert not at.exception, at.exception[0].message
    # The page showed the report computed at the start, and computed none of its own.
    assert reports == [] and data._AHEAD == {}
    assert any("invoice" in str(df.value) for df in at.dataframe)
    assert len(counted_certificates) == 2
