"""The approval bridge end to end: real codex asks, the policy declines `git reset --hard`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_fleet import Result, Spec, System, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.testing import Reply, ScriptedModelServer, exec_command

pytestmark = pytest.mark.e2e  # runs the real binary


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


async def test_git_reset_hard_is_declined_and_the_change_survives(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
    (repo / "work.txt").write_text("uncommitted change\n")
    _git(repo, "add", "work.txt")

    scripted_model.enqueue(
        Reply(items=(exec_command("git reset --hard"),)),
        Reply(items=(exec_command("echo harmless-ran > proof.txt"),)),
        Reply.text("done"),
    )
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="clean up", cwd=repo, sandbox="workspace-write"))
        events: list[Event] = [e async for e in handle.events()]

    assert (repo / "work.txt").read_text() == "uncommitted change\n"
    assert "work.txt" in _git(repo, "status", "--porcelain")
    denied = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert len(denied) == 1
    assert denied[0].data["rule"] == "git-reset-hard"
    assert "git reset --hard" in denied[0].data["command"]
    assert denied[0].data["reason"]
    decisions = [e.status for e in events if isinstance(e, ToolResult) and e.synthetic]
    assert decisions == ["decline", "allow_for_session"]
    assert [e.input["kind"] for e in events if isinstance(e, ToolUse) and e.synthetic] == [
        "command",
        "command",
    ]
    assert (repo / "proof.txt").read_text() == "harmless-ran\n"
    assert isinstance(events[-1], Result) and events[-1].text == "done"
    # codex told the model the command was rejected, and the turn went on
    [output] = scripted_model.requests[1].tool_outputs()
    assert "rejected" in output["output"]
