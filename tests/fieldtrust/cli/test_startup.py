"""`fieldtrust` starts fast: heavy packages load only inside the commands that use them.

scipy, scikit-learn, streamlit, plotly and the anthropic SDK take seconds to
import between them; a command that does not need them (``--help``, ``info``,
``settings``) must not pay for them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("scipy", "sklearn", "streamlit", "plotly", "anthropic")


def _loaded_after(code: str) -> list[str]:
    """Top-level packages among HEAVY that a fresh interpreter holds after running ``code``."""
    probe = (
        f"{code}\n"
        "import sys\n"
        f"loaded = sorted({{n.split('.')[0] for n in sys.modules}} & {set(HEAVY)!r})\n"
        "print('HEAVY:' + ','.join(loaded))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, check=True,
        timeout=120,
    )
    (line,) = [line for line in result.stdout.splitlines() if line.startswith("HEAVY:")]
    return [name for name in line.removeprefix("HEAVY:").split(",") if name]


def test_importing_the_cli_loads_no_heavy_package() -> None:
    assert _loaded_after("import fieldtrust.cli.main") == []


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["info", "--help"], ["calibrate", "--help"], ["serve", "--help"],
     ["settings"]],
)
def test_commands_that_need_no_heavy_package_load_none(argv: list[str]) -> None:
    code = (
        "from fieldtrust.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    assert _loaded_after(code) == []


def test_the_probe_sees_a_heavy_import() -> None:
    # The check above could pass by never seeing anything; it does see scipy.
    assert _loaded_after("import scipy.stats") == ["scipy"]


def test_info_on_a_store_loads_no_heavy_package(db_path: Path) -> None:
    code = (
        "from fieldtrust.cli.main import main\n"
        "try:\n"
        f"    main(['--db', {str(db_path)!r}, 'info'])\n"
        "except SystemExit as exc:\n"
        "    assert exc.code in (0, None), exc.code\n"
    )
    assert _loaded_after(code) == []
