"""``run_batch_ray``: the tasks of a batch across the nodes of a Ray cluster (``run_batch(backend="ray")``).

    from agent_fleet.runner.batch import load_tasks, run_batch

    result = await run_batch(load_tasks("tasks.jsonl"), template=template, out_dir="out", jobs=4,
                             worktrees=True, backend="ray", ray_address="head:6379")

Needs the ``ray`` extra (``pip install 'agent-fleet[ray]'``) on the driver and on every node; without
it a ``ProviderUnavailable`` says so. ``ray`` is imported only when this backend runs.

Theory of operation
-------------------
Connect: to ``ray_address`` (or ``$RAY_ADDRESS``); without one a small local Ray instance is started
(and shut down at the end). A process that already called ``ray.init`` keeps its connection.

Before any work: the tasks are checked as ``run_batch`` checks them (directories, repositories and their
start commit; with ``repo_url``, ``git ls-remote`` gives the start commit; a task may not ask for
another provider than the batch's: every node runs one), then one ``NodeRunner`` actor
is placed on every alive node but those ``exclude_nodes`` names (``NodeAffinitySchedulingStrategy``,
no CPU reserved) and starts that node's one provider. A node where that fails is left out (a
``runner.node_excluded`` notice names it and why); only when no node can start does it raise
(``UsageError``, ``ProviderUnavailable`` or ``AuthenticationError``, naming every node), and then
nothing was changed.

Scheduling: the driver keeps the queue. A task goes to the least loaded node with a free slot; each
node runs at most ``jobs`` tasks at once (the actor's ``max_concurrency`` leaves room for control
calls). Each attempt is a streaming actor call carrying an epoch: event batches come back as the task
runs (the driver writes ``out_dir/<id>.jsonl`` and calls ``on_event``, so transcripts and the live
view work as locally), then the result. Worktrees are made on the node that runs the task (see
``_ray_node``); in URL mode its commits come back as a bundle. What leaves the node for good is
published by the driver once it accepted the attempt (the task's branch in a shared repository,
the push with ``push``; see ``_ray_driver``).

Fencing (``_ray_fence``): every node watches its raylet and the GCS and the driver's heartbeats, and
stops by itself (turns, provider, process) when it lost one of them; the driver asks every node for
a heartbeat and gives up a node that fenced itself or was not heard within ``fence_timeout``.

Faults: a lost node (its actor died, it was fenced or not heard from, its provider failed) gets no
more work; the attempts it ran are abandoned at once and recorded with what they did (a
``runner.attempt_failed`` notice, ``RayBatchEntry.cluster_attempts``, the ledger's history), and
their tasks go back to the queue, to another node, at most ``max_retries_per_task`` times; after that
a task is ``failed`` (``error_code="node_lost"``). A dead actor on a live node is replaced once. When
no node is left the batch stops (fatal): unfinished tasks stay interrupted or queued for
``--resume``. ``stop`` stops the batch as ``run_batch`` does: every node is told to stop (running
tasks end ``cancelled``), tasks not started are reported ``cancelled``. Cancelling ``run_batch_ray``
stops the nodes, waits briefly for running tasks to clean up, cancels what is left (``ray.cancel``)
and re-raises. The actors are always shut down and killed; ``summary.json`` is always written (with
``"backend": "ray"`` and a ``nodes`` list).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_fleet.errors import UsageError
from agent_fleet.runner._ray_fence import DEFAULT_FENCE_TIMEOUT
from agent_fleet.runner._ray_pool import RAY_EXTRA_HINT, import_ray
from agent_fleet.runner._ray_repo import PushOutcome
from agent_fleet.runner._types import EventSink
from agent_fleet.runner.batch import BatchEntry, BatchResult, BatchTask, check_task_ids
from agent_fleet.runner.ledger import Ledger
from agent_fleet.runner.task import Task
from agent_fleet.runner.transcript import Redactor

__all__ = [
    "DEFAULT_FENCE_TIMEOUT",
    "RAY_EXTRA_HINT",
    "PushOutcome",
    "RayBatchEntry",
    "RayBatchResult",
    "RayNode",
    "import_ray",
    "run_batch_ray",
]

DEFAULT_START_TIMEOUT = 180.0


@dataclass(frozen=True, slots=True, kw_only=True)
class RayBatchEntry(BatchEntry):
    """A ``BatchEntry`` plus where it ran: the node of the last attempt, the attempts made on the cluster,
    why earlier attempts failed, and (repository URL mode) the git bundle of the task's commits in
    ``out_dir`` and, with ``push``, what became of pushing its branch (``PushOutcome``).

    ``cluster_attempts``: every attempt of this run, abandoned ones included, with what it did (one
    mapping each: ``attempt``, ``epoch``, ``node_id``, ``hostname``, ``actor``, ``started_at``,
    ``ended_at``, ``outcome`` (``accepted``, ``abandoned``: its node was given up, ``lost``: its actor
    died, ``provider_failed``, ``error``, ``cancelled``), ``reason``, ``session_id``, ``turns``,
    ``commands``, ``events``, and in a shared repository the ``attempt_branch`` still holding an
    abandoned attempt's ``commit``)."""

    node: str | None = None
    node_id: str | None = None
    attempts: int = 0
    failures: tuple[str, ...] = ()
    bundle: Path | None = None
    push: PushOutcome | None = None
    cluster_attempts: tuple[Mapping[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = BatchEntry.to_dict(self)  # not super(): slotted dataclasses break its zero-argument form
        out.update(
            node=self.node,
            node_id=self.node_id,
            attempts=self.attempts,
            failures=[Redactor().text(f) for f in self.failures],  # may quote a node's output
            bundle=str(self.bundle) if self.bundle is not None else None,
            push=self.push.to_dict() if self.push is not None else None,
            cluster_attempts=[Redactor().value(dict(a)) for a in self.cluster_attempts],
        )
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RayNode:
    """One actor of the batch (or a node left out: ``actor`` empty): its node, the actor's and its
    provider's pids, the tasks placed on it, and why no more work went to it (``lost``: its actor died,
    it was fenced, its provider failed, it could not start, ``--exclude-node``)."""

    node_id: str
    hostname: str
    actor: str
    provider_pid: int | None
    tasks: tuple[str, ...] = ()
    lost: str | None = None
    pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "hostname": self.hostname,
            "actor": self.actor,
            "pid": self.pid,
            "provider_pid": self.provider_pid,
            "tasks": list(self.tasks),
            "lost": self.lost,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RayBatchResult(BatchResult):
    """A ``BatchResult`` plus the batch's id (it names the actors and the nodes' work directories,
    ``<tmp>/agent-fleet-ray/<batch_id>``) and its actors."""

    batch_id: str = ""
    nodes: tuple[RayNode, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out = BatchResult.to_dict(self)
        out["backend"] = "ray"
        out["batch_id"] = self.batch_id
        out["nodes"] = [n.to_dict() for n in self.nodes]
        return out


async def run_batch_ray(
    tasks: Sequence[BatchTask],
    *,
    template: Task,
    out_dir: str | os.PathLike[str],
    jobs: int = 4,
    worktrees: bool = False,
    provider_name: str = "codex",
    options: Any = None,
    cwd: str | os.PathLike[str] | None = None,
    on_event: EventSink | None = None,
    on_result: Callable[[BatchEntry], None] | None = None,
    stop: asyncio.Event | None = None,
    ray_address: str | None = None,
    repo_url: str | None = None,
    push: bool = False,
    max_retries_per_task: int | None = None,
    start_timeout: float = DEFAULT_START_TIMEOUT,
    work_root: str | None = None,
    fence_timeout: float = DEFAULT_FENCE_TIMEOUT,
    exclude_nodes: Sequence[str] = (),
    meta: Mapping[str, Any] | None = None,
    resume_from: Ledger | None = None,
    complete: Callable[[RayBatchEntry], RayBatchEntry] | None = None,
) -> RayBatchResult:
    """Run ``tasks`` on a Ray cluster (see the module docstring); the arguments are ``run_batch``'s, plus:

    - ``jobs``: tasks at a time *per node*.
    - ``ray_address``: the cluster (``host:port`` or ``auto``); default ``$RAY_ADDRESS``, else a local
      instance (started here and shut down at the end).
    - ``repo_url``: a git URL each node clones (once per batch) instead of a path the nodes share;
      tasks then run at the repository's top level in worktrees (``worktrees`` is implied) and their
      commits come back as ``out_dir/<id>.bundle`` (an earlier run's is kept in
      ``out_dir/earlier-bundles/``; a resumed task continues from it on whichever node runs it).
    - ``push`` (needs ``repo_url``): each task's branch ``agent-fleet/<id>`` is also pushed to the URL
      from its node, never forced. A refused push (the remote's branch has commits the task's lacks, no
      access) is recorded in the entry's ``push`` and a ``runner.push`` notice, and turns a success into
      ``failed`` (``error_code="push_failed"``); the commits are still in the bundle.
    - ``max_retries_per_task``: how often a task whose node was lost (its actor died, it was fenced,
      its provider failed) is run again, on another node; default: the template's ``retries``
      (``--retries``).
    - ``start_timeout``: seconds for each node's actor and provider to start.
    - ``work_root``: node-local directory for clones and worktrees (default: each node's temp dir).
    - ``fence_timeout``: the fencing bound in seconds (``--fence-timeout``; see ``_ray_fence``): a node
      that cannot reach its raylet or the GCS stops by itself within it, and the driver gives up a node
      it has not heard from within it.
    - ``exclude_nodes``: nodes to leave out (``--exclude-node``): a node id (or a prefix of at least 6
      characters), host name or address each.
    - ``complete``: called with each entry before it is recorded (``run_batch`` adds what it recorded
      and planned for the task, so the ledger holds the whole record as soon as the task ends).

    Returns a ``RayBatchResult`` (also written to ``out_dir/summary.json``). Raises ``UsageError`` (bad
    arguments or tasks, an ``exclude_nodes`` entry that names no node), and when no node can run the
    batch ``ProviderUnavailable`` (no ray, no cluster, no node's provider can start) or
    ``AuthenticationError`` (no node has a credential), before any work. A node where the provider
    cannot start is left out (a ``runner.node_excluded`` notice) and the batch runs on the others.
    """
    if jobs < 1:
        raise UsageError(f"-j/--jobs must be >= 1, not {jobs}")
    if max_retries_per_task is None:
        max_retries_per_task = template.retries
    if max_retries_per_task < 0:
        raise UsageError(f"max_retries_per_task must be >= 0, not {max_retries_per_task}")
    if start_timeout <= 0:
        raise UsageError(f"start_timeout must be positive, not {start_timeout}")
    if not fence_timeout > 0 or fence_timeout == float("inf"):
        raise UsageError(f"fence_timeout must be a positive number of seconds, not {fence_timeout}")
    if push and repo_url is None:
        raise UsageError("--push needs --repo-url (each task's branch is pushed to that repository)")
    if not tasks:
        raise UsageError("no tasks")
    check_task_ids(tasks)
    from agent_fleet.runner._ray_driver import RayBatch  # it imports the result types above

    ray = import_ray()
    batch = RayBatch(
        ray,
        template=template,
        out=Path(out_dir),
        jobs=jobs,
        worktrees=worktrees or repo_url is not None,
        provider_name=provider_name,
        options=options,
        on_event=on_event,
        on_result=on_result,
        repo_url=repo_url,
        push=push,
        max_retries=max_retries_per_task,
        start_timeout=start_timeout,
        work_root=work_root,
        fence_timeout=fence_timeout,
        exclude_nodes=exclude_nodes,
        meta=meta,
        resume_from=resume_from,
        complete=complete,
    )
    await batch.prepare(tasks, cwd)
    return await batch.run(ray_address, stop)
