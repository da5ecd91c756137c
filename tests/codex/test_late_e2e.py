"""Requests that time out under overload, against the real codex app-server (issue 29 item 8).

With a request timeout far below codex's answering time, ``thread/start`` and ``turn/start`` time out
after codex got them: codex starts the thread and the turn all the same and answers late. Before,
each late answer was logged as a protocol error (``unknown_response_id``) and the work ran on with
nobody to stop it; now it is undone: no thread stays loaded and no turn keeps running for a session
that does not exist."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.errors import AgentFleetError, RPCError
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e


async def test_work_codex_did_for_a_request_that_timed_out_is_undone(
    codex_options: CodexOptions,
    scripted_model: ScriptedModelServer,
    workspace: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scripted_model.responder = lambda request: Reply.text("slow answer", delay=20)  # turns stay running
    caplog.set_level(logging.INFO, logger="agent_fleet")
    async with CodexProvider(dataclasses.replace(codex_options, rpc_timeout=0.001)) as provider:
        spawned = await asyncio.gather(
            *(provider.spawn(Spec(prompt=f"task {n}", cwd=workspace)) for n in range(6)),
            return_exceptions=True,
        )
        live = {h.session_id for h in spawned if not isinstance(h, BaseException)}
        assert any(isinstance(h, AgentFleetError) for h in spawned), "the timeouts happened"
        conn = provider.connection

        async def orphans() -> list[str]:
            """Threads codex keeps loaded for no live session, with a turn still running."""
            loaded = (await conn.request("thread/loaded/list", {}, timeout=30))["data"]
            out = []
            for thread_id in set(loaded) - live:
                try:
                    read = await conn.request(
                        "thread/read", {"threadId": thread_id, "includeTurns": True}, timeout=30
                    )
                except RPCError:  # (codex cannot list the turns of a thread that never ran one)
                    turns = []
                else:
                    turns = read["thread"].get("turns") or []
                if not turns or any(t.get("status") == "inProgress" for t in turns):
                    out.append(thread_id)  # started for nobody (archived: no longer loaded), or running
            return out

        for _ in range(300):  # codex's state, polled: the undoing runs in the background
            left = await orphans()
            if not left:
                break
            await asyncio.sleep(0.2)
        assert not left, f"threads still loaded for nobody: {left}"
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "unknown_response_id" in m], messages
    assert any("late response to" in m for m in messages)
