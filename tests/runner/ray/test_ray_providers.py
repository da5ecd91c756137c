"""The other providers on the simulated 3-node cluster (``codex exec``, Claude Code against the scripted
Anthropic API), a turn retried after an HTTP 500 on a node: recorded as on a local batch; and a model
that goes away from every node: the batch pauses and resumes as a local batch does."""

from __future__ import annotations

import asyncio
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


def _claude_work(i: str) -> list[str]:
    """The file written, then the commit, both asked to run outside Claude Code's sandbox and proven
    harmless (a write in the workspace; git recording the work). This test is about Claude on Ray nodes,
    not its sandbox, which is tested on its own (tests/claude/test_walls_e2e.py): inside it ``git add
    -A`` trips over its placeholder files, and its bwrap once failed in CI on a lock file of the shared
    repository's git directory that vanished while it started (``Can't get type of source
    .git/config.lock``)."""
    return [f"echo 'claude work of {i}' > {i}.txt", f"git add -A && git commit -qm 'claude {i}'"]


def _claude_responder(request: AnthropicRequest) -> AnthropicReply | None:
    """Each task's session: commit a file with Bash, then say it is done (chosen by the task's tag)."""
    match = TAG.search(json.dumps(request.messages[:1]))
    if match is None or not request.is_agent:  # a side request (e.g. a session title): the server's
        return None
    i = match.group(1)
    write, record = _claude_work(i)
    done = len(request.tool_results())
    if done == 0:
        return AnthropicReply.tool_use("Bash", {"command": write, "dangerouslyDisableSandbox": True})
    if done == 1:
        return AnthropicReply.tool_use("Bash", {"command": record, "dangerouslyDisableSandbox": True})
    return AnthropicReply.text(f"claude finished {i}")


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
    assert {t["task_id"]: t["status"] for t in summary["tasks"]} == {i: "succeeded" for i in ids}, [
        (t["reason"], t["commands"]) for t in summary["tasks"]
    ]
    assert len({e.node_id for e in result.entries if isinstance(e, RayBatchEntry)}) == 2
    assert agent_requests == 3 * len(ids)
    for t in summary["tasks"]:
        i = t["task_id"]
        assert t["provider"] == "claude" and t["model"], "the model Claude Code reported at init"
        assert t["final_message"] == f"claude finished {i}"
        assert [c["command"] for c in t["commands"]] == _claude_work(i)
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


def _outage_agent(request: RecordedRequest) -> Reply:
    """Each task first runs a short command (the model goes away meanwhile), then answers."""
    if any(item.get("type") == "function_call_output" for item in request.input):
        return Reply.text("done")
    return Reply(items=(run("sleep 2"),))


async def test_the_batch_pauses_while_the_model_is_away_from_every_node_and_resumes(
    scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    """As ``tests/runner/test_outage_e2e.py`` on a local batch: one task on each node loses the model;
    once all three did, the batch pauses (once, for the whole cluster: the driver keeps the batch's
    view of the model), places nothing more, burns no retry, and resumes when the model is back."""
    scripted_model.responder = _outage_agent
    port = scripted_model.address[1]
    notices: list[TaskEvent] = []
    paused = asyncio.Event()

    def on_event(event: TaskEvent) -> None:
        if isinstance(event.event, System) and event.event.subtype.startswith("runner."):
            notices.append(event)
            if event.event.subtype == "runner.batch_paused":
                paused.set()

    template = Task(spec=Spec(prompt="-", cwd=tmp_path), model_timeout=3, retries=0)  # no retry to burn
    ids = [f"o{n}" for n in range(4)]  # three run (one per node), the fourth waits for a free node
    batch = asyncio.ensure_future(
        run_batch(
            [BatchTask(id=i, prompt=f"task {i}") for i in ids],
            template=template,
            out_dir=tmp_path / "out",
            jobs=1,
            options=codex_options,
            on_event=on_event,
            backend="ray",
        )
    )
    restarted: ScriptedModelServer | None = None
    try:
        await scripted_model.wait_for_request(count=3)  # one task per node runs its command...
        scripted_model.stop()  # ... and the model goes away
        async with asyncio.timeout(90):
            await paused.wait()
        subtypes = [e.event.subtype for e in notices]  # type: ignore[union-attr]
        assert subtypes.count("runner.batch_paused") == 1
        [pause] = [e.event.data for e in notices if e.event.subtype == "runner.batch_paused"]  # type: ignore[union-attr]
        assert pause["tasks"] == 3 and "waiting for network" in str(pause["cause"]), pause
        assert not any(e.task_id == "o3" for e in notices), "nothing was placed while paused"
        restarted = ScriptedModelServer(responder=_outage_agent, port=port).start()  # the model is back
        async with asyncio.timeout(180):
            result = await batch
    finally:
        if not batch.done():
            batch.cancel()
            await asyncio.gather(batch, return_exceptions=True)
        if restarted is not None:
            restarted.stop()
    assert [e.result.status for e in result.entries] == ["succeeded"] * 4, [
        e.result.reason for e in result.entries
    ]
    subtypes = [e.event.subtype for e in notices]  # type: ignore[union-attr]
    assert subtypes.count("runner.batch_paused") == 1 and subtypes.count("runner.batch_resumed") == 1
    assert result.stopped is None
    # The turns that lost the model were tried again uncounted (retries=0): each a runner.retry notice.
    silent = [e.event.data for e in notices if e.event.subtype == "runner.retry"]  # type: ignore[union-attr]
    assert silent and all(d["code"] == "connection_failed" for d in silent)
    assert "no progress from the model for 3s" in silent[0]["message"]
    assert live_agent_fleet_actors() == []
