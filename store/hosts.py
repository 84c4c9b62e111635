"""The host names the dashboard server answers, and the check every request passes first.

A browser sends the name it was asked for in the ``Host`` header. A page on
another site can make the browser reach a server on this machine by DNS
rebinding (its own name, re-pointed at 127.0.0.1), and from then on it reads
and drives the dashboard as if it were the user; the ``Host`` header is the
one thing it cannot choose, since it still names the attacker's site.
Streamlit has no host allow-list, so the dashboard's server
(:mod:`fieldtrust.dashboard.serve_main`) refuses every HTTP request and
WebSocket whose ``Host`` is not one of :func:`allowed_hosts` (checked by
:func:`host_allowed`):

* the bind address's own names, with the server's port: for a loopback
  address ``localhost``, ``127.0.0.1`` and ``[::1]``; for every interface
  (``0.0.0.0``, ``::``) those and this machine's host name; any other
  address, itself;
* the names of the ``allowed_hosts`` setting (``fieldtrust serve`` passes
  them), for a real host name or a reverse proxy: ``name`` (any port) or
  ``name:port``.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterable
from dataclasses import dataclass

from fieldtrust.errors import InputError

#: Addresses that only this machine can reach, and the names a browser uses for them.
LOOPBACK_ADDRESSES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
_EVERY_INTERFACE = frozenset({"0.0.0.0", "::", ""})
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}

REFUSAL = (
    "fieldtrust answers only its own host names: this request named another host, as a page"
    " on another site does through DNS rebinding. Open the dashboard at the address"
    " `fieldtrust serve` printed, or add this machine's real name to the allowed_hosts"
    " setting (docs/dashboard.md).\n"
)


@dataclass(frozen=True)
class AllowedHost:
    """One name the server answers; ``port`` None: on any port."""

    name: str
    port: int | None

    def __str__(self) -> str:
        return self.name if self.port is None else f"{self.name}:{self.port}"


def parse_host(text: str) -> tuple[str, int | None] | None:
    """``'Name:8501'`` -> ``('name', 8501)``, ``'[::1]'`` -> ``('[::1]', None)``; None if malformed.

    IPv6 addresses keep their brackets, as the ``Host`` header writes them.
    """
    text = text.strip().lower()
    if not text or any(c.isspace() or c in "/\\@?#," for c in text):
        return None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        name, rest = text[: end + 1], text[end + 1:]
    elif text.count(":") > 1:  # a bare IPv6 address
        return f"[{text}]", None
    else:
        name, _, port_text = text.partition(":")
        rest = f":{port_text}" if ":" in text else ""
    if not rest:
        return name, None
    if not rest.startswith(":") or not rest[1:].isdigit() or not 0 < int(rest[1:]) < 65536:
        return None
    return (name, int(rest[1:])) if name else None


def setting_hosts(setting: str) -> tuple[AllowedHost, ...]:
    """The ``allowed_hosts`` setting (``name`` or ``name:port``, comma-separated).

    Raises
    ------
    InputError
        An entry is not a host name with an optional port (a url, a path, a wildcard).
    """
    hosts = []
    for entry in (e.strip() for e in setting.split(",")):
        if not entry:
            continue
        parsed = parse_host(entry)
        if parsed is None or "*" in entry or "://" in entry:
            raise InputError(
                f"{entry[:60]!r}, which is not a host name with an optional port (like"
                " fieldtrust.example.com or fieldtrust.example.com:443)"
            )
        hosts.append(AllowedHost(*parsed))
    return tuple(hosts)


def allowed_hosts(address: str, port: int, extra: Iterable[AllowedHost] = ()) -> tuple[
        AllowedHost, ...]:
    """The names a server bound to ``address``:``port`` answers (see the module docstring)."""
    address = address.strip().lower()
    if address in LOOPBACK_ADDRESSES:
        names: list[str] = list(LOOPBACK_NAMES)
    elif address in _EVERY_INTERFACE:
        names = [*LOOPBACK_NAMES, *_machine_names()]
    else:
        parsed = parse_host(address)
        names = [parsed[0] if parsed else address]
    own = [AllowedHost(name, port) for name in dict.fromkeys(names)]
    return (*own, *(h for h in extra if h not in own))


def _machine_names() -> list[str]:
    """This machine's host name and fully qualified name, as a colleague's browser names it."""
    names = [socket.gethostname().lower()]
    with contextlib.suppress(OSError):  # no resolver: the host name alone
        names.append(socket.getfqdn().lower())
    return [name for name in names if name]


def host_allowed(header: str | None, allowed: Iterable[AllowedHost], *, scheme: str) -> bool:
    """Whether a request whose ``Host`` header is ``header`` names one of ``allowed``."""
    if header is None:
        return False
    parsed = parse_host(header)
    if parsed is None:
        return False
    name, port = parsed
    if port is None:
        port = _DEFAULT_PORTS.get(scheme, 80)
    return any(h.name == name and h.port in (None, port) for h in allowed)


def is_loopback_host(header: str | None) -> bool:
    """Whether ``Host`` header ``header`` names this machine's loopback (any port)."""
    parsed = parse_host(header or "")
    return parsed is not None and parsed[0] in LOOPBACK_NAMES
