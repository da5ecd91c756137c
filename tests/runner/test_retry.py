"""Turn-level retry in ``run_task``: retryable failures run again after a visible backoff."""

from __future__ import annotations

import os
import signal
from dataclasses import replace
from pathlib import Path

import pytest

from agent_fleet import Error, Spec, System
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.runner import Task, TaskEvent, run_task
from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e


def _task(repo: Path, **kw: object) -> Task:
    spec = Spec(prompt="implement it", cwd=repo)
    return Task(id="r", spec=spec, retry_delay=0.01, **kw)  # type: ignore[arg-type]


def _retries(events: list[TaskEvent]) -> list[dict[str, object]]:
    return [
        e.event.data
        for e in events
        if e.source == "runner" and isinstance(e.event, System) and e.event.subtype == "runner.retry"
    ]


async def test_two_http_500s_then_success_succeeds_after_two_visible_retries(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    for reply in (Reply.http_error(500, "boom"), Reply.http_error(500, "boom"), Reply.text("done")):
        scripted_model.enqueue(reply)
    events: list[TaskEvent] = []
    result = await run_task(_task(repo), options=codex_options, on_event=events.append)
    assert result.status == "succeeded", result.reason
    assert result.retries == 2 and result.to_dict()["retries"] == 2
    retries = _retries(events)
    assert [r["attempt"] for r in retries] == [1, 2]
    assert {r["code"] for r in retries} == {"server_error"}
    assert len(scripted_model.requests) == 3
    assert scripted_model.requests[-1].last_user_text == "implement it"


async def test_http_400_is_not_retried(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.enqueue(Reply.http_error(400, "Invalid value for 'input'."))
    scripted_model.enqueue(Reply.text("never reached"))
    events: list[TaskEvent] = []
    result = await run_task(_task(repo), options=codex_options, on_event=events.append)
    assert result.status == "failed" and result.error_code == "bad_request"
    assert result.retries == 0 and _retries(events) == []
    assert len(scripted_model.requests) == 1


async def test_retries_stop_at_the_budget(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.default = Reply.http_error(503, "still down")
    events: list[TaskEvent] = []
    result = await run_task(_task(repo, retries=1), options=codex_options, on_event=events.append)
    assert result.status == "failed" and result.error_code == "server_error"
    assert result.retries == 1 and len(_retries(events)) == 1
    assert len(scripted_model.requests) == 2


async def test_an_app_server_crash_with_restart_is_retried_on_the_resumed_session(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    provider = CodexProvider(replace(codex_options, restart_on_crash=True))
    killed: list[int] = []

    def responder(request: RecordedRequest) -> Reply | None:
        if not killed:  # the first model request: the app-server dies mid-turn
            assert provider.pid is not None
            killed.append(provider.pid)
            os.kill(provider.pid, signal.SIGKILL)
            return Reply.text("lost", delay=1.0)
        return Reply.text("done after the restart")

    scripted_model.responder = responder
    events: list[TaskEvent] = []
    async with provider:
        result = await run_task(_task(repo), provider=provider, on_event=events.append)
    assert result.status == "succeeded", result.reason
    assert result.retries == 1 and result.final_text == "done after the restart"
    [retry] = _retries(events)
    assert retry["code"] == "app_server_crashed"
    assert provider.crashes == 1 and killed


async def test_codex_passes_no_retry_after_so_the_runners_backoff_applies(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    # What codex 0.163 does with a 429's Retry-After header: nothing reaches its client (the turn error
    # says "exceeded retry limit, last status: 429 Too Many Requests" and no more). Were it passed on,
    # the retry would wait 30 s here and this test would say so.
    scripted_model.enqueue(Reply.rate_limited(retry_after=30))
    scripted_model.enqueue(Reply.text("done"))
    events: list[TaskEvent] = []
    result = await run_task(_task(repo), options=codex_options, on_event=events.append)
    assert result.status == "succeeded" and result.retries == 1, result.reason
    [error] = [e.event for e in events if isinstance(e.event, Error)]
    assert error.code == "rate_limited" and error.retryable
    assert "retry_after" not in error.data and "retry_at" not in error.data
    assert "Retry-After" not in error.message and "30" not in error.message
    [retry] = _retries(events)
    assert "hint" not in retry and float(retry["delay"]) < 1.0  # type: ignore[arg-type]


async def test_a_retry_whose_wait_would_pass_the_tasks_timeout_is_not_started(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    scripted_model.enqueue(Reply.http_error(503, "down"))
    scripted_model.enqueue(Reply.text("never reached"))
    events: list[TaskEvent] = []
    task = replace(_task(repo, timeout=20.0), retry_delay=60.0, retry_max_delay=60.0)
    result = await run_task(task, options=codex_options, on_event=events.append)
    # the turn's own error is the outcome, at once: not a timeout 20 s later
    assert result.status == "failed" and result.error_code == "server_error", result.reason
    assert "not retried: the wait of" in result.reason and "would pass the task's timeout" in result.reason
    assert result.duration < 10 and _retries(events) == [] and len(scripted_model.requests) == 1
