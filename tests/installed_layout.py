"""The packages laid out under their installed names, for tools that read files.

The folders stay at the top of the repository (``store/``, ``labels/``...)
and install as ``fieldtrust.store``, ``fieldtrust.labels``... An editable
install maps the names with an import hook, which import-linter and mypy do
not follow: they walk the ``fieldtrust/`` folder and find only the CLI. This
module links every source file into a tree shaped like the installed package
(``fieldtrust/store/scope.py`` -> ``store/scope.py``), from pyproject.toml's
``package-dir``, with the unpackaged ``bench/`` beside it.

Type-check the library this way: ``python tests/installed_layout.py mypy``
(extra arguments go to mypy). Errors name files in ``build/typecheck/``,
whose ``fieldtrust/store/scope.py`` is the repository's ``store/scope.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: Folders checked with the packages that are not installed.
UNPACKAGED = ("bench",)
_KEEP = (".py", ".typed")


def package_dirs(root: Path = ROOT) -> dict[str, Path]:
    """Installed package name -> its folder in the checkout, from pyproject.toml."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapped = config["tool"]["setuptools"]["package-dir"]
    return {name: root / folder for name, folder in mapped.items()}


def build(target: Path, root: Path = ROOT) -> Path:
    """Lay out the checkout's packages in ``target`` (replaced), one symlink per file."""
    if target.exists():
        shutil.rmtree(target)
    trees = {**package_dirs(root), **{name: root / name for name in UNPACKAGED}}
    for name, folder in trees.items():
        dest = target.joinpath(*name.split("."))
        for source in folder.rglob("*"):
            relative = source.relative_to(folder)
            if (source.is_dir() or source.suffix not in _KEEP
                    or "__pycache__" in relative.parts or _mapped_elsewhere(relative, name, trees)):
                continue
            link = dest / relative
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(source)
    return target


def _mapped_elsewhere(relative: Path, name: str, trees: dict[str, Path]) -> bool:
    """Whether a file belongs to a sub-package that package-dir maps to another folder."""
    return any(other.startswith(f"{name}.") and relative.parts[0] == other.split(".")[-1]
               for other in trees if other != name)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "mypy":
        print("usage: python tests/installed_layout.py mypy [MYPY ARGUMENTS]", file=sys.stderr)
        return 2
    tree = build(ROOT / "build" / "typecheck")
    env = {**os.environ, "MYPYPATH": str(tree)}
    command = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
               *argv[1:]]
    return subprocess.run(command, cwd=ROOT, env=env, check=False).returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
