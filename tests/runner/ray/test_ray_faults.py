"""A Ray cluster failing as an operator's does, on the simulated cluster: a node's raylet killed with
SIGKILL mid-task (shared repository, and ``--repo-url --push``), a node whose codex cannot start, an
app-server that dies on one node mid-batch, a node the operator leaves out.

Each test adds the node it breaks (``add_node``), so the module's three nodes stay healthy. The model
requests of the tasks on the victim node are held (``Hold``) until the node is broken, then answered:
an abandoned attempt that still runs on a dead raylet's node may try to commit, and must change
nothing the batch keeps."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ray

from agent_fleet import Spec, System
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import GateConfig, Task, TaskEvent
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.runner.ledger import Ledger
from agent_fleet.runner.ray_backend import RayBatchEntry, RayBatchResult
from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer

from ...procs import alive, descendants
from ..conftest import git, make_repo
from ..scripted import TAG, ScriptedAgent, commit, write_file
from .conftest import add_node, kill_raylet, live_agent_fleet_actors, wait_dead

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(420)]

FENCE = 10.0  # the fencing bound of these batches (the default)


def _template(repo: Path | None) -> Task:
    return Task(
        spec=Spec(prompt="-", cwd=repo, sandbox="workspace-write"),
        gate=GateConfig(require_commit=True),
        max_followups=0,
        retry_delay=0.01,
    )


def _log(repo: Path, ref: str) -> list[str]:
    return git(repo, "log", "--format=%s", ref).splitlines()


def _records(transcript: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in transcript.read_text().splitlines()]


def _ends_finished(transcript: Path) -> bool:
    records = _records(transcript)
    return bool(records) and records[-1]["type"] == "System" and records[-1]["subtype"] == "runner.finished"


def _node_of(event: TaskEvent) -> str | None:
    if isinstance(event.event, System) and event.event.subtype == "runner.placed":
        return str(event.event.data["node_id"])
    return None


class Hold:
    """Wraps a responder: every task's first model request waits until that task is released
    (``release``, or ``release_all``); ``arrived`` is set once ``expect`` tasks are waiting."""

    def __init__(self, inner: Callable[[RecordedRequest], Reply | None], expect: int) -> None:
        self.inner, self.expect = inner, expect
        self.seen: set[str] = set()
        self.released: set[str] = set()
        self.everyone = False
        self.arrived = threading.Event()
        self._cond = threading.Condition()

    def release(self, key: str) -> None:
        with self._cond:
            self.released.add(key)
            self._cond.notify_all()

    def release_all(self) -> None:
        with self._cond:
            self.everyone = True
            self._cond.notify_all()

    def __call__(self, request: RecordedRequest) -> Reply | None:
        match = next((TAG.search(str(i)) for i in request.input if TAG.search(str(i))), None)
        key = match.group(1) if match else ""
        with self._cond:
            first = key not in self.seen
            self.seen.add(key)
            if len(self.seen) >= self.expect:
                self.arrived.set()
            if first:
                self._cond.wait_for(lambda: self.everyone or key in self.released, timeout=120)
        return self.inner(request)


def _exits_by(pid: int, deadline: float) -> bool:
    """``pid`` is gone (or a zombie) by the monotonic ``deadline``."""
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


async def _kill_a_raylet_mid_task(
    cluster: Any,
    scripted_model: ScriptedModelServer,
    codex_options: CodexOptions,
    out: Path,
    *,
    repo: Path | None,
    repo_url: str | None,
    node_name: str,
) -> tuple[RayBatchResult, str, str, float, list[TaskEvent]]:
    """Four tasks, one per node (the fourth node added for this test); once each waits for the model,
    the added node's raylet is SIGKILLed, then every task is answered (write, commit). Returns the
    result, the victim task and node, when the raylet died and the batch-level notices."""
    victim_node = add_node(cluster, node_name)
    victim_node_id = victim_node.node_id
    ids = [f"{node_name}-t{i}" for i in range(4)]
    hold = Hold(
        ScriptedAgent({i: [[write_file(f"{i}.txt", f"work of {i}"), commit(f"task {i}")]] for i in ids}),
        expect=len(ids),
    )
    scripted_model.responder = hold
    placed: dict[str, str] = {}
    actors: dict[str, str] = {}
    tree: list[int] = []
    batch_notices: list[TaskEvent] = []

    def on_event(event: TaskEvent) -> None:
        node = _node_of(event)
        if node is not None and isinstance(event.event, System):
            placed.setdefault(event.task_id, node)
            actors.setdefault(event.task_id, str(event.event.data["actor"]))
        if not event.task_id:
            batch_notices.append(event)

    killed_at = 0.0
    killed_wall: list[float] = []
    given_up = asyncio.Event()

    def on_notice(event: TaskEvent) -> None:
        on_event(event)
        if not event.task_id:
            given_up.set()

    async def break_the_node() -> str:
        nonlocal killed_at
        assert await asyncio.to_thread(hold.arrived.wait, 180), "the tasks never asked the model"
        victim = next(t for t, n in placed.items() if n == victim_node_id)
        # Every process of the node's actor: itself, the reaper, the app-server and what it started.
        health = await ray.get_actor(actors[victim]).heartbeat.remote()
        tree.extend(descendants(health.pid))
        kill_raylet(victim_node)
        killed_at = time.monotonic()
        killed_wall.append(time.time())
        for task_id in ids:
            if task_id != victim:
                hold.release(task_id)
        # Once the driver gave the node up, the abandoned attempt is answered too: if it still runs,
        # it writes and commits; nothing of that may reach what the batch keeps.
        await asyncio.wait_for(given_up.wait(), FENCE + 5)
        hold.release(victim)
        return victim

    breaker = asyncio.ensure_future(break_the_node())
    try:
        result = await asyncio.wait_for(
            run_batch(
                [BatchTask(id=i, prompt=f"[task:{i}] write {i}.txt and commit") for i in ids],
                template=_template(repo),
                out_dir=out,
                jobs=1,
                worktrees=repo is not None,
                options=codex_options,
                on_event=on_notice,
                backend="ray",
                repo_url=repo_url,
                push=repo_url is not None,
                fence_timeout=FENCE,
            ),
            360,
        )
    finally:
        hold.release_all()
        # The rest of the killed node's processes (its agents) end too; they are this test's. The next
        # test starts once Ray counts the node dead (else its batch would try to place an actor there).
        await asyncio.to_thread(cluster.remove_node, victim_node, False)
        await asyncio.to_thread(wait_dead, victim_node.node_id)
    victim = await breaker
    assert isinstance(result, RayBatchResult)
    # Given up before Ray's own health check declares the node dead (about 15 s): within the bound.
    abandoned = next(e for e in result.entries if e.result.task_id == victim)
    assert isinstance(abandoned, RayBatchEntry) and abandoned.cluster_attempts, abandoned.result.reason
    gave_up_after = float(abandoned.cluster_attempts[0]["ended_at"]) - killed_wall[0]
    assert gave_up_after < FENCE, f"the node was given up {gave_up_after:.1f}s after its raylet died"
    # Nothing of the dead node runs past the bound: its actor, reaper, app-server and their children.
    deadline = killed_at + FENCE
    outlived = [pid for pid in tree if not _exits_by(pid, deadline)]
    assert len(tree) >= 3 and outlived == [], f"outlived the bound: {outlived} of {tree}"
    return result, victim, victim_node_id, killed_at, batch_notices


def _check_the_lost_node(
    result: RayBatchResult,
    out: Path,
    victim: str,
    victim_node: str,
    killed_at: float,
    notices: list[TaskEvent],
) -> dict[str, Any]:
    """What every raylet-kill test checks; returns the victim's accepted attempt."""
    assert {e.result.task_id: e.result.status for e in result.entries} == {
        e.result.task_id: "succeeded" for e in result.entries
    }, [e.result.reason for e in result.entries]
    entry = next(e for e in result.entries if e.result.task_id == victim)
    assert isinstance(entry, RayBatchEntry)
    assert entry.attempts == 2 and entry.node_id != victim_node
    # The ledger and the record list both attempts: the abandoned one with where it ran and why.
    abandoned, accepted = entry.cluster_attempts
    assert (abandoned["outcome"], abandoned["node_id"]) == ("abandoned", victim_node), abandoned
    assert "raylet" in str(abandoned["reason"]), abandoned
    assert accepted["outcome"] == "accepted" and accepted["node_id"] != victim_node
    ledger = Ledger.open(out)
    try:
        history = [d for what, d in ledger.history(victim) if what == "attempt"]
    finally:
        ledger.close()
    assert [(h["attempt"], h["outcome"]) for h in history] == [(1, "abandoned"), (2, "accepted")]
    summary = json.loads((out / "summary.json").read_text())
    recorded = next(t for t in summary["tasks"] if t["task_id"] == victim)
    assert [a["outcome"] for a in recorded["cluster_attempts"]] == ["abandoned", "accepted"]
    assert recorded["attempts"] >= 2 and recorded["retries"] == 1
    assert [n.data["node_id"] for n in (e.event for e in notices) if isinstance(n, System)] == [victim_node]
    # Nothing of the dead node runs past the bound: its actor and its app-server are gone.
    lost = next(n for n in result.nodes if n.node_id == victim_node)
    assert lost.lost is not None and "raylet" in lost.lost
    assert lost.pid is not None and lost.provider_pid is not None
    deadline = killed_at + FENCE
    assert _exits_by(lost.pid, deadline), "the dead node's NodeRunner outlived the bound"
    assert _exits_by(lost.provider_pid, deadline), "the dead node's app-server outlived the bound"
    # Every transcript ends with the task's end; the victim's says the attempt was abandoned.
    for e in result.entries:
        assert _ends_finished(out / f"{e.result.task_id}.jsonl"), e.result.task_id
    failed = [
        r
        for r in _records(out / f"{victim}.jsonl")
        if r["type"] == "System" and r["subtype"] == "runner.attempt_failed"
    ]
    assert len(failed) == 1 and failed[0]["data"]["retry"] is True
    assert live_agent_fleet_actors() == []
    return accepted


async def test_a_raylet_killed_mid_task_is_fenced_and_its_attempt_moves_no_branch(
    ray_cluster: Any,
    repo: Path,
    scripted_model: ScriptedModelServer,
    codex_options: CodexOptions,
    tmp_path: Path,
) -> None:
    start = git(repo, "rev-parse", "HEAD")
    out = tmp_path / "out"
    result, victim, victim_node, killed_at, notices = await _kill_a_raylet_mid_task(
        ray_cluster, scripted_model, codex_options, out, repo=repo, repo_url=None, node_name="shared-v"
    )
    accepted = _check_the_lost_node(result, out, victim, victim_node, killed_at, notices)
    # Every task's branch holds exactly one attempt's work: its one commit, on the start.
    for e in result.entries:
        branch = f"agent-fleet/{e.result.task_id}"
        assert _log(repo, branch) == [f"task {e.result.task_id}", "initial"], branch
        assert git(repo, "rev-parse", f"{branch}~1") == start
    # The victim's branch is the accepted attempt's commit, whatever the abandoned one did.
    assert git(repo, "rev-parse", f"agent-fleet/{victim}") == accepted["commit"]
    entry = next(e for e in result.entries if e.result.task_id == victim)
    assert isinstance(entry, RayBatchEntry)
    abandoned = entry.cluster_attempts[0]
    if abandoned["commit"] is not None:  # it committed before it was stopped: kept apart, recorded
        name = str(abandoned["attempt_branch"])
        assert git(repo, "rev-parse", name) == abandoned["commit"] != accepted["commit"]
    # No worktree is left registered, and the repository's own checkout is untouched.
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "rev-parse", "HEAD") == start and not git(repo, "status", "--porcelain")


async def test_a_raylet_killed_mid_task_with_push_pushes_only_the_recorded_attempt(
    ray_cluster: Any,
    scripted_model: ScriptedModelServer,
    codex_options: CodexOptions,
    tmp_path: Path,
) -> None:
    seed = make_repo(tmp_path / "seed")
    start = git(seed, "rev-parse", "HEAD")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    out = tmp_path / "out"
    result, victim, victim_node, killed_at, notices = await _kill_a_raylet_mid_task(
        ray_cluster,
        scripted_model,
        codex_options,
        out,
        repo=None,
        repo_url=f"file://{origin}",
        node_name="url-v",
    )
    accepted = _check_the_lost_node(result, out, victim, victim_node, killed_at, notices)
    # The remote's branches are the recorded attempts': one commit each, on the start, pushed once.
    for e in result.entries:
        assert isinstance(e, RayBatchEntry) and e.push is not None and e.push.pushed, e.result.reason
        branch = f"agent-fleet/{e.result.task_id}"
        assert git(origin, "rev-parse", branch) == e.push.commit
        assert _log(origin, branch) == [f"task {e.result.task_id}", "initial"], branch
        assert git(origin, "rev-parse", f"{branch}~1") == start
    assert git(origin, "rev-parse", f"agent-fleet/{victim}") == accepted["commit"]
    pushes = [
        r
        for r in _records(out / f"{victim}.jsonl")
        if r["type"] == "System" and r["subtype"] == "runner.push"
    ]
    assert [p["data"]["commit"] for p in pushes] == [accepted["commit"]]


async def test_a_node_whose_codex_cannot_start_is_left_out_and_the_batch_runs_on(
    ray_cluster: Any,
    repo: Path,
    scripted_model: ScriptedModelServer,
    codex_options: CodexOptions,
    tmp_path: Path,
) -> None:
    bad = add_node(ray_cluster, "broken-codex", {"CODEX_BIN": str(tmp_path / "no-codex-here")})
    try:
        ids = ["b0", "b1", "b2"]
        scripted_model.responder = ScriptedAgent(
            {i: [[write_file(f"{i}.txt", i), commit(f"task {i}")]] for i in ids}
        )
        seen: list[TaskEvent] = []
        result = await asyncio.wait_for(
            run_batch(
                [BatchTask(id=i, prompt=f"[task:{i}] write and commit") for i in ids],
                template=_template(repo),
                out_dir=tmp_path / "out",
                jobs=1,
                worktrees=True,
                options=codex_options,
                on_event=seen.append,
                backend="ray",
            ),
            300,
        )
        assert isinstance(result, RayBatchResult)
        assert [e.result.status for e in result.entries] == ["succeeded"] * 3
        assert result.stopped is None and not result.fatal
        assert bad.node_id not in {e.node_id for e in result.entries if isinstance(e, RayBatchEntry)}
        # The operator is told which node was left out and why, first in the node, then the cause.
        notices = [e.event for e in seen if not e.task_id]
        [excluded] = [n for n in notices if isinstance(n, System) and n.data.get("node_id") == bad.node_id]
        assert len(notices) == 1, [(n.data["node_id"][:12], n.data["reason"]) for n in notices]
        assert isinstance(excluded, System) and excluded.subtype == "runner.node_excluded"
        assert excluded.data["node_id"] == bad.node_id
        reason = str(excluded.data["reason"])
        assert reason.startswith("Ray node ") and bad.node_id[:12] in reason.split(":")[0]
        assert "CODEX_BIN" in reason
        summary = json.loads((tmp_path / "out" / "summary.json").read_text())
        [node] = [n for n in summary["nodes"] if n["node_id"] == bad.node_id]
        assert node["actor"] == "" and "CODEX_BIN" in node["lost"]
        assert live_agent_fleet_actors() == []
    finally:
        ray_cluster.remove_node(bad)


async def test_an_app_server_that_dies_on_one_node_costs_only_that_node(
    repo: Path,
    scripted_model: ScriptedModelServer,
    codex_options: CodexOptions,
    tmp_path: Path,
) -> None:
    ids = ["c0", "c1", "c2"]
    hold = Hold(
        ScriptedAgent({i: [[write_file(f"{i}.txt", i), commit(f"task {i}")]] for i in ids}), expect=len(ids)
    )
    scripted_model.responder = hold
    placed: dict[str, str] = {}
    actors: dict[str, str] = {}

    def on_event(event: TaskEvent) -> None:
        node = _node_of(event)
        if node is not None and isinstance(event.event, System):
            placed.setdefault(event.task_id, node)
            actors.setdefault(event.task_id, str(event.event.data["actor"]))

    async def crash_one_app_server() -> str:
        assert await asyncio.to_thread(hold.arrived.wait, 180)
        victim = ids[1]
        health = await ray.get_actor(actors[victim]).heartbeat.remote()
        assert health.provider_pid is not None
        os.kill(health.provider_pid, signal.SIGKILL)  # the app-server this test's cluster started
        hold.release_all()
        return victim

    crasher = asyncio.ensure_future(crash_one_app_server())
    try:
        result = await asyncio.wait_for(
            run_batch(
                [BatchTask(id=i, prompt=f"[task:{i}] write and commit") for i in ids],
                template=_template(repo),
                out_dir=tmp_path / "out",
                jobs=1,
                worktrees=True,
                options=codex_options,
                on_event=on_event,
                backend="ray",
            ),
            300,
        )
    finally:
        hold.release_all()
    victim = await crasher
    assert isinstance(result, RayBatchResult)
    assert [e.result.status for e in result.entries] == ["succeeded"] * 3, [
        e.result.reason for e in result.entries
    ]
    assert result.stopped is None and not result.fatal
    entry = next(e for e in result.entries if e.result.task_id == victim)
    assert isinstance(entry, RayBatchEntry) and entry.attempts == 2 and entry.node_id != placed[victim]
    assert entry.cluster_attempts[0]["outcome"] == "provider_failed"
    lost = next(n for n in result.nodes if n.node_id == placed[victim])
    assert lost.lost is not None and "provider failed" in lost.lost
    for i in ids:
        assert _log(repo, f"agent-fleet/{i}") == [f"task {i}", "initial"]


async def test_exclude_node_leaves_a_node_out(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    head = ray.get_runtime_context().get_node_id()
    ids = ["x0", "x1"]
    scripted_model.responder = ScriptedAgent(
        {i: [[write_file(f"{i}.txt", i), commit(f"task {i}")]] for i in ids}
    )
    result = await asyncio.wait_for(
        run_batch(
            [BatchTask(id=i, prompt=f"[task:{i}] write and commit") for i in ids],
            template=_template(repo),
            out_dir=tmp_path / "out",
            jobs=1,
            worktrees=True,
            options=codex_options,
            backend="ray",
            exclude_nodes=[head[:8]],
        ),
        300,
    )
    assert isinstance(result, RayBatchResult)
    assert [e.result.status for e in result.entries] == ["succeeded"] * 2
    assert head not in {e.node_id for e in result.entries if isinstance(e, RayBatchEntry)}
    [left] = [n for n in result.nodes if n.node_id == head]
    assert left.actor == "" and left.lost == "left out by --exclude-node"


async def test_when_no_node_is_left_the_batch_stops_resumable_and_a_resume_finishes_it(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    # One node runs the batch (the others are left out); its app-server dies mid-task.
    alive_nodes = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    keep = ray.get_runtime_context().get_node_id()
    ids = ["n0", "n1"]
    # (n0's resumed session, if codex can resume it, asks for its second turn: the same work)
    work = {i: [[write_file(f"{i}.txt", i), commit(f"task {i}")]] * 2 for i in ids}
    hold = Hold(ScriptedAgent(work), expect=1)
    scripted_model.responder = hold
    actors: dict[str, str] = {}
    seen: list[TaskEvent] = []

    def on_event(event: TaskEvent) -> None:
        seen.append(event)
        if isinstance(event.event, System) and event.event.subtype == "runner.placed":
            actors.setdefault(event.task_id, str(event.event.data["actor"]))

    async def crash() -> None:
        assert await asyncio.to_thread(hold.arrived.wait, 180)
        health = await ray.get_actor(actors["n0"]).heartbeat.remote()
        assert health.provider_pid is not None
        os.kill(health.provider_pid, signal.SIGKILL)
        hold.release_all()

    crasher = asyncio.ensure_future(crash())
    out = tmp_path / "out"
    try:
        first = await asyncio.wait_for(
            run_batch(
                [BatchTask(id=i, prompt=f"[task:{i}] write and commit") for i in ids],
                template=_template(repo),
                out_dir=out,
                jobs=1,
                worktrees=True,
                options=codex_options,
                on_event=on_event,
                backend="ray",
                exclude_nodes=[n for n in alive_nodes if n != keep],
            ),
            300,
        )
    finally:
        hold.release_all()
    await crasher
    assert first.fatal and first.stopped is not None and "no Ray node is left" in first.stopped
    assert keep[:12] in first.stopped and "provider failed" in first.stopped
    summary = json.loads((out / "summary.json").read_text())
    states = {t["task_id"]: t["state"] for t in summary["tasks"]}
    assert states == {"n0": "interrupted", "n1": "queued"}, summary["tasks"]
    assert _ends_finished(out / "n0.jsonl")
    excluded = [e.event.data["node_id"] for e in seen if not e.task_id and isinstance(e.event, System)]
    assert set(excluded) == set(alive_nodes)  # those left out, then the one whose provider died
    # The nodes are back: --resume runs what is left, on any node.
    resumed = await asyncio.wait_for(
        run_batch(
            None,
            template=_template(repo),
            out_dir=out,
            jobs=1,
            worktrees=True,
            options=codex_options,
            backend="ray",
            resume=True,
        ),
        300,
    )
    assert [e.result.status for e in resumed.entries] == ["succeeded", "succeeded"], [
        e.result.reason for e in resumed.entries
    ]
    for i in ids:
        assert _log(repo, f"agent-fleet/{i}") == [f"task {i}", "initial"]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert live_agent_fleet_actors() == []
