"""The library type-checks clean: mypy as pyproject.toml configures it, strict on the library.

The check is the one a contributor runs, ``python tests/installed_layout.py mypy``,
on the packages laid out under their installed names (tests/installed_layout.py).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from installed_layout import ROOT, build

SCRIPT = ROOT / "tests" / "installed_layout.py"
CONFIG = ROOT / "pyproject.toml"


def test_the_library_type_checks_clean() -> None:
    result = subprocess.run([sys.executable, str(SCRIPT), "mypy"], cwd=ROOT,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r"Success: no issues found in (\d+) source files", result.stdout)
    assert found, result.stdout
    # Every module of the installed package was checked, not a part of it.
    laid_out = list((ROOT / "build" / "typecheck" / "fieldtrust").rglob("*.py"))
    assert int(found.group(1)) == len(laid_out) > 100


def test_a_type_error_in_the_library_is_reported(tmp_path: Path) -> None:
    tree = build(tmp_path / "tree")
    (tree / "fieldtrust" / "store" / "_untyped.py").write_text(
        "def double(x):\n    return x * 2\n\n\ncount: int = 'two'\n", encoding="utf-8"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(CONFIG),
         "--cache-dir", str(tmp_path / "cache"), "-m", "fieldtrust.store._untyped"],
        cwd=ROOT, env={**os.environ, "MYPYPATH": str(tree)},
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    errors = [line for line in result.stdout.splitlines() if ": error: " in line]
    assert len(errors) == 2, result.stdout
    # Strict, as configured for the library: an unannotated function is an error.
    assert "fieldtrust/store/_untyped.py:1: error" in errors[0]
    assert "[no-untyped-def]" in errors[0]
    assert "fieldtrust/store/_untyped.py:5: error" in errors[1]
    assert "[assignment]" in errors[1]
