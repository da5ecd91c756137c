"""``run_batch(backend="ray")`` / ``agent-fleet batch --backend ray`` on a simulated 3-node cluster, with the
real codex binary (one app-server per node) and the scripted model."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray

from agent_fleet import Spec, System
from agent_fleet.cli import describe
from agent_fleet.codex import CodexOptions
from agent_fleet.errors import UsageError
from agent_fleet.runner import GateConfig, Task, TaskEvent
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.runner.ledger import Ledger, LedgerRow
from agent_fleet.runner.ray_backend import RayBatchEntry, RayBatchResult
from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer

from ..conftest import git, make_repo
from ..scripted import ScriptedAgent, commit, run, write_file
from .conftest import NODES, live_agent_fleet_actors, node_names

SCHEMA = Path(__file__).resolve().parents[3] / "docs" / "summary.schema.json"

# The first test also pays for starting the cluster (about 10 s on an idle 2-core machine).
pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(300)]


def _template(repo: Path) -> Task:
    return Task(
        spec=Spec(prompt="-", cwd=repo, sandbox="workspace-write"),
        gate=GateConfig(require_commit=True),
        max_followups=0,
    )


def _branches(repo: Path) -> list[str]:
    return sorted(git(repo, "branch", "--list", "agent-fleet/*", "--format=%(refname:short)").split())


def _exits(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _notices(transcript: Path, subtype: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    return [r for r in records if r["type"] == "System" and r["subtype"] == f"runner.{subtype}"]


def ledger_rows(out: Path) -> list[LedgerRow]:
    ledger = Ledger.open(out)
    try:
        return list(ledger.rows())
    finally:
        ledger.close()


class Parking:
    """Wraps a responder: the first model request of ``victim`` waits until ``release`` is set."""

    def __init__(self, inner: ScriptedAgent, victim: str) -> None:
        self.inner, self.victim = inner, victim
        self.parked, self.release = threading.Event(), threading.Event()
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Reply | None:
        if request.contains(f"[task:{self.victim}]"):
            with self._lock:
                first = not self.parked.is_set()
                self.parked.set()
            if first:
                self.release.wait(60)
                return Reply.text("too late: the actor that asked is gone")
        return self.inner(request)


async def test_six_tasks_spread_over_the_nodes_and_a_killed_actor_is_rescheduled(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    ids = [f"t{i}" for i in range(6)]
    victim = "t4"
    parking = Parking(
        ScriptedAgent({i: [[write_file(f"{i}.txt", f"work of {i}"), commit(f"task {i}")]] for i in ids}),
        victim,
    )
    scripted_model.responder = parking
    start = git(repo, "rev-parse", "HEAD")
    events: list[TaskEvent] = []
    placed: dict[str, list[dict[str, Any]]] = {}

    def on_event(event: TaskEvent) -> None:
        events.append(event)
        if isinstance(event.event, System) and event.event.subtype == "runner.placed":
            placed.setdefault(event.task_id, []).append(event.event.data)

    async def kill_the_victims_actor() -> str:
        assert await asyncio.to_thread(parking.parked.wait, 90), "the victim never asked the model"
        actor = placed[victim][0]["actor"]
        ray.kill(ray.get_actor(actor))
        return str(placed[victim][0]["node_id"])

    out = tmp_path / "out"
    killer = asyncio.ensure_future(kill_the_victims_actor())
    try:
        result = await asyncio.wait_for(
            run_batch(
                [BatchTask(id=i, prompt=f"[task:{i}] write {i}.txt and commit") for i in ids],
                template=_template(repo),
                out_dir=out,
                jobs=2,
                worktrees=True,
                options=codex_options,
                on_event=on_event,
                backend="ray",
            ),
            240,
        )
    finally:
        parking.release.set()
    killed_node = await killer
    assert isinstance(result, RayBatchResult)
    summary = json.loads((out / "summary.json").read_text())
    assert {t["task_id"]: t["status"] for t in summary["tasks"]} == {i: "succeeded" for i in ids}, summary
    assert summary["backend"] == "ray" and summary["stopped"] is None

    # Every node ran tasks (the custom resources name the nodes), each on its own app-server.
    names = node_names()
    assert len(names) == NODES
    originals = [n for n in summary["nodes"] if not n["actor"].endswith("-r1")]
    assert {names[n["node_id"]] for n in originals if n["tasks"]} == set(names.values())
    assert len({n["provider_pid"] for n in originals}) == NODES

    # The victim failed on the killed node with a clear reason, then ran once more on another node.
    entry = next(e for e in result.entries if e.result.task_id == victim)
    assert isinstance(entry, RayBatchEntry)
    assert entry.attempts == 2 and entry.node_id != killed_node
    # The summary counts the retry and keeps what each task did, as for a local batch.
    victim_summary = next(t for t in summary["tasks"] if t["task_id"] == victim)
    assert (
        victim_summary["retries"] == 1
        and victim_summary["prompt"] == f"[task:{victim}] write {victim}.txt and commit"
    )
    assert victim_summary["attempts"] == 2, "the lost attempt tried a turn too"
    assert all(t["commands"] and t["model"] for t in summary["tasks"])
    assert (out / "report.html").is_file()
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(summary)
    assert entry.failures[0].startswith("attempt 1 on Ray node ") and "ActorDiedError" in entry.failures[0]
    assert [a["outcome"] for a in victim_summary["cluster_attempts"]] == ["lost", "accepted"]
    assert [p["node_id"] for p in placed[victim]] == [killed_node, entry.node_id]
    failed = _notices(out / f"{victim}.jsonl", "attempt_failed")
    assert len(failed) == 1 and failed[0]["data"]["retry"] is True
    shown = [describe(e) for e in events if e.task_id == victim and "attempt_failed" in str(e.event)]
    assert shown and str(shown[0]).endswith("(retrying)")  # the live view says so
    lost = next(n for n in summary["nodes"] if n["node_id"] == killed_node and n["lost"])
    assert "ActorDiedError" in lost["lost"]

    # Results came back: branches with the task's commit on top of the start, no worktree left.
    assert _branches(repo) == [f"agent-fleet/{i}" for i in ids]
    for i in ids:
        assert git(repo, "log", "-1", "--format=%s", f"agent-fleet/{i}") == f"task {i}"
        assert git(repo, "rev-parse", f"agent-fleet/{i}~1") == start
        assert _notices(out / f"{i}.jsonl", "finished"), f"{i}: transcript incomplete"
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "rev-parse", "HEAD") == start and not git(repo, "status", "--porcelain")

    # The live view saw every task finish; the killed actor's app-server is gone; no actor is left.
    finished = {
        e.task_id for e in events if isinstance(e.event, System) and e.event.subtype == "runner.finished"
    }
    assert finished == set(ids)
    assert await asyncio.to_thread(_exits, lost["provider_pid"], 15), (
        "the killed actor's app-server outlived it"
    )
    # Each node's box was in the fleet's private state directory (never the shared temp dir), and is gone.
    ray_box = Path(os.environ["XDG_STATE_HOME"]) / "agent-fleet" / "ray"
    worktrees = [n["data"]["path"] for i in ids for n in _notices(out / f"{i}.jsonl", "worktree")]
    assert worktrees and all(Path(w).is_relative_to(ray_box / result.batch_id) for w in worktrees)
    assert stat.S_IMODE(ray_box.stat().st_mode) == 0o700
    assert not (ray_box / result.batch_id).exists()
    assert live_agent_fleet_actors() == []


async def test_stop_cancels_the_work_on_every_node(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    ids = ["a", "b", "c"]
    scripted_model.responder = ScriptedAgent({i: [[run("sleep 120")]] for i in ids})
    stop = asyncio.Event()
    sleeping: set[str] = set()
    stopped_at = 0.0

    def on_event(event: TaskEvent) -> None:
        nonlocal stopped_at
        if "sleep 120" in str(event.event):
            sleeping.add(event.task_id)
            if len(sleeping) == len(ids) and not stop.is_set():
                stopped_at = time.monotonic()
                stop.set()

    result = await asyncio.wait_for(
        run_batch(
            [BatchTask(id=i, prompt=f"[task:{i}] sleep") for i in ids],
            template=_template(repo),
            out_dir=tmp_path / "out",
            jobs=1,
            worktrees=True,
            options=codex_options,
            on_event=on_event,
            stop=stop,
            backend="ray",
        ),
        90,
    )
    assert time.monotonic() - stopped_at < 60, "the sleeps were not interrupted"
    assert [e.result.status for e in result.entries] == ["cancelled"] * 3
    assert result.stopped == "stopped by the user"
    assert len({e.node_id for e in result.entries if isinstance(e, RayBatchEntry)}) == NODES
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert live_agent_fleet_actors() == []


async def test_cancelling_the_batch_stops_the_cluster_work_and_writes_the_summary(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    ids = ["x", "y"]
    scripted_model.responder = ScriptedAgent({i: [[run("sleep 120")]] for i in ids})
    sleeping: set[str] = set()
    both = asyncio.Event()

    def on_event(event: TaskEvent) -> None:
        if "sleep 120" in str(event.event):
            sleeping.add(event.task_id)
            if len(sleeping) == len(ids):
                both.set()

    batch = asyncio.ensure_future(
        run_batch(
            [BatchTask(id=i, prompt=f"[task:{i}] sleep") for i in ids],
            template=_template(repo),
            out_dir=tmp_path / "out",
            jobs=1,
            worktrees=True,
            options=codex_options,
            on_event=on_event,
            backend="ray",
        )
    )
    await asyncio.wait_for(both.wait(), 120)
    batch.cancel()  # what a second Ctrl-C does
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(batch, 60)
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["stopped"] == "cancelled"
    assert [t["status"] for t in summary["tasks"]] == ["cancelled", "cancelled"]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert live_agent_fleet_actors() == []
    # The ledger recorded both runs as interrupted, with their sessions, and summary.json says so.
    rows = {r.id: r for r in ledger_rows(tmp_path / "out")}
    assert {i: r.state for i, r in rows.items()} == {"x": "interrupted", "y": "interrupted"}
    assert all(r.session_id for r in rows.values())
    assert [t["session_id"] for t in summary["tasks"]] == [rows["x"].session_id, rows["y"].session_id]
    again = [BatchTask(id="x", prompt="p")]
    with pytest.raises(UsageError, match="already holds a batch"):
        await run_batch(again, template=_template(repo), out_dir=tmp_path / "out", backend="ray")
    # Resumed on the cluster: each task continues its session on its branch, and finishes.
    scripted_model.responder = ScriptedAgent(
        {i: [[run("sleep 120")], [write_file(f"{i}.txt", "resumed"), commit(f"resumed {i}")]] for i in ids}
    )
    resumed = await asyncio.wait_for(
        run_batch(
            None,
            template=_template(repo),
            out_dir=tmp_path / "out",
            jobs=1,
            worktrees=True,
            options=codex_options,
            backend="ray",
            resume=True,
        ),
        240,
    )
    assert [(e.result.task_id, e.result.status) for e in resumed.entries] == [
        ("x", "succeeded"),
        ("y", "succeeded"),
    ]
    after = {r.id: r for r in ledger_rows(tmp_path / "out")}
    assert {i: (r.state, r.runs, r.session_id) for i, r in after.items()} == {
        i: ("finished", 2, rows[i].session_id) for i in ids
    }, "the same sessions, resumed"
    for i in ids:
        assert git(repo, "log", "-1", "--format=%s", f"agent-fleet/{i}") == f"resumed {i}"
    assert live_agent_fleet_actors() == []


def test_cli_git_url_mode_connects_to_the_cluster_and_brings_commits_back_as_bundles(
    ray_cluster: Any, scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    origin = make_repo(tmp_path / "origin")
    ids = ["u0", "u1", "u2"]
    scripted_model.responder = ScriptedAgent(
        {i: [[write_file(f"{i}.txt", f"work of {i}"), commit(f"task {i}")]] for i in ids}
    )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": i, "prompt": f"[task:{i}] write and commit"}) + "\n" for i in ids)
    )
    out = tmp_path / "out"
    args = ["batch", str(tasks), "--backend", "ray", "--ray-address", ray_cluster.address, "-j", "1"]
    args += ["--repo-url", f"file://{origin}", "--require-commit", "--max-followups", "0", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    proc = subprocess.run(
        [sys.executable, "-c", "from agent_fleet.cli import main; main()", *args, *cli_env],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert {t["task_id"]: t["status"] for t in summary["tasks"]} == {i: "succeeded" for i in ids}
    assert len({t["node_id"] for t in summary["tasks"]}) == NODES
    # The nodes cloned the URL: the origin is untouched; the commits come back as bundles in --out.
    assert _branches(origin) == []
    for i in ids:
        bundle = out / f"{i}.bundle"
        assert next(t for t in summary["tasks"] if t["task_id"] == i)["bundle"] == str(bundle)
        git(origin, "fetch", "-q", str(bundle), f"agent-fleet/{i}:agent-fleet/{i}")
        assert git(origin, "log", "-1", "--format=%s", f"agent-fleet/{i}") == f"task {i}"
        assert git(origin, "show", f"agent-fleet/{i}:{i}.txt") == f"work of {i}"
    assert "succeeded" in proc.stdout


async def test_a_node_lost_mid_task_is_retried_on_another_node(
    ray_cluster: Any,
    repo: Path,
    scripted_model: ScriptedModelServer,
    codex_options: CodexOptions,
    tmp_path: Path,
) -> None:
    """Last in the module: it takes a worker node out of the cluster."""
    ids = ["n0", "n1", "n2"]
    agent = ScriptedAgent({i: [[write_file(f"{i}.txt", i), commit(f"task {i}")]] for i in ids})
    arrived: dict[str, int] = {}
    all_parked, release = threading.Event(), threading.Event()
    lock = threading.Lock()

    def responder(request: RecordedRequest) -> Reply | None:
        task = next(i for i in ids if request.contains(f"[task:{i}]"))
        with lock:
            arrived[task] = arrived.get(task, 0) + 1
            first = arrived[task] == 1
            if len(arrived) == len(ids):
                all_parked.set()
        if first:  # every task's first request waits until a node is gone
            release.wait(60)
        return agent(request)

    scripted_model.responder = responder
    placed: dict[str, list[str]] = {}

    def on_event(event: TaskEvent) -> None:
        if isinstance(event.event, System) and event.event.subtype == "runner.placed":
            placed.setdefault(event.task_id, []).append(str(event.event.data["node_id"]))

    async def remove_a_worker_node() -> tuple[str, str]:
        assert await asyncio.to_thread(all_parked.wait, 90)
        head = ray.get_runtime_context().get_node_id()  # this test process is the driver, on the head
        victim = next(t for t in ids if placed[t][0] != head)
        node = next(n for n in ray_cluster.worker_nodes if n.node_id == placed[victim][0])
        await asyncio.to_thread(ray_cluster.remove_node, node)
        release.set()
        return victim, placed[victim][0]

    remover = asyncio.ensure_future(remove_a_worker_node())
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
            240,
        )
    finally:
        release.set()
    victim, lost_node = await remover
    assert [e.result.status for e in result.entries] == ["succeeded"] * 3
    entry = next(e for e in result.entries if e.result.task_id == victim)
    assert isinstance(entry, RayBatchEntry) and entry.attempts == 2 and entry.node_id != lost_node
    assert isinstance(result, RayBatchResult)
    lost = next(n for n in result.nodes if n.node_id == lost_node)
    assert lost.lost is not None and lost.provider_pid is not None
    assert not any(n.actor.endswith("-r1") for n in result.nodes), "no replacement on a dead node"
    assert await asyncio.to_thread(_exits, lost.provider_pid, 15), "the lost node's app-server outlived it"
    assert _branches(repo) == [f"agent-fleet/{i}" for i in ids]
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
