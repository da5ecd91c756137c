"""One simulated multi-node Ray cluster for the module: three raylets on this machine.

Each node has one CPU and a custom resource naming it (``node-0`` .. ``node-2``), so a test can tell
which node ran a task. The scripted model's dummy key and a private ``CODEX_HOME`` are in the
environment the cluster starts with: that is the nodes' own environment, as on a real cluster, where
each node has its own codex credential.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

try:
    import ray
    from ray.cluster_utils import Cluster
except ImportError as exc:  # never skip: the Ray backend is part of the product and of CI
    raise ImportError(f"the Ray tests need ray: pip install -e '.[dev]' ({exc})") from exc

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
