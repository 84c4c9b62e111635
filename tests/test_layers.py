"""The import graph as pyproject.toml states it: import-linter's contracts.

Layers, low to high: errors; store; calibration | ingest; governance |
sampling | labels | extraction | settings; demo; cli | dashboard; bench
(packages on one line are siblings and import none of each other). Two
forbidden contracts: nothing below the UIs imports the dashboard, the CLI,
Streamlit or plotly, and no production package imports the demo (but the
demo's own commands). The contracts run on the packages laid out under their
installed names (tests/installed_layout.py).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from installed_layout import ROOT, build

CONFIG = ROOT / "pyproject.toml"


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        "from importlinter.cli import lint_imports\n"
        f"sys.exit(lint_imports(config_filename={str(CONFIG)!r}, no_cache=True, no_logo=True))\n"
    )
    # In the tree, so `fieldtrust` is the laid-out package, not the checkout's folder.
    return subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True,
                          text=True, check=False)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("layout") / "tree")


def test_the_layers_hold(tree: Path) -> None:
    result = _lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(_contracts())} kept, 0 broken" in result.stdout


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads(CONFIG.read_text(encoding="utf-8"))
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


@pytest.mark.parametrize(
    ("module", "imports", "shown"),
    [
        ("fieldtrust/store/_leak.py", "from fieldtrust.governance import acts",
         "fieldtrust.store._leak -> fieldtrust.governance.acts"),
        ("fieldtrust/calibration/_leak.py", "import fieldtrust.extraction.client",
         "fieldtrust.calibration._leak -> fieldtrust.extraction.client"),
        ("fieldtrust/dashboard/_leak.py", "import bench.run",
         "fieldtrust.dashboard._leak -> bench.run"),
        ("fieldtrust/labels/_leak.py", "from fieldtrust.sampling import draw",
         "fieldtrust.labels._leak -> fieldtrust.sampling.draw"),
        ("fieldtrust/cli/_leak.py", "import fieldtrust.dashboard.render",
         "fieldtrust.cli._leak -> fieldtrust.dashboard.render"),
        ("fieldtrust/dashboard/_leak.py", "import fieldtrust.demo.drawn_documents",
         "fieldtrust.dashboard._leak -> fieldtrust.demo.drawn_documents"),
        ("fieldtrust/sampling/_leak.py", "import streamlit",
         "fieldtrust.sampling._leak -> streamlit"),
        ("fieldtrust/governance/_leak.py", "import fieldtrust.settings",
         "fieldtrust.governance._leak -> fieldtrust.settings"),
    ],
    ids=["store-imports-governance", "siblings-import-each-other", "dashboard-imports-bench",
         "labels-imports-sampling", "cli-imports-dashboard", "dashboard-imports-demo",
         "library-imports-streamlit", "library-reads-settings"],
)
def test_an_import_of_a_higher_layer_breaks_the_contract(
    tmp_path: Path, module: str, imports: str, shown: str
) -> None:
    tree = build(tmp_path / "tree")
    (tree / module).write_text(f"{imports}\n", encoding="utf-8")
    result = _lint(tree)
    assert result.returncode == 1, result.stdout
    assert ", 0 broken" not in result.stdout
    assert shown in result.stdout


def test_every_package_has_a_layer(tree: Path) -> None:
    (contract,) = [c for c in _contracts() if c["type"] == "layers"]
    layers = contract["layers"]
    assert isinstance(layers, list)
    layered = {name.strip() for layer in layers for name in layer.split("|")}
    found = {f"fieldtrust.{p.stem}" for p in (tree / "fieldtrust").iterdir()
             if p.is_dir() or (p.suffix == ".py" and p.stem != "__init__")}
    assert found | {"bench"} == layered


def test_the_package_root_imports_nothing() -> None:
    # Every layer reads the version from it (store.provenance): it must stay below them all.
    tree = ast.parse((ROOT / "fieldtrust" / "__init__.py").read_text(encoding="utf-8"))
    assert not [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]


#: Folders of the code a user runs in production: the library, the CLI and the dashboard.
PRODUCTION = ("store", "ingest", "calibration", "extraction", "labels", "sampling",
              "governance", "dashboard", "fieldtrust/cli", "fieldtrust/settings.py",
              "fieldtrust/errors.py")


def test_no_production_module_reads_the_demo_truth() -> None:
    # The demo's hidden truth is the demo's table (fieldtrust.demo.truth): every
    # report, page and command outside the demo works from labels only.
    files = [path for entry in PRODUCTION for path in
             ([ROOT / entry] if entry.endswith(".py") else sorted((ROOT / entry).rglob("*.py")))]
    assert len(files) > 100
    reading = re.compile(r"\b(FROM|JOIN|INTO)\s+demo_truth\b", re.IGNORECASE)
    found = [str(path.relative_to(ROOT)) for path in files
             if reading.search(path.read_text(encoding="utf-8"))]
    assert found == []
    assert reading.search((ROOT / "fieldtrust/demo/truth.py").read_text(encoding="utf-8"))
