"""End-to-end smoke on the raw protocol: our JSON-RPC connection against the real codex app-server."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.codex import find_codex
from agent_fleet.jsonrpc import Connection, Notification, StreamTransport, param_key
from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e  # runs the real binary


@pytest.mark.protocol_smoke
async def test_initialize_thread_turn_reaches_completed(
    codex_env: CodexTestEnv, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("scripted hello from the model"))
    proc = await asyncio.create_subprocess_exec(
        str(find_codex()),
        "app-server",
        *codex_env.codex_args(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env=codex_env.full_env(),
    )
    assert proc.stdin is not None and proc.stdout is not None
    conn = Connection(StreamTransport(proc.stdout, proc.stdin), route_key=param_key("threadId"))
    try:
        async with conn:
            init = await conn.request(
                "initialize", {"clientInfo": {"name": "smoke", "version": "0"}}, timeout=30
            )
            assert "userAgent" in init
            await conn.notify("initialized")
            started = await conn.request(
                "thread/start", {"cwd": str(workspace), "approvalPolicy": "never"}, timeout=30
            )
            thread_id = started["thread"]["id"]
            seen: list[Notification] = []
            done: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

            def on_note(msg: Notification) -> None:
                seen.append(msg)
                if msg.method == "turn/completed" and not done.done():
                    done.set_result(msg.params)

            conn.subscribe(thread_id, on_notification=on_note)
            await conn.request(
                "turn/start",
                {"threadId": thread_id, "input": [{"type": "text", "text": "say hello"}]},
                timeout=30,
            )
            completed = await asyncio.wait_for(done, 60)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    assert completed["turn"]["status"] == "completed"
    deltas = "".join(m.params["delta"] for m in seen if m.method == "item/agentMessage/delta")
    assert deltas == "scripted hello from the model"
    assert scripted_model.requests[0].last_user_text == "say hello"
