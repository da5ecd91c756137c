"""Fixtures: the real ``codex exec-server`` over stdio and over a loopback websocket."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agent_fleet.execserver import ExecServerClient, serve_websocket


@pytest.fixture
async def ws_url() -> AsyncIterator[str]:
    """A fresh ``codex exec-server --listen ws://127.0.0.1:0``; its URL."""
    async with serve_websocket() as url:
        yield url


@pytest.fixture(params=["stdio", "websocket"])
async def client(request: pytest.FixtureRequest) -> AsyncIterator[ExecServerClient]:
    """A client of the real exec-server, once over stdio and once over a websocket."""
    if request.param == "stdio":
        async with ExecServerClient.spawn() as c:
            yield c
    else:
        async with serve_websocket() as url, ExecServerClient.connect(url) as c:
            yield c
