"""Issue 29 item 2: a shared provider lets go of every finished session (archived: the app-server gives
its memory back), review sessions included; a stopped task's session stays loaded for its resume."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.runner import GateConfig, ReviewConfig, Task, TaskEvent, run_task
from agent_fleet.testing import ScriptedModelServer

from .scripted import ScriptedAgent, commit, run, write_file

pytestmark = pytest.mark.e2e


def _task(repo: Path, key: str, **kw: object) -> Task:
    spec = Spec(prompt=f"[task:{key}] implement it", cwd=repo, sandbox="workspace-write")
    return Task(id=key, spec=spec, **kw)  # type: ignore[arg-type]


async def test_finished_sessions_and_reviews_are_archived_a_stopped_one_is_not(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.responder = ScriptedAgent(
        {"done": [[write_file("d.txt", "d"), commit("d")]], "held": [[run("sleep 30")]]}
    )
    async with CodexProvider(codex_options) as provider:
        reviewed = _task(repo, "done", gate=GateConfig(require_commit=True), review=ReviewConfig())
        done = await run_task(reviewed, provider=provider)
        assert done.status == "succeeded", done.reason
        assert done.review is not None and done.session_id is not None

        stop = asyncio.Event()

        def on_event(event: TaskEvent) -> None:
            if "sleep 30" in repr(event.event):
                stop.set()

        held = await asyncio.wait_for(
            run_task(_task(repo, "held"), provider=provider, on_event=on_event, stop=stop), 120
        )
        assert held.status == "cancelled" and held.session_id is not None

        live = {s.id for s in await provider.list_sessions()}
        archived = {s.id for s in await provider.list_sessions(archived=True)}
    assert {done.session_id, done.review.session_id} <= archived
    assert done.session_id not in live and done.review.session_id not in live
    assert held.session_id in live and held.session_id not in archived


async def test_a_provider_run_task_owns_keeps_its_session_listed(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    """`agent-fleet run`: the provider ends with the task, so there is no memory to give back and the
    session stays where `codex resume` finds it."""
    scripted_model.responder = ScriptedAgent({"one": [[write_file("o.txt", "o")]]})
    result = await run_task(_task(repo, "one"), options=codex_options)
    assert result.status == "succeeded" and result.session_id is not None
    async with CodexProvider(codex_options) as provider:
        assert result.session_id in {s.id for s in await provider.list_sessions()}
