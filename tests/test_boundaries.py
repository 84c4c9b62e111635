"""The library never imports the UI layer (STYLE.md: library first, thin UI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LIBRARY = [
    f"fieldtrust.{name}" for name in (
        "store", "ingest", "calibration", "sampling", "labels", "extraction", "governance")
]

# A fresh interpreter loads nothing but what the library pulls in: every module of
# each package, one package after the other. A UI module that appears is charged to
# the package whose modules loaded it (the first to do so).
_IMPORT_ALL = """
import importlib, json, pkgutil, sys
def ui_loaded():
    return {n for n in sys.modules
            if n.split('.')[0] in ('streamlit', 'plotly') or n.startswith('fieldtrust.dashboard')}
found = {}
for package in json.loads(sys.argv[1]):
    before = ui_loaded()
    pkg = importlib.import_module(package)
    for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):
        importlib.import_module(m.name)
    found[package] = sorted(ui_loaded() - before)
print(json.dumps(found))
"""


def test_no_library_package_imports_the_ui() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, json.dumps(LIBRARY)],
        capture_output=True, text=True, check=True,
    )
    found = json.loads(result.stdout)
    assert sorted(found) == sorted(LIBRARY)  # every package was walked
    assert {package: ui for package, ui in found.items() if ui} == {}


def test_the_check_charges_the_ui_to_the_package_that_loads_it(tmp_path: Path) -> None:
    package = tmp_path / "draws"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "chart.py").write_text(
        "import sys, types\nsys.modules['plotly.graph_objects'] = types.ModuleType('go')\n")
    result = subprocess.run(
        [sys.executable, "-c", _IMPORT_ALL, json.dumps([LIBRARY[0], "draws"])],
        capture_output=True, text=True, check=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert json.loads(result.stdout) == {LIBRARY[0]: [], "draws": ["plotly.graph_objects"]}
