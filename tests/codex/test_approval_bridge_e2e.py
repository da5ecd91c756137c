"""The approval bridge end to end: real codex asks, the policy declines `git reset --hard`."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet import Result, Spec, System, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.testing import Reply, ScriptedModelServer, exec_command

from ._git import git

pytestmark = pytest.mark.e2e  # runs the real binary


@pytest.mark.protocol_smoke
async def test_git_reset_hard_is_declined_and_the_change_survives(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, staged_work: Path
) -> None:
    repo = staged_work

    scripted_model.enqueue(
        Reply(items=(exec_command("git reset --hard"),)),
        Reply(items=(exec_command("echo harmless-ran > proof.txt"),)),
        Reply.text("done"),
    )
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="clean up", cwd=repo, sandbox="workspace-write"))
        events: list[Event] = [e async for e in handle.events()]

    assert (repo / "work.txt").read_text() == "uncommitted change\n"
    assert "work.txt" in git(repo, "status", "--porcelain")
    denied = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert len(denied) == 1
    assert denied[0].data["rule"] == "git-reset-hard"
    assert "git reset --hard" in denied[0].data["command"]
    assert denied[0].data["reason"]
    # codex 0.163 offers accept, an exec-policy amendment and cancel (no decline, no acceptForSession):
    # the refusal goes as cancel and the turn continues as a new codex turn; the accept as accept.
    decisions = [e.status for e in events if isinstance(e, ToolResult) and e.synthetic]
    assert decisions == ["cancel", "allow_once"]
    continued = [e for e in events if isinstance(e, System) and e.subtype == "declined_turn_continued"]
    assert len(continued) == 1 and "git-reset-hard" in continued[0].data["reason"]
    assert [e.input["kind"] for e in events if isinstance(e, ToolUse) and e.synthetic] == [
        "command",
        "command",
    ]
    assert (repo / "proof.txt").read_text() == "harmless-ran\n"
    assert isinstance(events[-1], Result) and events[-1].text == "done"
    # the model was told the command was declined and why, and the work went on
    told = " ".join(scripted_model.requests[1].user_texts())
    assert "declined the command `" in told and "git reset --hard" in told and "git-reset-hard" in told
