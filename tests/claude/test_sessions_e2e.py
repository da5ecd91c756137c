"""Issue 32: ``fork()`` (Claude Code's ``--fork-session``) and ``list_sessions()`` against the bundled
Claude Code CLI and the scripted Anthropic server."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.claude import ClaudeOptions, ClaudeProvider
from agent_fleet.errors import Unsupported, UsageError
from agent_fleet.testing._anthropic import AnthropicReply, ScriptedAnthropicServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def _resolved(path: Path) -> str:
    return str(path.resolve())


async def test_fork_copies_the_history_and_both_sessions_go_their_own_ways(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.text("first answer"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="first question", cwd=workspace))
        await handle.wait()
        fork = await handle.fork()
        assert fork.session_id != handle.session_id
        assert len(anthropic_server.agent_requests) == 1  # no turn runs until send()
        with pytest.raises(UsageError):
            await fork.wait()

        anthropic_server.enqueue(AnthropicReply.text("fork answer"))
        await fork.send("fork question")
        forked = await fork.wait()
        anthropic_server.enqueue(AnthropicReply.text("original answer"))
        await handle.send("original question")
        original = await handle.wait()

        listed = await provider.list_sessions()
        newest = await provider.list_sessions(limit=1)
        with pytest.raises(Unsupported):
            await provider.list_sessions(archived=True)
    assert forked.text == "fork answer" and forked.session_id == fork.session_id
    assert original.text == "original answer" and original.session_id == handle.session_id
    fork_request, original_request = anthropic_server.agent_requests[1:3]
    # the fork starts from the copy of the history ...
    assert fork_request.contains("first question") and fork_request.contains("first answer")
    assert fork_request.last_user_text.startswith("fork question")
    # ... and the original never sees the fork's turn
    assert original_request.contains("first answer") and not original_request.contains("fork question")

    by_id = {s.id: s for s in listed}
    assert {handle.session_id, fork.session_id} <= set(by_id)
    assert by_id[handle.session_id].preview.startswith("first question")
    assert by_id[handle.session_id].cwd == _resolved(workspace)
    assert by_id[handle.session_id].updated_at is not None
    assert [s.id for s in newest] == [listed[0].id] and len(listed) == 2


async def test_a_fork_runs_in_the_same_walls(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path, tmp_path: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.text("ok"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "escape.sh").write_text(f"#!/bin/sh\n(echo x > '{outside}/x') 2>/dev/null || echo denied\n")
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace))
        await handle.wait()
        fork = await handle.fork()
        anthropic_server.enqueue(AnthropicReply.bash("sh escape.sh"), AnthropicReply.text("done"))
        await fork.send("go")
        await fork.wait()
    assert not (outside / "x").exists()


async def test_list_sessions_without_any_is_empty(claude_options: ClaudeOptions) -> None:
    async with ClaudeProvider(claude_options) as provider:
        assert await provider.list_sessions() == []
        with pytest.raises(UsageError):
            await provider.list_sessions(limit=0)
