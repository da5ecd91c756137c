"""Every server the project starts listens on loopback only: the exec-server websocket (and the
stdio one, which must not listen at all) and the scripted test servers."""

from __future__ import annotations

import os

import pytest

from agent_fleet.execserver import ExecServerClient, serve_websocket
from agent_fleet.testing import ScriptedAnthropicServer, ScriptedModelServer

from .sockets import descendants, listening


@pytest.mark.e2e
async def test_the_exec_server_websocket_listens_on_loopback_only() -> None:
    before = {(i.host, i.port) for i in listening(descendants(os.getpid()))}
    async with serve_websocket() as url:
        port = int(url.rsplit(":", 1)[1])
        new = [i for i in listening(descendants(os.getpid())) if (i.host, i.port) not in before]
    assert port in {i.port for i in new}, new  # the server's own socket was seen
    assert [i for i in new if not i.loopback] == []


@pytest.mark.e2e
async def test_the_stdio_exec_server_listens_nowhere() -> None:
    before = {(i.host, i.port) for i in listening(descendants(os.getpid()))}
    async with ExecServerClient.spawn():
        new = [i for i in listening(descendants(os.getpid())) if (i.host, i.port) not in before]
    assert new == []


def test_the_scripted_servers_listen_on_loopback_only() -> None:
    with ScriptedModelServer() as model, ScriptedAnthropicServer() as anthropic:
        mine = {i.port: i for i in listening([os.getpid()])}
        for server in (model, anthropic):
            port = int(server.url.split(":")[2].split("/")[0])
            assert mine[port].loopback, mine[port]
