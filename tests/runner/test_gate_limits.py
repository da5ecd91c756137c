"""The gate's own limits (issue 29 items 3 and 8): ``--gate-timeout`` bounds each run of the gate
command, and a gate that a stop or a timeout cancels ends its whole tree and leaves nothing for asyncio
to complain about (a ``_GatheringFuture exception was never retrieved`` reached the user's terminal)."""

from __future__ import annotations

import asyncio
import gc
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Spec, System
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import GateConfig, Task, TaskEvent, run_task
from agent_fleet.runner.gate import run_gate
from agent_fleet.testing import Reply, ScriptedModelServer

from ..procs import sleepers
from ..test_process import until


async def test_gate_timeout_bounds_each_run_of_the_command(tmp_path: Path) -> None:
    marker = str(uuid.uuid4().int % 10**9)
    config = GateConfig(command=f"echo checking; sleep 61.{marker}", command_timeout=0.5)
    result = await run_gate(config, tmp_path, None)
    (check,) = result.checks
    assert not check.passed and check.detail.endswith("timed out after 0.5s")
    assert check.output.strip() == "checking"
    assert sleepers(marker) == []


async def test_a_cancelled_gate_ends_its_tree_and_leaves_no_unretrieved_exception(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    complaints: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: complaints.append(context))
    marker = str(uuid.uuid4().int % 10**9)
    config = GateConfig(command=f"sleep 61.{marker}1 & sleep 61.{marker}2; wait")
    gates = [asyncio.create_task(run_gate(config, tmp_path, None)) for _ in range(3)]
    await until(lambda: len(sleepers(marker)) == 6)
    for gate in gates:
        gate.cancel()
    await asyncio.wait(gates)
    assert all(gate.cancelled() for gate in gates)
    assert sleepers(marker) == []
    del gates
    gc.collect()  # an exception nobody retrieved is reported when its future is collected
    await asyncio.sleep(0)
    assert complaints == []


@pytest.mark.e2e
async def test_a_tasks_timeout_bounds_its_gates(
    tmp_path: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions
) -> None:
    """A gate of 600 s default, a task of 3 s: the task ends as timed out at its bound, the gate's tree
    with it; the same limit holds for every run of the gate (each follow-up's)."""
    marker = str(uuid.uuid4().int % 10**9)
    scripted_model.responder = lambda request: Reply.text("done")
    spec = Spec(prompt="do it", cwd=tmp_path)
    task = Task(id="slow-gate", spec=spec, gate=GateConfig(command=f"sleep 61.{marker}"), timeout=3)
    gates: list[float] = []

    def on_event(event: TaskEvent) -> None:
        if isinstance(event.event, System) and event.event.subtype == "runner.gate_started":
            gates.append(time.monotonic())

    result = await asyncio.wait_for(run_task(task, options=codex_options, on_event=on_event), 60)
    assert result.status == "timeout" and "timeout of 3s" in result.reason, result.reason
    assert gates and sleepers(marker) == []
