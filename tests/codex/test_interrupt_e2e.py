"""``Handle.interrupt()`` against the real codex binary: the turn stops, the session stays (issue 32)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_fleet import Error, Spec, ToolUse
from agent_fleet.codex import CodexExecProvider, CodexOptions, CodexProvider
from agent_fleet.errors import Unsupported
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e  # runs the real binary


@pytest.mark.protocol_smoke
async def test_interrupt_then_send_continues_the_thread(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.exec("sleep 30"), Reply.text("after the interrupt"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="first question", cwd=workspace))
        async for event in handle.events():
            if isinstance(event, ToolUse) and event.name == "shell":
                await handle.interrupt()
        assert isinstance(event, Error) and event.code == "cancelled"
        assert not handle.closed
        await handle.interrupt()  # no turn running: a no-op
        await handle.send("second question")
        result = await handle.wait()
        session = handle.session_id
    assert result.text == "after the interrupt" and result.session_id == session
    last = scripted_model.requests[-1]
    assert "first question" in last.user_texts() and "second question" in last.user_texts()


async def test_exec_interrupt_then_send_resumes_the_thread(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("never seen", delay=30), Reply.text("resumed"))
    options = CodexOptions(config=codex_options.config, env=codex_options.env, skip_git_repo_check=True)
    async with CodexExecProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="first question", cwd=workspace))
        async with asyncio.timeout(60):
            await scripted_model.wait_for_request()
        await handle.interrupt()
        events = [e async for e in handle.events()]
        assert isinstance(events[-1], Error) and events[-1].code == "cancelled"
        # codex exec takes no per-turn settings: refused by name, nothing sent (issue 32)
        with pytest.raises(Unsupported, match="sandbox"):
            await handle.send("refused", sandbox="read-only")
        with pytest.raises(Unsupported, match="model"):
            await handle.send("refused", model="gpt-5.5")
        await handle.send("second question")
        result = await handle.wait()
    assert result.text == "resumed"
    assert "first question" in scripted_model.requests[-1].user_texts()
    assert not any("refused" in t for r in scripted_model.requests for t in r.user_texts())
