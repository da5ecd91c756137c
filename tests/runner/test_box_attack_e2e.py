"""Issue #27's two-task attack on a local ``batch --worktrees`` (real codex, scripted model): task A tries
to write into task B's worktree, the repository's hooks and config, and the shared /tmp, by sandboxed
shell, escalated shell and apply_patch; every attempt fails and changes nothing (see ``box_attack``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import ScriptedModelServer

from .box_attack import BoxAttack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


def test_a_task_cannot_reach_another_tasks_box_the_repositorys_machinery_or_tmp(
    repo: Path,
    scripted_model: ScriptedModelServer,
    cli_env: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    attack = BoxAttack(repo)
    scripted_model.responder = attack
    tasks = tmp_path / "tasks.jsonl"
    lines = [{"id": "B", "prompt": "[task:B] write b.txt and commit"}, {"id": "A", "prompt": "[task:A] go"}]
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = tmp_path / "out"
    args = ["batch", str(tasks), "-j", "2", "--worktrees", "--cwd", str(repo), "--out", str(out)]
    result = CliRunner().invoke(
        cli, [*args, "--sandbox", "workspace-write", "--max-followups", "0", *cli_env], catch_exceptions=False
    )
    summary = json.loads((out / "summary.json").read_text())
    try:
        attack.check(summary, state)
    finally:
        for marker in attack.markers():
            marker.unlink(missing_ok=True)
    assert result.exit_code in (0, 1), result.output
