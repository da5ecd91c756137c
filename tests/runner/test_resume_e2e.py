"""Every stop is resumable (issue 29 items 4 and 5): a task whose commit landed before a kill -9 passes
its ``--require-commit`` gate on resume without a follow-up (the gate measures from the task's base
commit, recorded in the ledger when it first started), and an app-server crash leaves the running tasks
``interrupted``, so ``--resume`` finishes them."""

from __future__ import annotations

import json
import os
import signal
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


def test_an_app_server_killed_mid_batch_leaves_its_tasks_interrupted_and_resume_finishes_them(
    repo: Path, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    finish = [write_file("done.txt", "done"), commit("finished after the crash")]
    scripted_model.responder = ScriptedAgent(
        {"a": [[run("sleep 30")], finish], "b": [[run("sleep 30")], finish], "c": [finish]}
    )
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["a", "b", "c"])
    out = tmp_path / "out"
    flags = ["-j", "2", "--worktrees", "--cwd", str(repo), "--sandbox", "workspace-write"]
    proc = _batch(codex_env, str(tasks), "--out", str(out), *flags)
    try:
        _wait_for("a and b sleeping", lambda: _sleeping(out, ["a", "b"]), proc)
        ((app_server,),) = _ledger(out, "SELECT pid FROM pids")
        os.kill(int(app_server), signal.SIGKILL)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        _kill_providers(out, proc.pid)
    assert proc.returncode == 75, stdout + stderr
    last = stderr.strip().splitlines()[-1]
    assert "provider process died" in last and f"--resume {out}" in last and "Traceback" not in stderr
    assert dict(_ledger(out, "SELECT id, state FROM tasks")) == {
        "a": "interrupted",
        "b": "interrupted",
        "c": "queued",
    }
    summary = json.loads((out / "summary.json").read_text())
    assert {t["task_id"]: t["error_code"] for t in summary["tasks"]} == dict.fromkeys(
        "ab", "app_server_crashed"
    )
    assert summary["fatal"] is False and "provider process died" in summary["stopped"]

    resumed = _batch(codex_env, "--resume", str(out))
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stdout + stderr
    by_id = {t["task_id"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert {i: t["status"] for i, t in by_id.items()} == dict.fromkeys("abc", "succeeded")
    assert by_id["a"]["resumed_from"] == by_id["a"]["session_id"], "the interrupted session continued"
