"""A run served by ``agent_fleet.testing``'s scripted model is labelled scripted wherever its model is
named (issue 33): in the data (the record, summary.json) and in what people read (the live view)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from agent_fleet._scripted import served_by_scripted_model
from agent_fleet.claude import ClaudeOptions
from agent_fleet.cli._view import Progress
from agent_fleet.codex import CodexOptions
from agent_fleet.events import System
from agent_fleet.runner import TaskEvent, TaskResult
from agent_fleet.runner._summary import build_summary, task_record
from agent_fleet.runner._types import notice
from agent_fleet.testing import (
    ScriptedAnthropicServer,
    ScriptedModelServer,
    scripted_claude_env,
    scripted_codex_env,
)


def test_the_kits_wiring_is_recognised_and_nothing_else(
    scripted_model: ScriptedModelServer, tmp_path: Path
) -> None:
    env = scripted_codex_env(scripted_model, tmp_path / "home")
    assert served_by_scripted_model(CodexOptions(config=dict(env.config), env=dict(env.env)))
    # the same provider given as nested tables (a -c model_providers={...} override)
    nested = {"model_provider": "x", "model_providers": {"x": dict(env.config["model_providers.scripted"])}}
    assert served_by_scripted_model(CodexOptions(config=nested))
    # a real provider that happens to be called "scripted", another provider chosen, nothing set
    own = {
        "model_provider": "scripted",
        "model_providers.scripted": {"name": "Acme", "base_url": "https://x"},
    }
    assert not served_by_scripted_model(CodexOptions(config=own))
    other = {**env.config, "model_provider": "openai"}
    assert not served_by_scripted_model(CodexOptions(config=other))
    assert not served_by_scripted_model(CodexOptions())
    assert not served_by_scripted_model(None)


def test_claude_code_against_the_kits_server_is_recognised(tmp_path: Path) -> None:
    with ScriptedAnthropicServer() as server:
        env = scripted_claude_env(server, tmp_path / "home")
    assert served_by_scripted_model(ClaudeOptions(env=env))
    assert not served_by_scripted_model(ClaudeOptions(env={"ANTHROPIC_BASE_URL": "http://127.0.0.1:1"}))


def test_the_record_and_the_summary_say_scripted() -> None:
    real = task_record(
        TaskResult(task_id="a", status="succeeded", reason="ok"), recorded={"model": "gpt-5.5"}
    )
    fake = task_record(
        TaskResult(task_id="b", status="succeeded", reason="ok"),
        recorded={"model": "gpt-5.5", "scripted": True},
    )
    assert (real["scripted"], real["model_label"]) == (False, "gpt-5.5")
    assert (fake["scripted"], fake["model_label"]) == (True, "scripted (as gpt-5.5)")
    assert build_summary([real], started_at=1.0, finished_at=2.0, duration=1.0)["scripted"] is False
    assert build_summary([real, fake], started_at=1.0, finished_at=2.0, duration=1.0)["scripted"] is True


def test_the_live_view_names_a_scripted_model_as_scripted() -> None:
    console = Console(file=io.StringIO(), width=120)
    progress = Progress(console, json_output=False, batch=False)
    progress.on_event(notice("t", "started", prompt="p", provider="codex", scripted=True))
    session = System(subtype="session", data={"model": "gpt-5.5", "model_provider": "scripted"})
    progress.on_event(TaskEvent(task_id="t", source="agent", event=session))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "model: scripted (as gpt-5.5): agent-fleet's scripted model answers, no real model" in out
    assert "model: gpt-5.5\n" not in out
    fleet = Progress(Console(file=io.StringIO(), width=120), json_output=False, batch=True)
    fleet.on_event(notice("a", "started", prompt="p"))
    assert "SCRIPTED" not in fleet.header().plain
    fleet.on_event(notice("b", "started", prompt="p", scripted=True))
    assert fleet.header().plain.endswith("SCRIPTED model")
    real = Progress(Console(file=io.StringIO(), width=120), json_output=False, batch=False)
    real.on_event(notice("t", "started", prompt="p", provider="codex", scripted=False))
    real.on_event(TaskEvent(task_id="t", source="agent", event=session))
    assert "model: gpt-5.5\n" in real.console.file.getvalue()  # type: ignore[attr-defined]
