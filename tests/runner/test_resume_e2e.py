"""Every stop is resumable (issue 29 items 4 and 5): a task whose commit landed before a kill -9 passes
its ``--require-commit`` gate on resume without a follow-up (the gate measures from the task's base
commit, recorded in the ledger when it first started), and an app-server crash leaves the running tasks
``interrupted``, so ``--resume`` finishes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_fleet.testing import CodexTestEnv, ScriptedModelServer

from .conftest import git
from .scripted import ScriptedAgent, commit, run, write_file
from .test_batch_durable import _batch, _kill_providers, _ledger, _sleeping, _tasks_file, _wait_for

pytestmark = pytest.mark.e2e


def test_a_commit_before_a_kill_9_passes_the_gate_on_resume_without_a_followup(
    repo: Path, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent(
        {"c": [[write_file("c.txt", "c"), commit("task c"), run("sleep 30")]]}  # then the resumed turn: text
    )
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["c"])
    out = tmp_path / "out"
    base = git(repo, "rev-parse", "HEAD")
    flags = ["-j", "1", "--worktrees", "--cwd", str(repo), "--sandbox", "workspace-write"]
    proc = _batch(codex_env, str(tasks), "--out", str(out), *flags)
    try:
        _wait_for("c committed and sleeping", lambda: _sleeping(out, ["c"]), proc)
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        _kill_providers(out, proc.pid)
    assert git(repo, "log", "-1", "--format=%s", "agent-fleet/c") == "task c", "the commit landed first"
    assert _ledger(out, "SELECT state, base_head FROM tasks") == [("running", base)]

    resumed = _batch(codex_env, "--resume", str(out))
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stdout + stderr
    (entry,) = json.loads((out / "summary.json").read_text())["tasks"]
    assert entry["status"] == "succeeded" and entry["followups"] == 0, entry["reason"]
    assert entry["gate"]["passed"] and entry["start_head"] == base
    assert not any("quality gate failed" in r.last_user_text for r in scripted_model.requests)
