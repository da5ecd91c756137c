"""Fencing on a Ray cluster: a lost node stops by itself, and the driver stops placing work on it.

Ray notices a dead raylet only when its health check gives up (about 15 s by default); until then the
node's actors keep working, reachable from the driver, and after it they keep running with nobody to
stop them. The fencing bound ``fence_timeout`` (seconds, ``--fence-timeout``) closes both ends:

- **On the node** (``NodeWatch``, run by each ``NodeRunner``): every ``poll`` seconds it checks that
  its raylet is alive (Ray starts a worker as the raylet's child, so a worker whose parent changed has
  lost its raylet, whatever killed it) and that the GCS answers. A lost raylet fences at once (and
  the node's processes are gone within the bound); a GCS that has not answered for the bound fences,
  and so does a driver that stopped asking for heartbeats for the bound (it died, or cannot reach
  the node: it gives the node up then too). Fencing stops the running turns, shuts the provider down
  and ends the actor process (its reaper then ends every process the provider started): a quarter
  of the bound for the turns, a quarter for the provider, a quarter for the work directory.
- **On the driver** (``Heartbeats``): each live actor is asked for its health every ``poll`` seconds.
  A node that answers "fenced", or whose last healthy answer is older than the bound, is lost: no work
  is placed on it, its running attempts are abandoned (their results would not be accepted) and
  retried elsewhere.

This module is imported by the Ray workers: it imports ``ray`` only inside functions.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

__all__ = [
    "DEFAULT_FENCE_TIMEOUT",
    "Health",
    "Heartbeats",
    "NodeWatch",
    "ask_gcs",
    "poll_interval",
    "raylet_parent",
]

DEFAULT_FENCE_TIMEOUT: Final = 10.0
_MIN_POLL: Final = 0.2
_MAX_POLL: Final = 2.0


def poll_interval(fence_timeout: float) -> float:
    """How often a node checks itself and the driver asks for heartbeats: a fifth of the bound, within
    0.2 .. 2 s (a raylet's death is seen within one poll)."""
    return min(_MAX_POLL, max(_MIN_POLL, fence_timeout / 5))


@dataclass(frozen=True, slots=True, kw_only=True)
class Health:
    """A node's answer to a heartbeat: ``fenced`` says why it stopped itself (None: healthy); the pids
    of its actor and of its provider's process (None when it has none)."""

    node_id: str
    pid: int
    provider_pid: int | None = None
    fenced: str | None = None


class NodeWatch:
    """The node's side (pure: the caller feeds observations and the clock). ``fenced`` is the reason
    once the node must stop (it stays fenced)."""

    def __init__(self, fence_timeout: float, now: float) -> None:
        self.fence_timeout = fence_timeout
        self.gcs_ok_at = now
        self.driver_seen_at: float | None = None  # the driver's last heartbeat (None: none yet)
        self.fenced: str | None = None

    def heard_from_driver(self, now: float) -> None:
        self.driver_seen_at = now

    def fence(self, reason: str) -> str:
        if self.fenced is None:
            self.fenced = reason
        return self.fenced

    def observe(self, *, raylet_alive: bool, gcs: bool | None, now: float) -> str | None:
        """One check: ``gcs`` True (it answered, this node alive), False (it answered: this node is
        dead), None (no answer in time). Returns the reason to fence, when there is one."""
        if self.fenced is not None:
            return self.fenced
        if not raylet_alive:
            return self.fence("its raylet is gone (the node lost its Ray process)")
        if gcs is False:
            return self.fence("the Ray GCS counts this node as dead")
        if gcs:
            self.gcs_ok_at = now
        silent = now - self.gcs_ok_at
        if silent > self.fence_timeout:
            return self.fence(f"the Ray GCS has not answered for {silent:.1f}s")
        if self.driver_seen_at is not None and now - self.driver_seen_at > self.fence_timeout:
            quiet = now - self.driver_seen_at
            return self.fence(f"the driver has not asked for a heartbeat for {quiet:.1f}s")
        return None


class Heartbeats:
    """The driver's side (pure): when each node was last seen healthy, and which ones are overdue."""

    def __init__(self, fence_timeout: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.fence_timeout = fence_timeout
        self.clock = clock
        self._seen: dict[str, float] = {}

    def seen(self, key: str) -> None:
        self._seen[key] = self.clock()

    def forget(self, key: str) -> None:
        self._seen.pop(key, None)

    def overdue(self) -> list[tuple[str, float]]:
        """Nodes whose last healthy heartbeat is older than the bound, with its age."""
        now = self.clock()
        return [(k, now - t) for k, t in self._seen.items() if now - t > self.fence_timeout]


def raylet_parent() -> int | None:
    """This worker's raylet: its parent process when that is a raylet (Ray starts workers as the
    raylet's children), else None (then only the GCS check applies)."""
    ppid = os.getppid()
    try:
        name = Path(f"/proc/{ppid}/comm").read_text().strip()
    except OSError:
        return None
    return ppid if name.startswith("raylet") else None


def ask_gcs(timeout: float) -> bool | None:
    """Ping the GCS (blocking: run it in a thread): True when it answered within ``timeout``, None
    when it did not or cannot be asked. (A read of Ray's internal key-value store: cheap, and safe
    from a thread; ``GcsClient.check_alive`` crashes a worker in Ray 2.60.)"""
    try:
        import ray

        client: Any = getattr(ray._private.worker.global_worker, "gcs_client", None)
        if client is None:
            return None
        client.internal_kv_get(b"agent-fleet-ping", b"agent_fleet", timeout=timeout)
    except Exception:  # a timeout, an unreachable GCS: no answer
        return None
    return True
