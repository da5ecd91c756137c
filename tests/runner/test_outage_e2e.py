"""A model that goes away mid-batch (issue 29 item 1), against the real codex and a scripted model.

With the endpoint gone codex waits for the network, sending a "Reconnecting..." notice now and then;
those used to count as activity, and the fleet hung. Now only model progress counts: a turn without it
for ``--model-timeout`` ends with a retryable ``connection_failed`` naming the cause; when every running
task hit the outage the batch pauses (saying so once), burns no retry, resumes when the model answers
again, and stops resumable (exit 75, the cause on its last line) when it stays away past
``--outage-timeout``."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from agent_fleet import Spec, System
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import Task, TaskEvent, run_batch
from agent_fleet.runner.batch import BatchTask
from agent_fleet.testing import CodexTestEnv, RecordedRequest, Reply, ScriptedModelServer

from .scripted import run
from .test_batch_durable import _batch, _kill_providers, _ledger, _wait_for

pytestmark = pytest.mark.e2e

SCRIPT = Path(sys.executable).parent / "agent-fleet"


def _agent(request: RecordedRequest) -> Reply:
    """Each task first runs a short command (the model goes away meanwhile), then answers."""
    if any(item.get("type") == "function_call_output" for item in request.input):
        return Reply.text("done")
    return Reply(items=(run("sleep 2"),))


def _restart(port: int) -> ScriptedModelServer:
    return ScriptedModelServer(responder=_agent, port=port).start()


async def test_the_batch_pauses_while_the_model_is_away_and_resumes_when_it_answers(
    scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    scripted_model.responder = _agent
    port = scripted_model.address[1]
    notices: list[TaskEvent] = []
    paused = asyncio.Event()

    def on_event(event: TaskEvent) -> None:
        if isinstance(event.event, System) and event.event.subtype.startswith("runner."):
            notices.append(event)
            if event.event.subtype == "runner.batch_paused":
                paused.set()

    template = Task(spec=Spec(prompt="-", cwd=tmp_path), model_timeout=3, retries=0)  # no retry to burn
    tasks = [BatchTask(id=f"t{n}", prompt=f"task {n}") for n in range(4)]
    batch = asyncio.create_task(
        run_batch(tasks, template=template, out_dir=tmp_path / "out", jobs=2, options=codex_options,
                  on_event=on_event, outage_timeout=120)
    )  # fmt: skip
    await scripted_model.wait_for_request(count=2)  # t0 and t1 run their command...
    scripted_model.stop()  # ... and the model goes away
    async with asyncio.timeout(60):
        await paused.wait()
    subtypes = [e.event.subtype for e in notices]  # type: ignore[union-attr]
    assert not any(e.task_id in ("t2", "t3") for e in notices), "nothing was started while paused"
    silent = [e.event.data for e in notices if e.event.subtype == "runner.retry"]  # type: ignore[union-attr]
    assert silent and all(d["code"] == "connection_failed" for d in silent)
    assert "no progress from the model for 3s" in silent[0]["message"]
    assert "waiting for network" in silent[0]["message"], silent[0]["message"]  # the cause, named

    server = _restart(port)  # the model answers again
    try:
        async with asyncio.timeout(120):
            result = await batch
    finally:
        server.stop()
    assert [e.result.status for e in result.entries] == ["succeeded"] * 4, [
        e.result.reason for e in result.entries
    ]
    subtypes = [e.event.subtype for e in notices]  # type: ignore[union-attr]
    assert subtypes.count("runner.batch_paused") == 1 and subtypes.count("runner.batch_resumed") == 1
    assert result.stopped is None


def test_a_model_away_past_the_outage_bound_stops_the_batch_resumable(
    scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = _agent
    port = scripted_model.address[1]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{n}", "prompt": f"task {n}"}) + "\n" for n in range(3)))
    out = tmp_path / "out"
    flags = ["-j", "2", "--cwd", str(tmp_path), "--model-timeout", "2", "--outage-timeout", "4"]
    proc = _batch(codex_env, str(tasks), "--out", str(out), *flags)
    try:
        _wait_for("two tasks at their command", lambda: len(scripted_model.requests) >= 2, proc)
        scripted_model.stop()
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        _kill_providers(out, proc.pid)
    assert proc.returncode == 75, stdout + stderr
    last = stderr.strip().splitlines()[-1]
    assert "the model stayed unreachable for 4s" in last and f"--resume {out}" in last, last
    assert "Traceback" not in stderr
    assert stdout.count("batch paused") == 1, stdout
    states = dict(_ledger(out, "SELECT id, state FROM tasks"))
    assert states == {"t0": "interrupted", "t1": "interrupted", "t2": "queued"}

    server = _restart(port)
    try:
        resumed = _batch(codex_env, "--resume", str(out))
        stdout, stderr = resumed.communicate(timeout=120)
    finally:
        server.stop()
    assert resumed.returncode == 0, stdout + stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["counts"] == {"succeeded": 3}
