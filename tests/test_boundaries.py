"""The library never imports the UI layer (STYLE.md: library first, thin UI)."""

from __future__ import annotations

import subprocess
import sys

import pytest

LIBRARY = [
    f"fieldtrust.{name}" for name in (
        "store", "ingest", "calibration", "sampling", "labels", "extraction", "governance")
]


@pytest.mark.parametrize("package", LIBRARY)
def test_library_package_imports_no_ui(package: str) -> None:
    # A fresh interpreter: what the package pulls in is all that is loaded.
    code = (
        "import importlib, pkgutil, sys\n"
        f"pkg = importlib.import_module({package!r})\n"
        "for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + '.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in"
        " ('streamlit', 'plotly') or n.startswith('fieldtrust.dashboard'))\n"
        "print(','.join(bad))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "", f"{package} imports {result.stdout.strip()}"
