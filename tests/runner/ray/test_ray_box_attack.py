"""Issue #27's two-task attack with ``--backend ray`` on the simulated cluster (real codex on every node,
scripted model): each node's box is in its own private state directory, and task A can reach neither
task B's worktree (on whichever node it runs), nor the repository's hooks and config, nor /tmp."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import Task
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.testing import ScriptedModelServer

from ..box_attack import BoxAttack

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(300)]


async def test_on_ray_a_task_cannot_reach_another_tasks_box_the_repositorys_machinery_or_tmp(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    attack = BoxAttack(repo)
    scripted_model.responder = attack
    out = tmp_path / "out"
    try:
        await asyncio.wait_for(
            run_batch(
                [
                    BatchTask(id="B", prompt="[task:B] write b.txt and commit"),
                    BatchTask(id="A", prompt="[task:A] go"),
                ],
                template=Task(spec=Spec(prompt="-", cwd=repo, sandbox="workspace-write"), max_followups=0),
                out_dir=out,
                jobs=2,
                worktrees=True,
                options=codex_options,
                backend="ray",
            ),
            240,
        )
        summary = json.loads((out / "summary.json").read_text())
        # The nodes' state directory: the one the cluster started with (tests/conftest.py).
        attack.check(summary, Path(os.environ["XDG_STATE_HOME"]))
    finally:
        for marker in attack.markers():
            marker.unlink(missing_ok=True)
