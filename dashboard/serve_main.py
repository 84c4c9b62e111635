"""``python -m fieldtrust.dashboard.serve_main run app.py ...``: Streamlit, with no outside lookups.

``fieldtrust serve`` runs the dashboard through this instead of ``python -m
streamlit``. Streamlit asks an outside service (checkip.amazonaws.com) for the
machine's public address when it listens on every interface, and again to
vet a browser's origin; a dashboard on a private network must not tell anyone
it is running. Usage statistics are off by the command line
(``--browser.gatherUsageStats false``).
"""

from __future__ import annotations

from streamlit import net_util
from streamlit.web import cli


def _no_outside_lookup() -> str | None:
    """The machine's public address is never looked up: unknown."""
    return None


def main() -> None:
    """Start Streamlit's command line with the public-address lookup replaced."""
    net_util.get_external_ip = _no_outside_lookup
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
