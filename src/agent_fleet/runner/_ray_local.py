"""A local Ray instance that listens on loopback only.

Ray 2.60 on Linux binds its GCS, raylet, agents and workers to every interface and advertises the
machine's address, without authentication: a local instance started by ``ray.init()`` would be open
to the network. Ray binds to 127.0.0.1 only when its "cluster mode" is off, the mode it uses on
macOS and Windows (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``). That switch is read in two places:

- by every Ray process at start-up, from the environment (the GCS, raylet and agents inherit the
  driver's environment; workers the raylet's), and
- by the driver, from ``ray._private.ray_constants.ENABLE_RAY_CLUSTER``, evaluated when Ray was first
  imported. If the two disagree (the variable set after ``import ray``) the driver looks for its
  node on the machine's address while the node listens on 127.0.0.1, and start-up times out.

``loopback_only()`` sets both for the duration of ``ray.init`` and restores them afterwards (Ray's
processes keep what they started with). It also turns Ray's usage statistics off for the processes
started meanwhile (``RAY_USAGE_STATS_ENABLED=0``): Ray enables them by default, and a head node's
dashboard process (started even with ``include_dashboard=False``, as a minimal one) then sends a report
to ``usage-stats.ray.io`` a minute after start and every hour: traffic off the machine that a
loopback-only instance must not make. ``local_init_kwargs`` also passes ``address="local"``: without
it ``ray.init()`` joins any cluster a ``ray start`` left on the machine (``/tmp/ray/ray_current_cluster``)
instead of starting one.

Ray keeps its Unix sockets under ``$TMPDIR/ray/session_<date>_<pid>/sockets/``; a socket path may be
at most 107 bytes, so under a long ``TMPDIR`` (a test's, a CI runner's) the instance cannot start.
Then the instance's files go under a short per-user directory instead (``_temp_dir``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from typing import Any, Final

__all__ = ["local_init_kwargs", "loopback_only"]

_SWITCH: Final = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
_USAGE_STATS: Final = "RAY_USAGE_STATS_ENABLED"
_LOOPBACK: Final = "127.0.0.1"
# Ray adds "/ray/session_2026-01-01_00-00-00_000000_<pid>/sockets/plasma_store" (~70 bytes) to its root.
_LONGEST_ROOT: Final = 107 - 72


def local_init_kwargs(object_store_memory: int) -> dict[str, Any]:
    """``ray.init`` arguments for a small, private, loopback-only instance (no dashboard)."""
    kwargs: dict[str, Any] = {
        "address": "local",
        "num_cpus": 1,
        "include_dashboard": False,
        "object_store_memory": object_store_memory,
        "_node_ip_address": _LOOPBACK,
    }
    if len(tempfile.gettempdir()) > _LONGEST_ROOT:
        kwargs["_temp_dir"] = f"/tmp/ray-{os.getuid()}"
    return kwargs


@contextlib.contextmanager
def loopback_only() -> Iterator[None]:
    """Ray's cluster mode and usage statistics off (see the module docstring) while the block starts a
    local instance."""
    import ray._private.ray_constants as constants

    saved_env = {name: os.environ.get(name) for name in (_SWITCH, _USAGE_STATS)}
    saved_constant = constants.ENABLE_RAY_CLUSTER
    os.environ[_SWITCH] = "0"
    os.environ[_USAGE_STATS] = "0"
    constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        constants.ENABLE_RAY_CLUSTER = saved_constant
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
