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
