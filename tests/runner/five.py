"""A batch of five scripted tasks, one per outcome: succeeded, gate failed, declined command, model
error, cancelled. Shared by the summary and report tests (offline, on the real codex binary)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import GateConfig, Task, TaskEvent
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner.batch import BatchResult, BatchTask, run_batch
from agent_fleet.testing import Reply, ScriptedModelServer

from .scripted import ScriptedAgent, run, write_file

STATUSES = {
    "ok": "succeeded",
    "red-gate": "failed",
    "declined": "succeeded",
    "model-error": "failed",
    "stopped": "cancelled",
}
GATE_OUTPUT = "3 tests are red"
DECLINED = "git reset --hard"


async def run_five(
    repo: Path,
    scripted_model: ScriptedModelServer,
    codex_options: CodexOptions,
    out: Path,
    *,
    prices: PriceTable | None = None,
) -> BatchResult:
    scripted_model.responder = ScriptedAgent(
        {
            "ok": [[run("echo hello from ok"), write_file("ok.txt", "ok")]],
            "red-gate": [[run("ls no-such-file")]],
            "declined": [[run(DECLINED)]],
            "model-error": [[Reply.http_error(400, "the model gpt-none does not exist")]],
            "stopped": [[run("sleep 30")]],
        }
    )
    tasks = [BatchTask(id=i, prompt=f"[task:{i}] do the {i} thing") for i in STATUSES]
    tasks[1] = BatchTask(id="red-gate", prompt=tasks[1].prompt, gate_cmd=f"echo '{GATE_OUTPUT}'; exit 1")
    template = Task(
        spec=Spec(prompt="-", cwd=repo, sandbox="workspace-write"), gate=GateConfig(), max_followups=0
    )
    stop = asyncio.Event()
    finished: set[str] = set()
    sleeping = False

    def on_event(event: TaskEvent) -> None:
        # Stop the batch once the other four have ended and "stopped" is in its `sleep 30`.
        nonlocal sleeping
        if event.task_id == "stopped" and "sleep 30" in str(event.event):
            sleeping = True
        sub = getattr(event.event, "subtype", None)
        if sub == "runner.finished":
            finished.add(event.task_id)
        if sleeping and finished >= set(STATUSES) - {"stopped"}:
            stop.set()

    return await asyncio.wait_for(
        run_batch(
            tasks,
            template=template,
            out_dir=out,
            jobs=5,
            options=codex_options,
            on_event=on_event,
            stop=stop,
            prices=prices,
        ),
        90,
    )
