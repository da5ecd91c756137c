"""The Ray backend's actors: one ``NodeRunner`` per alive node, placed, started, replaced and shut down.

``ActorPool`` owns the connection to Ray and the actors; the driver (``_ray_driver``) asks it for a
worker with a free slot and tells it when one was lost. See ``ray_backend`` for the whole story.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_fleet.errors import AuthenticationError, ProviderUnavailable, UsageError
from agent_fleet.runner._ray_local import local_init_kwargs, loopback_only
from agent_fleet.runner._ray_node import NodeConfig, NodeInfo, NodeRunner

__all__ = ["RAY_EXTRA_HINT", "ActorPool", "Worker", "import_ray", "one_line"]

RAY_EXTRA_HINT = "pip install 'agent-fleet[ray]'"

_SHUTDOWN_TIMEOUT = 30.0
_CONTROL_SLOTS = 4  # actor concurrency beyond ``jobs``: stop / shutdown calls are never queued behind tasks
_LOCAL_OBJECT_STORE = 100 * 1024 * 1024


def import_ray() -> Any:
    """The ``ray`` module, or ``ProviderUnavailable`` naming the extra to install."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise ProviderUnavailable(
            f"the Ray backend needs the ray package, which is not installed here: {RAY_EXTRA_HINT} "
            f"(on the driver and on every node) ({exc})"
        ) from exc


def one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(slots=True, eq=False)
class Worker:
    """One actor: where it runs, its slots, and whether it is still usable."""

    actor: Any
    name: str
    info: NodeInfo
    slots: int
    running: int = 0
    placed: int = 0
    alive: bool = True
    lost: str | None = None
    tasks: list[str] = field(default_factory=list)


class ActorPool:
    """The batch's actors. ``start`` places one on every alive node (raising, with every actor killed,
    when one cannot start); ``pick`` chooses the least loaded worker with a free slot; ``lost`` schedules
    one replacement per node (its start task is in ``starting``); ``close`` shuts them all down."""

    def __init__(
        self,
        ray: Any,
        *,
        batch_id: str,
        jobs: int,
        provider_name: str,
        options: Any,
        start_timeout: float,
        work_root: str | None,
    ) -> None:
        self.ray = ray
        self.batch_id = batch_id
        self.jobs = jobs
        self.provider_name = provider_name
        self.options = options
        self.start_timeout = start_timeout
        self.work_root = work_root
        self.workers: list[Worker] = []
        self.replaced: set[str] = set()
        self.starting: set[asyncio.Task[Worker | None]] = set()
        self.owns_ray = False
        self._actor_class: Any = None

    async def connect(self, address: str | None) -> None:
        ray = self.ray
        if ray.is_initialized():
            return
        address = address or os.environ.get("RAY_ADDRESS") or None
        # Quiet: Ray's notices (token auth, "SIGTERM handler not set" from this thread) and the actors'
        # output would garble the live view; each node keeps its logs (/tmp/ray/session_latest/logs).
        kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.ERROR}
        if address is not None:
            kwargs["address"] = address
            what = f"connect to the Ray cluster at {address!r}"
        else:
            kwargs.update(local_init_kwargs(_LOCAL_OBJECT_STORE))  # listening on 127.0.0.1 only
            what = "start a local Ray instance"
        try:
            with loopback_only() if address is None else contextlib.nullcontext():
                await asyncio.to_thread(ray.init, **kwargs)
        except Exception as exc:
            raise ProviderUnavailable(f"cannot {what}: {one_line(exc)}") from exc
        self.owns_ray = True

    async def disconnect(self) -> None:
        """Shut down the local Ray instance ``connect`` started (nothing when it joined one)."""
        if self.owns_ray:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.ray.shutdown)

    async def start(self) -> None:
        """One actor on every alive node; on any failure every actor is shut down and the error raised."""
        spawns: list[asyncio.Task[Worker]] = []
        try:
            nodes = [n for n in await asyncio.to_thread(self.ray.nodes) if n.get("Alive")]
            if not nodes:
                raise ProviderUnavailable("the Ray cluster has no alive node")
            loop = asyncio.get_running_loop()
            spawns = [loop.create_task(self._spawn(str(n["NodeID"]))) for n in nodes]
            await asyncio.gather(*spawns)
        except BaseException:
            for spawn in spawns:
                spawn.cancel()
            await asyncio.gather(*spawns, return_exceptions=True)
            await self.close()
            raise

    async def _spawn(self, node_id: str, suffix: str = "") -> Worker:
        """Place a ``NodeRunner`` on ``node_id`` and start its provider; raise when it cannot."""
        ray = self.ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        if self._actor_class is None:
            self._actor_class = ray.remote(NodeRunner)
        name = f"agent-fleet-{self.batch_id}-{node_id[:8]}{suffix}"
        config = NodeConfig(
            provider_name=self.provider_name,
            options=self.options,
            batch_id=self.batch_id,
            name=name,
            work_root=self.work_root,
        )
        actor = self._actor_class.options(
            name=name,
            num_cpus=0,
            max_concurrency=self.jobs + _CONTROL_SLOTS,
            max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=node_id, soft=False),
        ).remote(config)
        worker = Worker(
            actor=actor,
            name=name,
            info=NodeInfo(node_id=node_id, hostname="?", pid=0),
            slots=self.jobs,
            alive=False,
        )
        self.workers.append(worker)
        try:
            info: NodeInfo = await asyncio.wait_for(actor.start.remote(), self.start_timeout)
        except TimeoutError as exc:
            raise ProviderUnavailable(
                f"Ray node {node_id}: the agent-fleet actor did not start within {self.start_timeout:g}s"
            ) from exc
        except ray.exceptions.RayError as exc:
            raise ProviderUnavailable(
                f"Ray node {node_id}: the agent-fleet actor failed to start: {one_line(exc)} "
                f"(is agent-fleet installed on every node? {RAY_EXTRA_HINT})"
            ) from exc
        worker.info = info
        where = f"on Ray node {info.hostname} ({node_id[:12]})"
        match info.error_kind:
            case None:
                worker.alive = True
                return worker
            case "auth":
                raise AuthenticationError(f"{info.error} {where}")
            case "usage":
                raise UsageError(f"{info.error} {where}")
            case _:
                raise ProviderUnavailable(f"{info.error} {where}")

    async def _replace(self, lost: Worker) -> Worker | None:
        """A new actor on a dead actor's node, when the node is still alive (once per node)."""
        node_id = lost.info.node_id
        with contextlib.suppress(Exception):
            nodes = await asyncio.to_thread(self.ray.nodes)
            if any(n.get("NodeID") == node_id and n.get("Alive") for n in nodes):
                return await self._spawn(node_id, suffix="-r1")
        return None

    def lost(self, worker: Worker, reason: str, *, replace: bool) -> None:
        """``worker``'s actor died: mark it, and (``replace``, once per node) start a new one there."""
        if not worker.alive:
            return
        worker.alive = False
        worker.lost = reason
        if replace and worker.info.node_id not in self.replaced:
            self.replaced.add(worker.info.node_id)
            self.starting.add(asyncio.get_running_loop().create_task(self._replace(worker)))

    def has_free_slot(self) -> bool:
        return any(w.alive and w.running < w.slots for w in self.workers)

    def pick(self, avoid: Sequence[str] | set[str]) -> Worker | None:
        """The least loaded alive worker with a free slot, off the nodes in ``avoid`` when possible."""
        alive = [w for w in self.workers if w.alive]
        allowed = [w for w in alive if w.info.node_id not in avoid] or alive
        free = [w for w in allowed if w.running < w.slots]
        return min(free, key=lambda w: (w.running, w.placed)) if free else None

    def stop_all(self) -> None:
        """Tell every alive actor to stop its running tasks (they end ``cancelled``)."""
        for worker in self.workers:
            if worker.alive:
                with contextlib.suppress(Exception):
                    worker.actor.stop.remote()

    def cancel_starting(self) -> None:
        for starting in self.starting:
            starting.cancel()

    async def close(self) -> None:
        """Shut every actor's provider down (bounded), then kill the actors."""
        ray = self.ray
        self.cancel_starting()
        calls = []
        for worker in self.workers:
            if worker.alive:
                with contextlib.suppress(Exception):
                    calls.append(asyncio.ensure_future(worker.actor.shutdown.remote()))
        if calls:
            with contextlib.suppress(BaseException):
                await asyncio.wait(calls, timeout=_SHUTDOWN_TIMEOUT)
            for call in calls:
                call.cancel()
        for worker in self.workers:
            with contextlib.suppress(Exception):
                ray.kill(worker.actor)
