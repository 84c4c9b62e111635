"""The host names a dashboard server answers (store.hosts), and the command that starts it."""

from __future__ import annotations

import pytest
from fieldtrust.store.hosts import (
    AllowedHost,
    allowed_hosts,
    host_allowed,
    is_loopback_host,
    parse_host,
    setting_hosts,
)

from fieldtrust.cli.serve_cmds import streamlit_command
from fieldtrust.errors import InputError
from fieldtrust.settings import load_settings


@pytest.mark.parametrize(("text", "parsed"), [
    ("localhost:8501", ("localhost", 8501)),
    ("LocalHost", ("localhost", None)),
    ("[::1]:8501", ("[::1]", 8501)),
    ("::1", ("[::1]", None)),
    ("fieldtrust.example.com", ("fieldtrust.example.com", None)),
    ("evil.example:0", None),
    ("evil.example:99999", None),
    ("evil.example:80x", None),
    ("a b", None),
    ("user@evil.example", None),
    ("evil.example/path", None),
    ("", None),
    ("[::1", None),
])
def test_host_headers_parse_to_a_name_and_a_port(text: str, parsed: object) -> None:
    assert parse_host(text) == parsed


def test_a_loopback_server_answers_its_loopback_names_on_its_port_only() -> None:
    allowed = allowed_hosts("127.0.0.1", 8501)
    assert [str(h) for h in allowed] == ["localhost:8501", "127.0.0.1:8501", "[::1]:8501"]
    assert host_allowed("localhost:8501", allowed, scheme="http")
    assert host_allowed("[::1]:8501", allowed, scheme="ws")
    assert not host_allowed("localhost:8502", allowed, scheme="http")
    assert not host_allowed("evil.example:8501", allowed, scheme="http")
    assert not host_allowed("localhost", allowed, scheme="http")  # port 80
    assert not host_allowed(None, allowed, scheme="http")


def test_names_from_the_setting_are_added_with_or_without_a_port() -> None:
    extra = setting_hosts("fieldtrust.example.com, proxy.example.com:443")
    assert extra == (AllowedHost("fieldtrust.example.com", None),
                     AllowedHost("proxy.example.com", 443))
    allowed = allowed_hosts("10.0.0.5", 8501, extra)
    assert [str(h) for h in allowed] == ["10.0.0.5:8501", "fieldtrust.example.com",
                                         "proxy.example.com:443"]
    assert host_allowed("fieldtrust.example.com", allowed, scheme="https")
    assert host_allowed("fieldtrust.example.com:8501", allowed, scheme="http")
    assert host_allowed("proxy.example.com", allowed, scheme="https")
    assert not host_allowed("proxy.example.com", allowed, scheme="http")
    assert not host_allowed("127.0.0.1:8501", allowed, scheme="http")


def test_every_interface_answers_loopback_and_this_machines_names() -> None:
    import socket

    names = {h.name for h in allowed_hosts("0.0.0.0", 8501)}
    assert {"localhost", "127.0.0.1", "[::1]", socket.gethostname().lower()} <= names


@pytest.mark.parametrize("bad", ["https://fieldtrust.example.com", "*.example.com",
                                 "host/path", "host:port"])
def test_a_setting_that_is_not_a_host_name_is_refused(bad: str) -> None:
    with pytest.raises(InputError, match=r"setting allowed_hosts \(from FIELDTRUST_ALLOWED_HOSTS\)"
                       r": .* which is not a host name"):
        load_settings(environ={"FIELDTRUST_ALLOWED_HOSTS": bad}, config_file="/nonexistent")


def test_loopback_names_are_told_apart() -> None:
    assert is_loopback_host("localhost:8501") and is_loopback_host("[::1]:1")
    assert not is_loopback_host("evil.example:8501") and not is_loopback_host("")


def test_serve_keeps_xsrf_and_cross_origin_protection_on_and_passes_the_names() -> None:
    command = streamlit_command("s.duckdb", 8501, extra_hosts="fieldtrust.example.com")
    assert command[command.index("--server.enableXsrfProtection") + 1] == "true"
    assert command[command.index("--server.enableCORS") + 1] == "true"
    assert command[command.index("--allowed-hosts") + 1] == "fieldtrust.example.com"
    assert command.index("--allowed-hosts") < command.index("run")
