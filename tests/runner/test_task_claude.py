"""``run_task`` with ``provider_name="claude"`` and ``ClaudeOptions`` passed through the runner: the
bundled Claude Code CLI against the scripted Anthropic API, configured only by the options."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.claude import ClaudeOptions
from agent_fleet.contract import Spec
from agent_fleet.runner import GateConfig, Task, TaskEvent, run_task
from agent_fleet.testing import AnthropicReply, ScriptedAnthropicServer, scripted_claude_env

pytestmark = pytest.mark.e2e


async def test_run_task_with_claude_options(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    events: list[TaskEvent] = []
    with ScriptedAnthropicServer(
        [AnthropicReply.bash("echo from-claude > proof.txt"), AnthropicReply.text("all done")]
    ) as server:
        # Only the options carry the endpoint, key and home: without them the CLI could not reach it.
        options = ClaudeOptions(
            env=scripted_claude_env(server, tmp_path / "claude-home"), model="claude-scripted-model"
        )
        result = await run_task(
            Task(spec=Spec(prompt="write the proof", cwd=work), gate=GateConfig(command="test -f proof.txt")),
            provider_name="claude",
            options=options,
            on_event=events.append,
        )
        models = {r.model for r in server.agent_requests}
    assert result.status == "succeeded", result.reason
    assert result.gate is not None and result.gate.passed
    assert (work / "proof.txt").read_text() == "from-claude\n"
    assert models == {"claude-scripted-model"}  # ClaudeOptions.model reached the CLI
    assert result.commands == 1
    assert any(e.source == "agent" for e in events) and result.transcript is None
