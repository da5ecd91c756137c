"""One simulated multi-node Ray cluster per test module: three raylets on this machine, on loopback only.

Each node has one CPU and a custom resource naming it (``node-0`` .. ``node-2``), so a test can tell
which node ran a task. The scripted model's dummy key and a private ``CODEX_HOME`` are in the
environment the cluster starts with: that is the nodes' own environment, as on a real cluster, where
each node has its own codex credential (``add_node`` gives a node another environment).

Loopback only: ``ray.cluster_utils.Cluster`` binds the GCS, the raylets and the workers to every
interface and advertises the machine's address, unless Ray's cluster mode is off
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, the mode Ray uses on macOS and Windows). That switch is read
twice: by every Ray process from its environment, and by this (the driver's) process from
``ray._private.ray_constants.ENABLE_RAY_CLUSTER``, a constant evaluated when ``ray`` is first imported.
Setting only the variable after ``import ray`` leaves the two disagreeing: the driver looks for its node
on the machine's address while the node listens on 127.0.0.1, and start-up times out (what an earlier
attempt saw). So the fixture sets both for its lifetime (``_ray_local.loopback_only``), and
``test_ray_loopback`` checks every socket of the cluster and every connection it makes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError as exc:  # never skip: the Ray backend is part of the product and of CI
    raise ImportError(f"the Ray tests need ray: pip install -e '.[dev]' ({exc})") from exc

from agent_fleet.runner._ray_local import loopback_only
from agent_fleet.testing._env import DEFAULT_ENV_KEY

NODES = 3


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    env = {
        DEFAULT_ENV_KEY: "scripted-dummy-key",
        "CODEX_HOME": str(tmp_path_factory.mktemp("node-codex-home")),
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    with loopback_only():
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "resources": {"node-0": 1}, "include_dashboard": False},
        )
        try:
            for i in range(1, NODES):
                cluster.add_node(num_cpus=1, resources={f"node-{i}": 1}, include_dashboard=False)
            cluster.wait_for_nodes()
            ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
            yield cluster
        finally:
            ray.shutdown()
            cluster.shutdown()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def add_node(cluster: Any, name: str, env: Mapping[str, str] | None = None) -> Any:
    """A new node in ``cluster`` (one CPU, the custom resource ``name``), started with ``env`` over this
    process's environment (a node's own environment: its raylet and workers inherit it)."""
    saved = {k: os.environ.get(k) for k in env or {}}
    os.environ.update(env or {})
    try:
        with loopback_only():
            node = cluster.add_node(num_cpus=1, resources={name: 1}, include_dashboard=False)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # (not cluster.wait_for_nodes(): it counts the nodes a test killed as still to come)
    deadline = time.monotonic() + 120
    while not any(n["NodeID"] == node.node_id and n["Alive"] for n in ray.nodes()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the Ray node {name} did not join")
        time.sleep(0.2)
    return node


def wait_dead(node_id: str, within: float = 120) -> None:
    """Until Ray's health check counts ``node_id`` dead (a removed or killed node)."""
    deadline = time.monotonic() + within
    while any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes()):
        if time.monotonic() > deadline:
            raise TimeoutError(f"Ray still counts the node {node_id} alive")
        time.sleep(0.5)


def raylet_pid(node: Any) -> int:
    """The pid of ``node``'s raylet (a ``ray._private.node.Node`` of the test's cluster)."""
    return int(node.all_processes["raylet"][0].process.pid)


def kill_raylet(node: Any) -> int:
    """SIGKILL ``node``'s raylet (a process this test started), as an operator's machine loses it."""
    pid = raylet_pid(node)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    return pid


def node_names() -> dict[str, str]:
    """Node id -> the custom resource naming it (``node-0`` ...)."""
    out = {}
    for node in ray.nodes():
        names = [r for r in node["Resources"] if r.startswith("node-")]
        if node["Alive"] and names:
            out[node["NodeID"]] = names[0]
    return out


def live_agent_fleet_actors() -> list[str]:
    return [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if "agent-fleet-" in a["name"]]
