"""Requests codex got but nobody waits for any more, against the real codex app-server (issue 29 item 8).

A caller that stops waiting after its ``thread/start`` or ``turn/start`` was written (a timeout under
overload, a cancellation) leaves codex doing the work all the same: it starts the thread, or the turn,
and answers late. Before, each late answer was logged as a protocol error (``unknown_response_id``)
and the work ran on with nobody to stop it; now it is undone: no thread stays loaded and no turn keeps
running for a session that does not exist."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.errors import RPCError
from agent_fleet.jsonrpc import Connection
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e


async def _orphans(conn: Connection, live: set[str]) -> list[str]:
    """Threads codex keeps loaded for no live session: started for nobody, or with a turn running."""
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
            out.append(thread_id)
    return out


@pytest.mark.parametrize("cancelled_after", ["thread/start", "turn/start"])
async def test_work_codex_did_for_a_request_nobody_waits_for_is_undone(
    cancelled_after: str,
    codex_options: CodexOptions,
    scripted_model: ScriptedModelServer,
    workspace: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    scripted_model.responder = lambda request: Reply.text("slow answer", delay=20)  # turns stay running
    caplog.set_level(logging.INFO, logger="agent_fleet")
    async with CodexProvider(codex_options) as provider:
        conn = provider.connection
        spawning = asyncio.create_task(provider.spawn(Spec(prompt="task", cwd=workspace)))
        for _ in range(300_000):  # the moment it is written (counted), codex has it ...
            if conn.requests_sent[cancelled_after]:
                break
            await asyncio.sleep(0)
        spawning.cancel()  # ... and its caller stops waiting
        with pytest.raises(asyncio.CancelledError):
            await spawning
        late = f"late response to {cancelled_after}"
        for _ in range(300):  # codex's state, polled: the answer comes late, the undoing runs after it
            answered = any(late in r.getMessage() for r in caplog.records)
            left = await _orphans(conn, set())
            if answered and not left:
                break
            await asyncio.sleep(0.1)
        assert answered and not left, f"threads still loaded for nobody: {left}"
    assert not [r for r in caplog.records if "unknown_response_id" in r.getMessage()]
