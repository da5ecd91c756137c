from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

from agent_fleet.codex import CodexOptions
from agent_fleet.contract import PermissionConfig
from agent_fleet.serve import Daemon, ServeConfig
from agent_fleet.testing import CodexTestEnv

TOKEN = "test-token-0123456789abcdef"

MakeDaemon = Callable[..., Awaitable[Daemon]]


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)  # the daemon refuses a token file others can read
    return path


@pytest.fixture
async def make_daemon(tmp_path: Path, token_file: Path, workspace: Path) -> AsyncIterator[MakeDaemon]:
    """Start daemons in this test's loop (closed at the end). Keyword arguments go to ``ServeConfig``."""
    started: list[Daemon] = []

    async def make(**kw: Any) -> Daemon:
        kw.setdefault("state_dir", tmp_path / "state")
        kw.setdefault("token_file", token_file)
        kw.setdefault("allow_roots", (workspace,))
        providers = kw.pop("providers", None)
        daemon = Daemon(ServeConfig(**kw), providers=providers)
        await daemon.start()
        started.append(daemon)
        return daemon

    yield make
    for daemon in started:
        await daemon.close()


@pytest.fixture
def codex_serve_options(codex_env: CodexTestEnv) -> dict[str, Any]:
    return {"codex": CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))}


def client(daemon: Daemon, token: str | None = TOKEN) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.AsyncClient(
        base_url=daemon.url,
        headers=headers,
        timeout=httpx.Timeout(60.0),
        limits=httpx.Limits(max_connections=None),
        verify=False,  # plain http on loopback: no CA bundle to load (~35 ms a client)
    )


async def read_events(
    http: httpx.AsyncClient,
    sid: str,
    *,
    after: int | None = None,
    limit: int | None = None,
    follow: bool = False,
) -> list[tuple[int, dict[str, Any]]]:
    """``(id, record)`` of the session's stream (stopping after ``limit`` events when given)."""
    headers = {"Last-Event-ID": str(after)} if after is not None else {}
    params = {"follow": "1"} if follow else {}
    out: list[tuple[int, dict[str, Any]]] = []
    async with aconnect_sse(http, "GET", f"/v1/sessions/{sid}/events", headers=headers, params=params) as src:
        assert src.response.status_code == 200
        async for sse in src.aiter_sse():
            if sse.event != "event":
                continue
            out.append((int(sse.id), json.loads(sse.data)))
            if limit is not None and len(out) >= limit:
                break
    return out


def ask_permission() -> dict[str, Any]:
    return {"default": "ask"}


def page_data(page: str) -> dict[str, Any]:
    """The data a dashboard page shows (its JSON data block)."""
    start = page.index('<script type="application/json" id="data">') + len(
        '<script type="application/json" id="data">'
    )
    data: dict[str, Any] = json.loads(page[start : page.index("</script>", start)])
    return data


__all__ = ["TOKEN", "PermissionConfig", "ask_permission", "client", "page_data", "read_events"]
