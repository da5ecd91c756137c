"""`agent-fleet run --provider claude`: the bundled Claude Code CLI against the scripted Anthropic API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import AnthropicReply, ScriptedAnthropicServer, scripted_claude_env


@pytest.mark.e2e
def test_run_with_the_claude_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedAnthropicServer(
        [
            AnthropicReply.bash("echo from-claude > proof.txt"),
            AnthropicReply.bash("git reset --hard"),
            AnthropicReply.text("all done"),
        ]
    ) as server:
        for key, value in scripted_claude_env(server, tmp_path / "claude-home").items():
            monkeypatch.setenv(key, value)
        result = CliRunner().invoke(
            cli,
            ["run", "write the proof", "--provider", "claude", "--cwd", str(work), "--json"],
            catch_exceptions=False,
        )
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.output.splitlines() if line.startswith("{")]
    summary = records[-1]
    assert summary["status"] == "succeeded"
    denied = [r for r in records if r.get("type") == "System" and r.get("subtype") == "approval_denied"]
    assert denied and denied[0]["data"]["rule"] == "git-reset-hard"
    assert (work / "proof.txt").read_text() == "from-claude\n"


@pytest.mark.e2e
def test_the_run_header_says_the_policy_is_the_only_guard_without_claudes_sandbox(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with ScriptedAnthropicServer([AnthropicReply.text("nothing to do")]) as server:
        for key, value in scripted_claude_env(server, tmp_path / "claude-home").items():
            monkeypatch.setenv(key, value)
        args = ["run", "look", "--provider", "claude", "--cwd", str(work), "--sandbox", "danger-full-access"]
        result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "sandbox: OFF (danger-full-access)" in result.output
    assert "the approval policy is the only guard" in result.output
