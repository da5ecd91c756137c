"""Thread management on the real binary (issue 32): rename, goals (a typed ``Goal`` event), and
``read_session`` with the session's turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet import Goal, Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.errors import UsageError
from agent_fleet.testing import Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e  # runs the real binary


@pytest.mark.protocol_smoke
async def test_rename_goals_and_read_session_with_turns(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("first"), Reply.text("second"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="first question", cwd=workspace))
        await handle.wait()
        await handle.rename("fleet task 7")
        with pytest.raises(UsageError):
            await handle.rename("  ")
        goal = await handle.set_goal("ship the fix", token_budget=5000)
        assert (goal.objective, goal.status, goal.token_budget) == ("ship the fix", "active", 5000)
        await handle.clear_goal()
        await handle.send("second question")
        events = [e async for e in handle.events()]
        info = await provider.read_session(handle.session_id)
    goals = [e for e in events if isinstance(e, Goal)]  # what codex said between the turns comes first
    assert [(g.objective, g.cleared) for g in goals][-1] == (None, True)
    assert any(g.objective == "ship the fix" for g in goals)
    assert info.name == "fleet task 7"
    assert [t.get("status") for t in info.turns] == ["completed", "completed"]
    assert any("first question" in str(t.get("items")) for t in info.turns)
