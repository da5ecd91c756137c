"""A local Ray instance (no --ray-address) listens on loopback only: every socket of every process it
starts (GCS, raylet, agents, workers, the driver's own core worker) is bound to 127.0.0.0/8 or ::1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_fleet.testing import Reply, ScriptedModelServer

from ...sockets import Listener, descendants, listening

pytestmark = pytest.mark.e2e


def test_the_local_instance_listens_on_loopback_only(
    scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    scripted_model.responder = lambda request: Reply.text("done", delay=3)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"l{i}", "prompt": "wait"}) + "\n" for i in range(2)))
    work = tmp_path / "work"
    work.mkdir()
    args = [
        "batch",
        str(tasks),
        "--backend",
        "ray",
        "-j",
        "2",
        "--cwd",
        str(work),
        "--out",
        str(tmp_path / "out"),
    ]
    env = {
        k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    }
    proc = subprocess.Popen(
        [sys.executable, "-c", "from agent_fleet.cli import main; main()", *args, *cli_env],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    seen: dict[tuple[str, int], Listener] = {}
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            for item in listening(descendants(proc.pid)):
                seen[(item.host, item.port)] = item
            time.sleep(0.2)
        output = proc.communicate(timeout=30)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    programs = {Path(item.program).name for item in seen.values()}
    assert {"gcs_server", "raylet"} <= programs, seen  # Ray's own servers were seen listening
    assert [item for item in seen.values() if not item.loopback] == []
