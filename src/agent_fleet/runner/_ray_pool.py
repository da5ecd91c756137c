"""The Ray backend's actors: one ``NodeRunner`` per alive node, placed, started, watched, replaced and
shut down.

``ActorPool`` owns the connection to Ray and the actors; the driver (``_ray_driver``) asks it for a
worker with a free slot, has it ask every actor for a heartbeat (``heartbeat_round``, see
``_ray_fence``) and tells it when one was lost. A node whose actor or provider cannot start is left out
(``excluded``), as is a node the operator names (``exclude``); only when no node is left does ``start``
raise. See ``ray_backend`` for the whole story.
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

from agent_fleet.errors import AgentFleetError, AuthenticationError, ProviderUnavailable, UsageError
from agent_fleet.runner._ray_fence import Health, Heartbeats
from agent_fleet.runner._ray_local import local_init_kwargs, loopback_only
from agent_fleet.runner._ray_node import NodeConfig, NodeInfo, NodeRunner

__all__ = ["RAY_EXTRA_HINT", "ActorPool", "Excluded", "Worker", "import_ray", "one_line", "where"]

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


def where(node_id: str, hostname: str | None = None) -> str:
    """A node as messages name it: ``Ray node HOST (ID)``."""
    host = f"{hostname} " if hostname and hostname != "?" else ""
    return f"Ray node {host}({node_id[:12]})"


@dataclass(slots=True, eq=False)
class Worker:
    """One actor: where it runs, its slots, and whether it is still usable (``gone`` is set when it is
    lost: the attempts on it stop waiting for it)."""

    actor: Any
    name: str
    info: NodeInfo
    slots: int
    running: int = 0
    placed: int = 0
    alive: bool = True
    lost: str | None = None
    tasks: list[str] = field(default_factory=list)
    gone: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def where(self) -> str:
        return where(self.info.node_id, self.info.hostname)


@dataclass(frozen=True, slots=True, kw_only=True)
class Excluded:
    """A node no actor of the batch runs on: it could not start one, or the operator left it out."""

    node_id: str
    hostname: str
    reason: str


class ActorPool:
    """The batch's actors. ``start`` places one on every alive node not left out (a node where one cannot
    start is ``excluded``; it raises, with every actor killed, only when none started); ``pick`` chooses
    the least loaded worker with a free slot; ``heartbeat_round`` finds the lost ones; ``lost`` fences
    one and, for an actor that died on a node still alive, schedules one replacement per node (its start
    task is in ``starting``); ``close`` shuts them all down."""

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
        fence_timeout: float,
        exclude: Sequence[str] = (),
    ) -> None:
        self.ray = ray
        self.batch_id = batch_id
        self.jobs = jobs
        self.provider_name = provider_name
        self.options = options
        self.start_timeout = start_timeout
        self.work_root = work_root
        self.fence_timeout = fence_timeout
        self.exclude = tuple(exclude)
        self.workers: list[Worker] = []
        self.excluded: list[Excluded] = []
        self.replaced: set[str] = set()
        self.starting: set[asyncio.Task[Worker | None]] = set()
        self.owns_ray = False
        self.beats = Heartbeats(fence_timeout)
        self._pings: dict[str, asyncio.Future[Health]] = {}
        self._calls: list[asyncio.Future[Any]] = []  # fire-and-forget calls, collected at close
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

    async def start(self) -> list[Excluded]:
        """One actor on every alive node but those ``exclude`` names; a node where the actor or its
        provider cannot start is left out (returned with the others left out, and kept in
        ``excluded``). Raises ``UsageError`` for an ``exclude`` that names no alive node, and, with every
        actor shut down, the nodes' error when no actor started (``AuthenticationError``,
        ``UsageError`` or ``ProviderUnavailable`` when they all failed alike, else
        ``ProviderUnavailable``)."""
        spawns: list[asyncio.Task[Worker]] = []
        try:
            every = await asyncio.to_thread(self.ray.nodes)
            if not any(n.get("Alive") for n in every):
                raise ProviderUnavailable("the Ray cluster has no alive node")
            chosen = self._leave_out(every)
            loop = asyncio.get_running_loop()
            spawns = [loop.create_task(self._spawn(str(n["NodeID"]))) for n in chosen]
            outcomes = await asyncio.gather(*spawns, return_exceptions=True)
        except BaseException:
            for spawn in spawns:
                spawn.cancel()
            await asyncio.gather(*spawns, return_exceptions=True)
            await self.close()
            raise
        errors: list[AgentFleetError] = []
        for node, outcome in zip(chosen, outcomes, strict=True):
            if isinstance(outcome, AgentFleetError):
                errors.append(outcome)
                node_id = str(node["NodeID"])
                hostname = str(node.get("NodeManagerHostname") or "?")
                self.excluded.append(Excluded(node_id=node_id, hostname=hostname, reason=str(outcome)))
            elif isinstance(outcome, BaseException):
                await self.close()
                raise outcome
        started = [w for w in self.workers if w.alive]
        for worker in self.workers:
            if not worker.alive:
                with contextlib.suppress(Exception):
                    self.ray.kill(worker.actor)  # its provider did not start: nothing to shut down
        if not started:
            await self.close()
            kinds = {type(e) for e in errors}
            kind = kinds.pop() if len(kinds) == 1 else ProviderUnavailable
            if len(errors) == 1:
                raise errors[0]
            raise kind("no Ray node can run the batch: " + "; ".join(str(e) for e in errors))
        for worker in started:
            self.beats.seen(worker.name)  # (the slowest node's start may have taken a while)
        return list(self.excluded)

    def _leave_out(self, every: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The alive nodes to place actors on: all but those ``exclude`` names (by node id or a prefix of
        at least 6 characters, host name or address). ``UsageError`` for a name that matches no node
        Ray knows, alive or dead (a node gone since, e.g. when a batch is resumed, is no error)."""
        nodes = [n for n in every if n.get("Alive")]
        left_out: set[str] = set()
        for name in self.exclude:
            matches = {
                str(n["NodeID"])
                for n in every
                if name in (n.get("NodeManagerHostname"), n.get("NodeManagerAddress"), n["NodeID"])
                or (len(name) >= 6 and str(n["NodeID"]).startswith(name))
            }
            if not matches:
                known = ", ".join(
                    f"{n.get('NodeManagerHostname')} {n.get('NodeManagerAddress')} {str(n['NodeID'])[:12]}"
                    for n in nodes
                )
                raise UsageError(f"--exclude-node {name!r} names no Ray node (alive: {known})")
            left_out |= matches
        for n in nodes:
            if str(n["NodeID"]) in left_out:
                self.excluded.append(
                    Excluded(
                        node_id=str(n["NodeID"]),
                        hostname=str(n.get("NodeManagerHostname") or "?"),
                        reason="left out by --exclude-node",
                    )
                )
        chosen = [n for n in nodes if str(n["NodeID"]) not in left_out]
        if not chosen:
            raise UsageError("--exclude-node leaves no Ray node to run the batch")
        return chosen

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
            fence_timeout=self.fence_timeout,
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
                f"{where(node_id)}: the agent-fleet actor did not start within {self.start_timeout:g}s"
            ) from exc
        except ray.exceptions.RayError as exc:
            raise ProviderUnavailable(
                f"{where(node_id)}: the agent-fleet actor failed to start: {one_line(exc)} "
                f"(is agent-fleet installed on every node? {RAY_EXTRA_HINT})"
            ) from exc
        worker.info = info
        # The node first: the error may end with the provider's stderr tail.
        message = f"{where(node_id, info.hostname)}: {info.error}"
        match info.error_kind:
            case None:
                worker.alive = True
                self.beats.seen(worker.name)  # heard from: its heartbeats are due from now on
                return worker
            case "auth":
                raise AuthenticationError(message)
            case "usage":
                raise UsageError(message)
            case _:
                raise ProviderUnavailable(message)

    async def _replace(self, lost: Worker) -> Worker | None:
        """A new actor on a dead actor's node, when the node is still alive (once per node)."""
        node_id = lost.info.node_id
        with contextlib.suppress(Exception):
            nodes = await asyncio.to_thread(self.ray.nodes)
            if any(n.get("NodeID") == node_id and n.get("Alive") for n in nodes):
                return await self._spawn(node_id, suffix="-r1")
        return None

    def lost(self, worker: Worker, reason: str, *, replace: bool) -> bool:
        """``worker`` is lost (``reason``): no more work goes to it, the attempts on it stop waiting
        (``gone``), it is told to fence itself (when it can still hear), and (``replace``: its actor
        died on a node still alive; once per node) a new one is started there. False when it was lost
        already."""
        if not worker.alive:
            return False
        worker.alive = False
        worker.lost = reason
        worker.gone.set()
        self.beats.forget(worker.name)
        ping = self._pings.pop(worker.name, None)
        if ping is not None:
            ping.cancel()
        self._call(worker, "fence", reason)
        if replace and worker.info.node_id not in self.replaced:
            self.replaced.add(worker.info.node_id)
            self.starting.add(asyncio.get_running_loop().create_task(self._replace(worker)))
        return True

    def heartbeat_round(self) -> list[tuple[Worker, str, bool]]:
        """Ask every live actor for a heartbeat (one question outstanding per actor) and take the
        answers that came: the workers now lost, each with the reason and whether its actor died (a
        replacement may start on its node). A node that fenced itself or has not answered healthy
        within the fencing bound is lost."""
        lost: list[tuple[Worker, str, bool]] = []
        for worker in self.workers:
            if not worker.alive:
                continue
            ping = self._pings.get(worker.name)
            if ping is not None and ping.done():
                del self._pings[worker.name]
                error = None if ping.cancelled() else ping.exception()
                if error is not None:
                    lost.append((worker, f"its actor died: {one_line(error)}", True))
                    continue
                if not ping.cancelled():
                    health = ping.result()
                    if health.fenced is not None:
                        lost.append((worker, f"the node fenced itself: {health.fenced}", False))
                        continue
                    self.beats.seen(worker.name)
            if worker.name not in self._pings:
                with contextlib.suppress(Exception):
                    self._pings[worker.name] = asyncio.ensure_future(worker.actor.heartbeat.remote())
        by_name = {w.name: w for w in self.workers if w.alive}
        for name, age in self.beats.overdue():
            late = by_name.get(name)
            if late is not None and all(late is not w for w, _, _ in lost):
                reason = f"no heartbeat for {age:.1f}s (the fencing bound is {self.fence_timeout:g}s)"
                lost.append((late, reason, False))
        return lost

    def _call(self, worker: Worker, method: str, *args: Any) -> None:
        """``worker.actor.<method>(*args)`` without waiting; its answer is collected at ``close``."""
        with contextlib.suppress(Exception):
            self._calls.append(asyncio.ensure_future(getattr(worker.actor, method).remote(*args)))

    def has_free_slot(self) -> bool:
        return any(w.alive and w.running < w.slots for w in self.workers)

    def any_alive(self, besides: Sequence[Worker] = ()) -> Worker | None:
        """The least loaded live worker not in ``besides``, whatever its free slots (for a push)."""
        alive = [w for w in self.workers if w.alive and all(w is not b for b in besides)]
        return min(alive, key=lambda w: (w.running, w.placed)) if alive else None

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
                self._call(worker, "stop")

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
        calls += [*self._calls, *self._pings.values()]
        self._calls, self._pings = [], {}
        if calls:
            with contextlib.suppress(BaseException):
                await asyncio.wait(calls, timeout=_SHUTDOWN_TIMEOUT)
            for call in calls:
                call.cancel()
                if call.done() and not call.cancelled():
                    call.exception()  # retrieved: a fenced actor's answer is not reported as unhandled
        for worker in self.workers:
            with contextlib.suppress(Exception):
                ray.kill(worker.actor)
