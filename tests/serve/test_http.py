"""The daemon's HTTP surface, hermetic (no agent runs): Host names (DNS rebinding), security headers on
every answer, 405 with the whole ``Allow``, the time to read a request's head (issue 28 items 4, 5, 7, 14)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from agent_fleet.serve import Daemon, ServeConfig
from agent_fleet.serve._guard import Hosts

from .conftest import TOKEN, MakeDaemon, client


@pytest.mark.parametrize(
    ("bind", "extra", "host", "allowed"),
    [
        ("127.0.0.1", (), "127.0.0.1:8765", True),
        ("127.0.0.1", (), "localhost:8765", True),
        ("127.0.0.1", (), "LOCALHOST", True),
        ("127.0.0.1", (), "[::1]:8765", True),
        ("127.0.0.1", (), "127.1.2.3", True),
        ("127.0.0.1", (), "evil.example", False),  # a rebound name pointing at 127.0.0.1
        ("127.0.0.1", (), "evil.example:8765", False),
        ("127.0.0.1", (), "localhost.evil.example", False),
        ("127.0.0.1", (), "10.0.0.5", False),
        ("127.0.0.1", (), "", False),
        ("127.0.0.1", ("fleet.corp.example",), "fleet.corp.example:443", True),
        ("127.0.0.1", ("fleet.corp.example",), "FLEET.corp.example.", True),
        ("127.0.0.1", ("fleet.corp.example",), "other.corp.example", False),
        ("10.0.0.5", (), "10.0.0.5:8765", True),
        ("10.0.0.5", (), "10.0.0.6:8765", False),
        ("0.0.0.0", (), "192.0.2.7:8765", True),  # any address when listening on all: no name to rebind
        ("0.0.0.0", (), "[2001:db8::1]:8765", True),
        ("0.0.0.0", (), "evil.example", False),
        ("::", (), "evil.example", False),
    ],
)
def test_host_names_the_daemon_serves(bind: str, extra: tuple[str, ...], host: str, allowed: bool) -> None:
    assert Hosts(bind, extra).allows(host.encode()) is allowed
    assert Hosts(bind, extra).allows(None) is False


async def test_a_rebound_host_name_is_refused_before_the_token_is_looked_at(make_daemon: MakeDaemon) -> None:
    """DNS rebinding: a page of evil.example resolving to 127.0.0.1 must not reach the API."""
    daemon = await make_daemon()
    async with client(daemon) as http:
        for path in ("/healthz", "/v1/sessions", "/", "/login"):
            refused = await http.get(path, headers={"Host": "evil.example"})
            assert refused.status_code == 400, path
            assert refused.json()["error"]["code"] == "bad_host"
        assert (
            await http.get("/v1/sessions", headers={"Host": f"localhost:{daemon.port}"})
        ).status_code == 200


async def test_an_allowed_host_name_for_a_proxy(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon(allowed_hosts=("fleet.corp.example",))
    async with client(daemon) as http:
        assert (await http.get("/v1/info", headers={"Host": "fleet.corp.example"})).status_code == 200
        assert (await http.get("/v1/info", headers={"Host": "evil.example"})).status_code == 400


async def test_every_answer_carries_the_security_headers(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon()
    async with client(daemon) as http, client(daemon, token=None) as anonymous:
        answers = [
            await http.get("/"),
            await anonymous.get("/login"),
            await http.get("/v1/sessions"),
            await anonymous.get("/v1/sessions"),  # a 401 too
            await http.get("/healthz", headers={"Host": "evil.example"}),  # and a 400
        ]
    for answer in answers:
        assert answer.headers["x-frame-options"] == "DENY", answer.url
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]
    dashboard, login = (
        answers[0].headers["content-security-policy"],
        answers[1].headers["content-security-policy"],
    )
    assert "script-src 'sha256-" in dashboard and "'unsafe-inline'" not in dashboard
    assert "script-src 'none'" in login and "form-action 'self'" in login


@pytest.mark.parametrize(
    ("path", "methods"),
    [
        ("/v1/sessions", {"GET", "HEAD", "POST"}),
        ("/v1/batches", {"GET", "HEAD", "POST"}),
        ("/login", {"GET", "HEAD", "POST"}),
        ("/v1/sessions/x/stop", {"POST"}),
        ("/v1/sessions/x", {"GET", "HEAD"}),
    ],
)
async def test_a_method_a_path_does_not_take_is_a_405_naming_all_it_does(
    make_daemon: MakeDaemon, path: str, methods: set[str]
) -> None:
    daemon = await make_daemon()
    async with client(daemon) as http:
        for method in ("OPTIONS", "DELETE", "PUT", "PATCH"):
            answer = await http.request(method, path)
            assert answer.status_code == 405, (method, path)
            assert set(answer.headers["allow"].replace(" ", "").split(",")) == methods


async def _trickle(port: int, stop: asyncio.Event) -> float:
    """A connection sending its request head one byte at a time; seconds until the daemon closed it."""
    started = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 10_000
    try:
        for byte in head:
            writer.write(bytes([byte]))
            await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(1), timeout=0.2) == b"":
                    return time.monotonic() - started
            except TimeoutError:
                pass
            if stop.is_set():
                break
    except (ConnectionError, OSError):
        return time.monotonic() - started
    finally:
        writer.close()
    return float("inf")


async def test_a_request_head_read_too_slowly_is_cut_off(make_daemon: MakeDaemon) -> None:
    """Slowloris: five connections trickling header bytes stayed open 90 s (issue 28 item 7)."""
    daemon = await make_daemon(head_timeout=1.0)
    stop = asyncio.Event()
    async with asyncio.timeout(30):
        held = await asyncio.gather(*(_trickle(daemon.port, stop) for _ in range(5)))
    stop.set()
    assert all(seconds < 5 for seconds in held), held
    async with client(daemon) as http:  # the daemon still serves
        assert (await http.get("/healthz")).status_code == 200


def test_the_serve_command_takes_allowed_hosts(
    tmp_path: Path, token_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    import agent_fleet.serve
    from agent_fleet.cli import cli
    from agent_fleet.errors import UsageError

    seen: list[ServeConfig] = []

    def daemon(config: ServeConfig) -> Daemon:
        seen.append(config)
        raise UsageError("stop here")

    monkeypatch.setattr(agent_fleet.serve, "Daemon", daemon)
    argv = ["serve", "--state-dir", str(tmp_path / "s"), "--token-file", str(token_file)]
    result = CliRunner().invoke(cli, [*argv, "--allowed-host", "fleet.corp.example"])
    assert result.exit_code == 2, result.output
    assert tuple(seen[0].allowed_hosts) == ("fleet.corp.example",)


__all__ = ["TOKEN", "httpx"]


async def test_accepted_connections_do_not_wait_for_delayed_acks(make_daemon: MakeDaemon) -> None:
    """Nagle on every keep-alive connection (issue 28 item 15): the listening socket was made with
    protocol 0, so asyncio never set TCP_NODELAY on what it accepted."""
    import socket

    daemon = await make_daemon()
    async with client(daemon) as http:
        assert (await http.get("/v1/info")).status_code == 200
        server = daemon._server
        assert server is not None
        sockets = [p.transport.get_extra_info("socket") for p in server.server_state.connections]
        assert sockets
        for sock in sockets:
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1


async def test_follow_takes_only_what_the_document_says(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon()
    daemon.store.add_session("s1", "codex", {"prompt": "p"})  # a recorded session: no agent runs
    daemon.store.update("s1", state="idle")
    async with client(daemon) as http:
        for value in ("null", "yes", ""):
            answer = await http.get("/v1/sessions/s1/events", params={"follow": value})
            assert answer.status_code == 400, value
        assert (await http.get("/v1/sessions/s1/events", params={"follow": "0"})).status_code == 200
        assert (await http.get("/v1/sessions/s1/events", params={"nope": "1"})).status_code == 400
