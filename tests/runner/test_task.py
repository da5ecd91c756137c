"""``run_task`` against the real codex binary and the scripted model server."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from agent_fleet import Spec, TextDelta
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.errors import UsageError
from agent_fleet.runner import GateConfig, ReviewConfig, Task, TaskEvent, run_task
from agent_fleet.runner._lean import diff_of
from agent_fleet.testing import ScriptedModelServer

from .conftest import git
from .scripted import ScriptedAgent, commit, review_json, run, write_file

pytestmark = pytest.mark.e2e


def _task(repo: Path, key: str, **kw: object) -> Task:
    spec = Spec(prompt=f"[task:{key}] implement it", cwd=repo, sandbox="workspace-write")
    return Task(id=key, spec=spec, **kw)  # type: ignore[arg-type]


async def test_commit_passes_the_require_commit_gate(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent({"a": [[write_file("a.txt", "hello"), commit("add a")]]})
    events: list[TaskEvent] = []
    start = git(repo, "rev-parse", "HEAD")
    result = await run_task(
        _task(repo, "a", gate=GateConfig(require_commit=True)),
        options=codex_options,
        on_event=events.append,
        transcript=tmp_path / "t.jsonl",
    )
    assert result.status == "succeeded", result.reason
    assert result.followups == 0 and result.commands == 1 and result.tokens > 0
    assert result.start_head == start and result.end_head == git(repo, "rev-parse", "HEAD") != start
    assert git(repo, "log", "-1", "--format=%s") == "add a"
    records = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    # Lean transcript: every event but the streamed fragments (written as their message) and the diff
    # snapshots (written once, as the turn's TurnDiff record).
    kept = [e for e in events if not isinstance(e.event, TextDelta) and diff_of(e) is None]
    assert [r["type"] for r in records if r["type"] != "TurnDiff"] == [type(e.event).__name__ for e in kept]
    assert sum(r["type"] == "TurnDiff" for r in records) == 1
    assert {r["task_id"] for r in records} == {"a"}
    assert records[0]["type"] == "System" and records[0]["subtype"] == "runner.started"
    assert records[-1]["subtype"] == "runner.finished" and records[-1]["data"]["status"] == "succeeded"
    assert any(r["type"] == "Result" and r["source"] == "agent" for r in records)


async def test_gate_command_fails_then_passes_after_one_followup(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    # First turn writes a wrong value; the follow-up turn fixes it.
    scripted_model.responder = ScriptedAgent(
        {"g": [[write_file("value.txt", "wrong")], [run("echo right > value.txt")]]}
    )
    gate = GateConfig(
        command="echo checking value; grep -q right value.txt || { echo GATE-SAYS-NO; exit 3; }"
    )
    result = await run_task(_task(repo, "g", gate=gate), options=codex_options)
    assert result.status == "succeeded", result.reason
    assert result.followups == 1
    followups = [r for r in scripted_model.requests if "quality gate failed" in r.last_user_text]
    assert followups, "the follow-up prompt reached the model"
    prompt = followups[0].last_user_text
    assert "GATE-SAYS-NO" in prompt and "exited with code 3" in prompt


async def test_gate_never_passing_fails_after_the_followup_budget(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.responder = ScriptedAgent({"n": []})
    task = _task(repo, "n", gate=GateConfig(require_commit=True), max_followups=1)
    result = await run_task(task, options=codex_options)
    assert result.status == "failed" and result.error_code == "gate_failed"
    assert result.followups == 1 and not result.fatal
    assert "no new commit" in result.reason


async def test_review_p0_finding_goes_back_then_clean_review_succeeds(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    agent = ScriptedAgent(
        {"r": [[write_file("r.txt", "v1"), commit("first")], [run("echo fixed >> r.txt"), commit("fix")]]},
        reviews=[review_json((0, "Division by zero in r.txt")), review_json()],
    )
    scripted_model.responder = agent
    task = _task(repo, "r", gate=GateConfig(require_commit=True), review=ReviewConfig(threshold=1))
    async with CodexProvider(codex_options) as provider:
        result = await run_task(task, provider=provider, transcript=tmp_path / "r.jsonl")
    assert result.status == "succeeded", result.reason
    assert result.followups == 1 and result.reviews == 2
    assert result.review is not None and result.review.findings == ()
    # The first review saw the single new commit; the second the two commits since the start.
    assert "introduced by commit" in agent.review_requests[0].last_user_text
    assert "against the base branch" in agent.review_requests[1].last_user_text
    followup = next(r for r in scripted_model.requests if "code review of your changes" in r.last_user_text)
    assert "[P0] Division by zero in r.txt" in followup.last_user_text
    records = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    review_records = [r for r in records if r["source"] == "review"]
    assert any(r["type"] == "System" and r["subtype"] == "review.exited" for r in review_records)
    assert any(r["type"] == "Result" for r in review_records)


async def test_review_below_threshold_does_not_block(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.responder = ScriptedAgent(
        {"p": [[write_file("p.txt", "x"), commit("p")]]}, reviews=[review_json((2, "Minor naming"))]
    )
    task = _task(repo, "p", gate=GateConfig(require_commit=True), review=ReviewConfig(threshold=1))
    result = await run_task(task, options=codex_options)
    assert result.status == "succeeded", result.reason
    assert result.followups == 0 and result.review is not None
    assert [f.priority for f in result.review.findings] == [2]


async def test_stop_interrupts_a_running_turn(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.responder = ScriptedAgent({"s": [[run("sleep 30")]]})
    stop = asyncio.Event()
    seen = asyncio.Event()

    def on_event(event: TaskEvent) -> None:
        if "sleep 30" in str(event.event):
            seen.set()

    runner = asyncio.create_task(
        run_task(_task(repo, "s"), options=codex_options, on_event=on_event, stop=stop)
    )
    await asyncio.wait_for(seen.wait(), 20)
    stop.set()
    result = await asyncio.wait_for(runner, 15)
    assert result.status == "cancelled"


async def test_task_timeout_interrupts_the_turn(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.responder = ScriptedAgent({"t": [[run("sleep 30")]]})
    result = await asyncio.wait_for(run_task(_task(repo, "t", timeout=2.0), options=codex_options), 20)
    assert result.status == "timeout" and result.error_code == "timeout"
    assert "timeout of 2s" in result.reason


async def test_usage_errors_come_before_any_work(tmp_path: Path, codex_options: CodexOptions) -> None:
    with pytest.raises(UsageError, match="does not exist"):
        await run_task(Task(spec=Spec(prompt="x", cwd=tmp_path / "missing")), options=codex_options)
    with pytest.raises(UsageError, match="invalid regular expression"):
        from agent_fleet import PermissionConfig

        spec = Spec(prompt="x", cwd=tmp_path, permission=PermissionConfig(allow_patterns=("(",)))
        await run_task(Task(spec=spec), options=codex_options)
    with pytest.raises(UsageError, match="git repository"):
        await run_task(Task(spec=Spec(prompt="x", cwd=tmp_path), gate=GateConfig(require_commit=True)))


async def test_missing_credential_is_a_fatal_result(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "empty-home"))
    result = await run_task(Task(spec=Spec(prompt="x", cwd=tmp_path)))
    assert result.status == "error" and result.fatal and result.error_code == "auth_failed"
    assert "OPENAI_API_KEY" in result.reason


async def test_codex_exec_work_is_reviewed_by_its_registry_reviewer(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    """codex-exec cannot review; its registry entry names codex, started with the same options."""
    agent = ScriptedAgent({"x": [[write_file("x.txt", "x")]]}, reviews=[review_json((2, "Naming"))])
    scripted_model.responder = agent
    task = _task(repo, "x", review=ReviewConfig(threshold=1))  # reviews the uncommitted x.txt
    result = await run_task(task, provider_name="codex-exec", options=codex_options)
    assert result.status == "succeeded", result.reason
    assert result.reviews == 1 and len(agent.review_requests) == 1
    assert result.review is not None and [f.title for f in result.review.findings] == ["[P2] Naming"]
