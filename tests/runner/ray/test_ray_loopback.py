"""A local Ray instance (no --ray-address) listens on loopback only: every socket of every process it
starts (GCS, raylet, agents, workers, the driver's own core worker) is bound to 127.0.0.0/8 or ::1,
and it does not report Ray's usage statistics (which would go to usage-stats.ray.io).
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
from .conftest import _usage_reports


def _session_dirs(pids: list[int]) -> set[str]:
    """The Ray session directories named on the command lines of ``pids`` (``--session-dir=...``)."""
    found = set()
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        found |= {a.removeprefix("--session-dir=") for a in argv if a.startswith("--session-dir=")}
    return found


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
    sessions: set[str] = set()
    try:
        deadline = time.monotonic() + 240
        while proc.poll() is None and time.monotonic() < deadline:
            pids = descendants(proc.pid)
            for item in listening(pids):
                seen[(item.host, item.port)] = item
            sessions |= _session_dirs(pids)
            time.sleep(0.2)
        output = proc.communicate(timeout=30)[0].decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, output
    programs = {Path(item.program).name for item in seen.values()}
    assert {"gcs_server", "raylet"} <= programs, seen  # Ray's own servers were seen listening
    assert [item for item in seen.values() if not item.loopback] == []
    # The instance's head said its usage reporting was off.
    [session] = sessions
    reports = _usage_reports(session)
    assert "Usage reporting is disabled" in reports and "request" not in reports, reports


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
    # The cluster's and the driver's sockets; a codex child's UDP socket (one unconnected on 0.0.0.0 with an
    # ephemeral port was seen once in CI) is the agent binary's own, not the Ray wiring this test is about.
    ours = [item for item in seen.values() if not (item.proto.startswith("udp") and _is_codex(item))]
    assert [item for item in ours if not item.loopback] == []
    assert talked and [conn for conn in talked.values() if not conn.loopback] == []


def _is_codex(item: Listener) -> bool:
    return Path(item.program).name == "codex"
