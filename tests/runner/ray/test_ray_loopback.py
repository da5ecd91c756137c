"""A local Ray instance (no --ray-address) listens on loopback only: every socket of every process it
starts (GCS, raylet, agents, workers, the driver's own core worker) is bound to 127.0.0.0/8 or ::1.
And so does the simulated cluster the Ray tests use, with a driver that joins it (``--ray-address``):
every process listens, and connects, on loopback only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.testing import Reply, ScriptedModelServer

from ...sockets import Connection, Listener, connections, descendants, listening

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


def test_the_test_cluster_and_a_driver_that_joins_it_use_loopback_only(
    ray_cluster: Any, scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    scripted_model.responder = lambda request: Reply.text("done", delay=3)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"c{i}", "prompt": "wait"}) + "\n" for i in range(3)))
    work = tmp_path / "work"
    work.mkdir()
    args = ["batch", str(tasks), "--backend", "ray", "--ray-address", ray_cluster.address, "-j", "1"]
    args += ["--cwd", str(work), "--out", str(tmp_path / "out")]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.Popen(
        [sys.executable, "-c", "from agent_fleet.cli import main; main()", *args, *cli_env],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
    )
    seen: dict[tuple[int, str, int], Listener] = {}
    talked: dict[tuple[int, str, int], Connection] = {}
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            pids = descendants(os.getpid())  # the cluster's processes and the driver's
            for item in listening(pids):
                seen[(item.pid, item.host, item.port)] = item
            for conn in connections(pids):
                talked[(conn.pid, conn.host, conn.port)] = conn
            time.sleep(0.2)
        output = proc.communicate(timeout=30)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    programs = {Path(item.program).name for item in seen.values()}
    assert {"gcs_server", "raylet"} <= programs, seen
    assert any(item.pid == proc.pid for item in seen.values()), "the driver's own port was not seen"
    assert [item for item in seen.values() if not item.loopback] == []
    assert talked and [conn for conn in talked.values() if not conn.loopback] == []
