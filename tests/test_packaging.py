"""`pip install fieldtrust` installs one name, and the wheel works outside the checkout.

The repository keeps its folders at the top level (``store/``, ``labels/``...);
they install as ``fieldtrust.store``, ``fieldtrust.labels``... Several of the
short names belong to other distributions on the package index, so installing
them would break a user's environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Checkout folder -> installed package.
FOLDERS = {
    "fieldtrust": "fieldtrust",
    "store": "fieldtrust/store",
    "ingest": "fieldtrust/ingest",
    "calibration": "fieldtrust/calibration",
    "extraction": "fieldtrust/extraction",
    "labels": "fieldtrust/labels",
    "sampling": "fieldtrust/sampling",
    "governance": "fieldtrust/governance",
    "dashboard": "fieldtrust/dashboard",
}


# One worker runs this module: its module fixtures are built once, not once a worker.
pytestmark = pytest.mark.xdist_group("packaging")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # Without build isolation: the test extras bring setuptools, so nothing is fetched.
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--disable-pip-version-check", "-w", str(out), str(ROOT)],
        check=True, capture_output=True, text=True,
    )
    (built,) = out.glob("fieldtrust-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, set[str]]:
    """A fresh virtualenv with the wheel; returns its python and the names it added."""
    env_dir = tmp_path_factory.mktemp("venv")
    # The dependencies come from this interpreter's site-packages (no downloads);
    # fieldtrust itself comes from the wheel only (--no-deps, and checked below).
    venv.create(env_dir, system_site_packages=True, with_pip=True)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip())
    before = _top_level_names(site)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps",
         "--disable-pip-version-check", str(wheel)],
        check=True, capture_output=True, text=True,
    )
    return python, _top_level_names(site) - before


def _top_level_names(site: Path) -> set[str]:
    names = set()
    for entry in site.iterdir():
        if entry.name.endswith((".dist-info", ".pth")) or entry.name.startswith("__"):
            continue
        names.add(entry.name.removesuffix(".py"))
    return names


def test_the_wheel_holds_only_the_fieldtrust_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"fieldtrust"}


def test_every_module_of_the_checkout_is_in_the_wheel(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        packed = set(archive.namelist())
    expected = {
        f"{installed}/{path.relative_to(ROOT / folder).as_posix()}"
        for folder, installed in FOLDERS.items()
        for path in (ROOT / folder).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert sorted(expected - packed) == []


def test_installing_adds_one_top_level_name(installed: tuple[Path, set[str]]) -> None:
    _, added = installed
    assert added == {"fieldtrust"}


def test_the_installed_cli_runs_outside_the_checkout(
    installed: tuple[Path, set[str]], tmp_path: Path
) -> None:
    python, _ = installed
    env = {k: v for k, v in os.environ.items() if not k.startswith("FIELDTRUST_")}
    where = subprocess.run(
        [str(python), "-c",
         "import fieldtrust.store, fieldtrust.dashboard.app_pages as p;"
         " print(fieldtrust.store.__file__); print(p.__file__)"],
        cwd=tmp_path, env=env, check=True, capture_output=True, text=True,
    ).stdout.split()
    assert all(str(python.parents[1]) in path for path in where), where

    cli = python.parent / "fieldtrust"
    help_text = subprocess.run(
        [str(cli), "--help"], cwd=tmp_path, env=env, check=True, capture_output=True, text=True
    ).stdout
    assert "Usage: fieldtrust" in help_text
    built = subprocess.run(
        [str(cli), "--db", "demo.duckdb", "demo", "--rows", "2000"],
        cwd=tmp_path, env=env, capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stderr
    assert "labels from 8 weekly audit samples" in built.stdout
    assert (tmp_path / "demo.duckdb").stat().st_size > 0
