"""The other providers on the simulated 3-node cluster (``codex exec``, Claude Code against the scripted
Anthropic API), and a turn retried after an HTTP 500 on a node: recorded as on a local batch."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agent_fleet import Spec, System
from agent_fleet.claude import ClaudeOptions
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import GateConfig, Task, TaskEvent
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.runner.ray_backend import RayBatchEntry, RayBatchResult
from agent_fleet.testing import (
    AnthropicReply,
    AnthropicRequest,
    RecordedRequest,
    Reply,
    ScriptedAnthropicServer,
    ScriptedModelServer,
    scripted_claude_env,
)

from ..conftest import git
from ..scripted import TAG, ScriptedAgent, commit, run, write_file
from .conftest import live_agent_fleet_actors
from .test_ray_batch import SCHEMA, ledger_rows

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(300)]


def _template(repo: Path, **spec: Any) -> Task:
    return Task(
        spec=Spec(prompt="-", cwd=repo, **spec),
        gate=GateConfig(require_commit=True),
        max_followups=0,
        retry_delay=0.01,
    )


def _records(transcript: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in transcript.read_text().splitlines()]


def _notices(transcript: Path, subtype: str) -> list[dict[str, Any]]:
    return [r for r in _records(transcript) if r["type"] == "System" and r["subtype"] == f"runner.{subtype}"]


async def test_codex_exec_runs_on_the_nodes(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    ids = ["e0", "e1"]
    # `codex exec` never asks for approval, so it cannot be granted the escalation a commit needs under
    # workspace-write (a worktree's git directory is outside it): these scripted commands run unsandboxed.
    add_and_commit = "git add -A && git commit -q -m 'exec {}'"
    scripted_model.responder = ScriptedAgent(
        {i: [[write_file(f"{i}.txt", f"exec work of {i}"), run(add_and_commit.format(i))]] for i in ids}
    )
    start = git(repo, "rev-parse", "HEAD")
    out = tmp_path / "out"
    result = await run_batch(
        [BatchTask(id=i, prompt=f"[task:{i}] write {i}.txt and commit") for i in ids],
        template=_template(repo, sandbox="danger-full-access"),
        out_dir=out,
        jobs=1,
        worktrees=True,
        provider_name="codex-exec",
        options=codex_options,
        backend="ray",
    )
    assert isinstance(result, RayBatchResult)
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(summary)
    assert {t["task_id"]: t["status"] for t in summary["tasks"]} == {i: "succeeded" for i in ids}, summary
    # One `codex exec` per turn, on two nodes: no long-lived provider process to report.
    assert len({e.node_id for e in result.entries if isinstance(e, RayBatchEntry)}) == 2
    assert all(n["provider_pid"] is None for n in summary["nodes"])
    for t in summary["tasks"]:
        i = t["task_id"]
        assert t["provider"] == "codex-exec" and t["session_id"]
        assert any("git commit" in c["command"] for c in t["commands"]), t["commands"]
        assert git(repo, "show", f"agent-fleet/{i}:{i}.txt") == f"exec work of {i}"
        assert git(repo, "rev-parse", f"agent-fleet/{i}~1") == start
        started = _notices(out / f"{i}.jsonl", "started")
        assert started and started[0]["data"]["provider"] == "codex-exec"
        assert started[0]["data"]["approvals_enforced"] is False  # said in the transcript, as locally
    assert live_agent_fleet_actors() == []


def _claude_work(i: str) -> str:
    return f"echo 'claude work of {i}' > {i}.txt && git add -A && git commit -qm 'claude {i}'"


def _claude_responder(request: AnthropicRequest) -> AnthropicReply | None:
    """Each task's session: commit a file with Bash, then say it is done (chosen by the task's tag)."""
    match = TAG.search(json.dumps(request.messages[:1]))
    if match is None or not request.is_agent:  # a side request (e.g. a session title): the server's
        return None
    i = match.group(1)
    if request.ends_with_tool_result:
        return AnthropicReply.text(f"claude finished {i}")
    return AnthropicReply.bash(
        f"echo 'claude work of {i}' > {i}.txt && git add -A && git commit -qm 'claude {i}'"
    )


async def test_claude_runs_on_the_nodes(repo: Path, tmp_path: Path) -> None:
    ids = ["c0", "c1"]
    out = tmp_path / "out"
    with ScriptedAnthropicServer(responder=_claude_responder) as server:
        # The options (and the scripted API's address, on this machine's loopback) travel to every node.
        options = ClaudeOptions(env=scripted_claude_env(server, tmp_path / "claude-home"))
        result = await run_batch(
            [BatchTask(id=i, prompt=f"[task:{i}] write {i}.txt and commit") for i in ids],
            template=_template(repo),
            out_dir=out,
            jobs=1,
            worktrees=True,
            provider_name="claude",
            options=options,
            backend="ray",
        )
        agent_requests = len(server.agent_requests)
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(summary)
    assert {t["task_id"]: t["status"] for t in summary["tasks"]} == {i: "succeeded" for i in ids}, summary
    assert len({e.node_id for e in result.entries if isinstance(e, RayBatchEntry)}) == 2
    assert agent_requests == 2 * len(ids)
    for t in summary["tasks"]:
        i = t["task_id"]
        assert t["provider"] == "claude" and t["model"], "the model Claude Code reported at init"
        assert t["final_message"] == f"claude finished {i}"
        assert [c["command"] for c in t["commands"]] == [_claude_work(i)]
        assert git(repo, "show", f"agent-fleet/{i}:{i}.txt") == f"claude work of {i}"
        # The node redacted its events with the options' environment: the API key never left it.
        assert "sk-ant-scripted-dummy-key" not in (out / f"{i}.jsonl").read_text()
    assert live_agent_fleet_actors() == []


async def test_a_turn_retried_after_an_http_500_on_a_node_is_recorded(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    ids = ["r0", "r1"]
    # Whichever turn index the retry is read as, it does the same work.
    agent = ScriptedAgent({i: [[write_file(f"{i}.txt", i), commit(f"task {i}")]] * 2 for i in ids})
    failed_once = threading.Event()

    def responder(request: RecordedRequest) -> Reply | None:
        if request.contains("[task:r0]") and not failed_once.is_set():
            failed_once.set()
            return Reply.http_error(500, "scripted outage")
        return agent(request)

    scripted_model.responder = responder
    events: list[TaskEvent] = []
    out = tmp_path / "out"
    result = await run_batch(
        [BatchTask(id=i, prompt=f"[task:{i}] write {i}.txt and commit") for i in ids],
        template=_template(repo, sandbox="workspace-write"),
        out_dir=out,
        jobs=1,
        worktrees=True,
        options=codex_options,
        on_event=events.append,
        backend="ray",
    )
    assert failed_once.is_set()
    assert [(e.result.task_id, e.result.status) for e in result.entries] == [
        ("r0", "succeeded"),
        ("r1", "succeeded"),
    ]
    r0 = next(e for e in result.entries if e.result.task_id == "r0")
    assert isinstance(r0, RayBatchEntry) and r0.attempts == 1 and r0.result.retries == 1  # same node
    # The retry is visible: a runner.retry notice in the transcript and on the live sink...
    retries = _notices(out / "r0.jsonl", "retry")
    assert [(r["data"]["attempt"], r["data"]["code"]) for r in retries] == [(1, "server_error")]
    seen = [e for e in events if isinstance(e.event, System) and e.event.subtype == "runner.retry"]
    assert [e.task_id for e in seen] == ["r0"]
    assert _notices(out / "r1.jsonl", "retry") == []
    # ...and counted in the ledger and summary.json: two turns tried, none lost to the cluster.
    rows = {r.id: r for r in ledger_rows(out)}
    assert {i: (r.state, r.runs, r.attempts) for i, r in rows.items()} == {
        "r0": ("finished", 1, 2),
        "r1": ("finished", 1, 1),
    }
    summary = {t["task_id"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert (summary["r0"]["attempts"], summary["r0"]["retries"]) == (2, 0)
    assert (summary["r1"]["attempts"], summary["r1"]["retries"]) == (1, 0)
    assert git(repo, "show", "agent-fleet/r0:r0.txt") == "r0"
