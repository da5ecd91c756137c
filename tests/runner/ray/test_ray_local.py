"""Without --ray-address the CLI starts a small local Ray instance, runs the batch, and shuts it down."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_fleet.testing import ScriptedModelServer

from ..conftest import git, make_repo
from ..scripted import ScriptedAgent, commit, write_file

# The real codex binary (in the CLI's child process, where the suite's guard does not look) and a real
# local Ray instance: ~16 s of a unit run before it was marked.
pytestmark = pytest.mark.e2e


def test_cli_without_an_address_starts_and_stops_a_local_instance(
    scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    repo = make_repo(tmp_path / "repo")
    ids = ["l0", "l1"]
    scripted_model.responder = ScriptedAgent(
        {i: [[write_file(f"{i}.txt", f"work of {i}"), commit(f"task {i}")]] for i in ids}
    )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": i, "prompt": f"[task:{i}] write and commit"}) + "\n" for i in ids)
    )
    out = tmp_path / "out"
    args = ["batch", str(tasks), "--backend", "ray", "-j", "1", "--cwd", str(repo), "--worktrees"]
    args += ["--require-commit", "--max-followups", "0", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-c", "from agent_fleet.cli import main; main()", *args, *cli_env],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["backend"] == "ray"
    assert len(summary["nodes"]) == 1  # the one local node it started
    assert {t["task_id"]: t["status"] for t in summary["tasks"]} == {i: "succeeded" for i in ids}
    for i in ids:
        assert git(repo, "show", f"agent-fleet/{i}:{i}.txt") == f"work of {i}"
