"""SIGTERM and SIGHUP stop a batch as Ctrl-C does (issue 29 item 6): running tasks interrupted with their
sessions, a true summary, exit 143 (129 for SIGHUP); the batch resumes from there."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from agent_fleet.testing import CodexTestEnv, ScriptedModelServer

from .scripted import ScriptedAgent, commit, run, write_file
from .test_batch_durable import _batch, _kill_providers, _ledger, _sleeping, _tasks_file, _wait_for

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_a_stop_signal_stops_the_batch_cleanly_with_its_exit_code_and_a_true_summary(
    signum: signal.Signals,
    code: int,
    repo: Path,
    scripted_model: ScriptedModelServer,
    codex_env: CodexTestEnv,
    tmp_path: Path,
) -> None:
    finish = [write_file("x.txt", "x"), commit("resumed")]
    scripted_model.responder = ScriptedAgent(
        {"a": [[run("sleep 30")], finish], "b": [[run("sleep 30")], finish]}
    )
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["a", "b", "queued"])
    out = tmp_path / "out"
    proc = _batch(codex_env, str(tasks), "--out", str(out), "-j", "2", "--worktrees", "--cwd", str(repo))
    try:
        _wait_for("a and b sleeping", lambda: _sleeping(out, ["a", "b"]), proc)
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        _kill_providers(out, proc.pid)
    assert proc.returncode == code, stdout + stderr
    assert f"stopping ({signum.name})" in stdout + stderr and "Traceback" not in stderr
    assert f"continue it with: agent-fleet batch --resume {out}" in stdout
    summary = json.loads((out / "summary.json").read_text())
    states = dict(_ledger(out, "SELECT id, state FROM tasks"))
    assert states == {"a": "interrupted", "b": "interrupted", "queued": "queued"}
    for entry in summary["tasks"]:
        assert entry["state"] == "interrupted" and entry["status"] == "cancelled" and entry["session_id"]
    assert summary["not_started"]["task_ids"] == ["queued"] and summary["stopped"]

    resumed = _batch(codex_env, "--resume", str(out))
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 1, stdout + stderr  # "queued" has no script: it fails its gate
    by_id = {t["task_id"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert by_id["a"]["status"] == by_id["b"]["status"] == "succeeded"
