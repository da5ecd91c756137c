"""Repository URL mode on the simulated 3-node cluster: ``push`` to a bare repository (file URL), a push
the remote refuses, and a task resumed on another node continuing its branch from its earlier bundle."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Spec, System
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import GateConfig, Task, TaskEvent
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.runner.ray_backend import RayBatchEntry
from agent_fleet.testing import ScriptedModelServer

from ..conftest import git, make_repo
from ..scripted import ScriptedAgent, commit, run, write_file
from .conftest import live_agent_fleet_actors
from .test_ray_batch import ledger_rows

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(300)]


def _notices(transcript: Path, subtype: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    return [r for r in records if r["type"] == "System" and r["subtype"] == f"runner.{subtype}"]


def _log(repo: Path, ref: str) -> list[str]:
    return git(repo, "log", "--format=%s", ref).splitlines()


async def test_push_refusal_and_a_resume_on_another_node_that_continues_the_branch(
    scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    seed = make_repo(tmp_path / "seed")
    start = git(seed, "rev-parse", "HEAD")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    # Someone else already has work on f2's branch in the remote: the task's push must not replace it.
    git(seed, "checkout", "-q", "-b", "agent-fleet/f2")
    (seed / "theirs.txt").write_text("theirs\n")
    git(seed, "add", "-A")
    git(seed, "commit", "-q", "-m", "their work")
    git(seed, "push", "-q", str(origin), "agent-fleet/f2")
    theirs = git(seed, "rev-parse", "HEAD")

    ids = ["f1", "f2", "r0"]
    scripts = {i: [[write_file(f"{i}.txt", f"work of {i}"), commit(f"task {i}")]] for i in ("f1", "f2")}
    scripts["r0"] = [
        # codex's exec_command hands a still-running command back to the model after ~10 s (it goes on in
        # the background), so one `sleep` could let r0's turn end before a loaded machine finished f1 and
        # f2: keep asking for more, so r0 is still busy whenever the batch is stopped.
        [write_file("r0.txt", "first run"), commit("first r0"), *[run("sleep 120")] * 12],
        [write_file("r0-more.txt", "second run"), commit("resumed r0")],
    ]
    scripted_model.responder = ScriptedAgent(scripts)
    spec = Spec(prompt="-", sandbox="workspace-write")
    template = Task(spec=spec, gate=GateConfig(require_commit=True), max_followups=0)
    url = f"file://{origin}"
    out = tmp_path / "out"
    stop = asyncio.Event()
    finished: set[str] = set()
    sleeping = False

    def on_event(event: TaskEvent) -> None:
        nonlocal sleeping
        if isinstance(event.event, System) and event.event.subtype == "runner.finished":
            finished.add(event.task_id)
        if event.task_id == "r0" and "sleep 120" in str(event.event):
            sleeping = True
        if sleeping and finished >= {"f1", "f2"}:
            stop.set()  # r0 committed its first run's work and is busy: stop the batch (Ctrl-C)

    # jobs=1 on three nodes, in queue order: f1, f2 and r0 each on a node of their own.
    first = await run_batch(
        [BatchTask(id=i, prompt=f"[task:{i}] write and commit") for i in ids],
        template=template,
        out_dir=out,
        jobs=1,
        options=codex_options,
        on_event=on_event,
        stop=stop,
        backend="ray",
        repo_url=url,
        push=True,
    )
    entries = {e.result.task_id: e for e in first.entries}
    assert all(isinstance(e, RayBatchEntry) for e in entries.values())
    assert first.stopped == "stopped by the user"
    # f1: pushed; the remote's branch is the task's commit on the start.
    f1 = entries["f1"]
    assert isinstance(f1, RayBatchEntry) and f1.result.status == "succeeded" and f1.push is not None
    assert f1.push.pushed and f1.push.commit == git(origin, "rev-parse", "agent-fleet/f1")
    assert _log(origin, "agent-fleet/f1") == ["task f1", "initial"]
    # f2: refused, not forced: their work stays; the task failed with the reason; its commit is in the bundle.
    f2 = entries["f2"]
    assert isinstance(f2, RayBatchEntry) and f2.push is not None and not f2.push.pushed
    assert (f2.result.status, f2.result.error_code) == ("failed", "push_failed")
    assert "[rejected]" in str(f2.push.error) and "never force-pushes" in str(f2.push.error)
    assert "refused" in f2.result.reason and "bundle" in f2.result.reason
    assert git(origin, "rev-parse", "agent-fleet/f2") == theirs
    git(seed, "fetch", "-q", str(out / "f2.bundle"), "agent-fleet/f2:ours-f2")
    assert _log(seed, "ours-f2") == ["task f2", "initial"]
    # The transcript says so, in order: the push, then the task's end with the status it left.
    records = [json.loads(line) for line in (out / "f2.jsonl").read_text().splitlines()]
    tail = [r["subtype"] for r in records if r["type"] == "System"][-2:]
    assert tail == ["runner.push", "runner.finished"]
    assert records[-1]["data"]["status"] == "failed"
    summary = {t["task_id"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert summary["f2"]["push"] == {
        "branch": "agent-fleet/f2",
        "commit": f2.push.commit,
        "pushed": False,
        "error": f2.push.error,
    }
    assert summary["f2"]["error_code"] == "push_failed" and summary["f1"]["push"]["pushed"] is True
    # r0 was stopped after its first commit: not pushed (a stopped run is pushed when it finishes).
    r0 = entries["r0"]
    assert isinstance(r0, RayBatchEntry) and r0.result.status == "cancelled" and r0.push is None
    assert "agent-fleet/r0" not in git(origin, "branch", "--list", "agent-fleet/*")
    first_bundle = (out / "r0.bundle").read_bytes()
    first_node = r0.node_id

    # Resumed: r0 alone lands on the first free node, not the one it ran on, and continues its branch.
    resumed = await run_batch(
        None,
        template=template,
        out_dir=out,
        jobs=1,
        options=codex_options,
        backend="ray",
        repo_url=url,
        push=True,
        resume=True,
    )
    r0 = next(e for e in resumed.entries if e.result.task_id == "r0")
    assert isinstance(r0, RayBatchEntry) and r0.result.status == "succeeded", r0.result.reason
    placed = [n["data"]["node_id"] for n in _notices(out / "r0.jsonl", "placed")]
    assert placed == [first_node, r0.node_id] and r0.node_id != first_node
    # Both runs' commits, on the start, in the remote and in the new bundle; the earlier bundle is kept.
    assert r0.push is not None and r0.push.pushed
    assert _log(origin, "agent-fleet/r0") == ["resumed r0", "first r0", "initial"]
    assert git(origin, "rev-parse", "agent-fleet/r0~2") == start
    git(seed, "fetch", "-q", str(out / "r0.bundle"), "agent-fleet/r0:bundled-r0")
    assert _log(seed, "bundled-r0") == ["resumed r0", "first r0", "initial"]
    assert (out / "earlier-bundles" / "r0.1.bundle").read_bytes() == first_bundle
    rows = {r.id: r for r in ledger_rows(out)}
    assert (rows["r0"].state, rows["r0"].runs) == ("finished", 2)
    assert [t["task_id"] for t in json.loads((out / "summary.json").read_text())["tasks"]] == ids
    assert live_agent_fleet_actors() == []
