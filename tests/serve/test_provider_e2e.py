"""The daemon's provider (real codex binary, scripted model): started on first use, one app-server child
for every session, started again after that child is killed."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.testing import Reply, ScriptedModelServer

from .conftest import MakeDaemon, client, read_events

pytestmark = pytest.mark.e2e  # runs the real binary


def _app_servers() -> set[int]:
    """Processes below this one (by parent pid, from /proc) running ``codex app-server``."""
    parents: dict[int, int] = {}
    argvs: dict[int, list[bytes]] = {}
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
            with open(f"/proc/{name}/cmdline", "rb") as f:
                argvs[int(name)] = f.read().split(b"\0")
        except OSError:
            continue
        parents[int(name)] = int(stat[stat.rindex(b")") + 2 :].split()[1])

    def mine(pid: int) -> bool:
        while pid > 1:
            pid = parents.get(pid, 0)
            if pid == os.getpid():
                return True
        return False

    def codex(argv: list[bytes]) -> bool:  # (the reaper between carries the same words further on)
        return os.path.basename(argv[0]) == b"codex" and argv[1:2] == [b"app-server"]

    return {pid for pid, argv in argvs.items() if codex(argv) and mine(pid)}


async def test_the_provider_starts_lazily_is_shared_and_comes_back_after_a_crash(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.responder = lambda request: Reply.text("here")
    before = _app_servers()
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        assert (await http.get("/v1/info")).status_code == 200
        assert (await http.get("/v1/sessions")).status_code == 200
        assert daemon.sessions.provider_pids() == {}  # nothing asked for a session yet
        assert _app_servers() == before

        async def session() -> str:
            response = await http.post("/v1/sessions", json={"prompt": "hi", "cwd": str(workspace)})
            assert response.status_code == 201, response.text
            sid = str(response.json()["session_id"])
            events = await read_events(http, sid)
            assert events[-1][1]["type"] == "Result"
            return sid

        sids = await asyncio.gather(*(session() for _ in range(4)))
        assert len(set(sids)) == 4
        [pid] = daemon.sessions.provider_pids().values()
        assert pid is not None
        assert _app_servers() - before == {pid}  # one child for all four sessions

        os.kill(pid, signal.SIGKILL)
        await session()  # on a new child: the provider restarted it (or starts it for this session)
        [again] = daemon.sessions.provider_pids().values()
        assert again not in (pid, None)
        assert _app_servers() - before == {again}
