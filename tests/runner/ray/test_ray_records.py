"""Records on the simulated cluster: a 60-task batch whose every transcript ends with the task's end,
twice; and a Ray batch whose driver is killed (SIGKILL) and then resumed records what a local batch
records in the same scenario, field for field in kind."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Spec, System
from agent_fleet.codex import CodexOptions
from agent_fleet.errors import UsageError
from agent_fleet.runner import Task, TaskEvent
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.runner.ledger import Ledger
from agent_fleet.testing import Reply, ScriptedModelServer

from ..conftest import git, make_repo
from ..scripted import ScriptedAgent, commit, run, write_file
from .conftest import live_agent_fleet_actors

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("ray_cluster"), pytest.mark.timeout(600)]


def _records(transcript: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in transcript.read_text().splitlines()]


async def test_sixty_tasks_over_three_nodes_every_transcript_ends_with_the_task_end_twice(
    scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    scripted_model.responder = lambda request: Reply.text("done")
    work = tmp_path / "work"
    work.mkdir()
    for round_ in range(2):
        ids = [f"r{round_}-{n:02d}" for n in range(60)]
        ends: Counter[str] = Counter()
        last: dict[str, str] = {}

        def on_event(event: TaskEvent, ends: Counter[str] = ends, last: dict[str, str] = last) -> None:
            if not event.task_id:
                return
            kind = event.event.subtype if isinstance(event.event, System) else type(event.event).__name__
            last[event.task_id] = kind
            if kind == "runner.finished":
                ends[event.task_id] += 1

        out = tmp_path / f"out{round_}"
        result = await asyncio.wait_for(
            run_batch(
                [BatchTask(id=i, prompt=f"[task:{i}] say done") for i in ids],
                template=Task(spec=Spec(prompt="-", cwd=work), max_followups=0),
                out_dir=out,
                jobs=4,
                options=codex_options,
                on_event=on_event,
                backend="ray",
            ),
            540,
        )
        assert [e.result.status for e in result.entries] == ["succeeded"] * 60
        # The live stream (what --json prints) and the transcripts end with each task's one end.
        assert ends == Counter({i: 1 for i in ids})
        assert {i: last[i] for i in ids} == {i: "runner.finished" for i in ids}
        unfinished = [i for i in ids if _records(out / f"{i}.jsonl")[-1]["subtype"] != "runner.finished"]
        assert unfinished == []
    assert live_agent_fleet_actors() == []


# -- the driver killed, then --resume, against a local batch ---------------------------------------------


def _cli(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", "from agent_fleet.cli import main; main()", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def _has(transcript: Path, needle: str) -> bool:
    try:
        return needle in transcript.read_text()
    except FileNotFoundError:
        return False


def _finished(out: Path, task_id: str) -> bool:
    """The ledger holds ``task_id``'s end (read beside the batch's own writer)."""
    if not (out / "batch.db").exists():
        return False
    try:
        ledger = Ledger.open(out, lock=False)
    except UsageError:  # the file is there, its tables not yet (seen in CI: "no such table: meta")
        return False
    try:
        return ledger.get(task_id).state == "finished"
    except KeyError:  # the ledger exists, its tasks are not in it yet
        return False
    finally:
        ledger.close()


def _kill_then_resume(
    backend: list[str], out: Path, tasks: Path, repo: Path, cli_env: list[str], jobs: str
) -> dict[str, Any]:
    """Run the batch, SIGKILL the CLI once ``a`` finished and ``b`` runs its command, resume it; the
    resumed batch's summary."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    args = ["batch", str(tasks), "--cwd", str(repo), "--worktrees", "--require-commit"]
    args += ["--max-followups", "0", "-j", jobs, "--out", str(out), *backend]
    proc = _cli([*args, *cli_env], env)
    try:
        deadline = time.monotonic() + 240
        while not (_finished(out, "a") and _has(out / "b.jsonl", "sleep 120")):
            assert proc.poll() is None, proc.communicate()[0]
            assert time.monotonic() < deadline, "the batch never got there"
            time.sleep(0.2)
        proc.send_signal(signal.SIGKILL)  # the driver dies: no summary, no clean stop
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    resumed = _cli(["batch", "--resume", str(out), *cli_env], env)
    output = resumed.communicate(timeout=300)[0]
    assert resumed.returncode == 0, output
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def _kind(value: Any) -> Any:
    """What a JSON value is, recursively: a dict's keys with their kinds, a list's emptiness and its
    first item's kind, else the type."""
    if isinstance(value, dict):
        return {k: _kind(v) for k, v in value.items()}
    if isinstance(value, list):
        return ["empty"] if not value else ["items", _kind(value[0])]
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def test_after_a_driver_crash_and_resume_the_records_are_those_of_a_local_batch(
    ray_cluster: Any, scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    scripts = {
        "a": [[write_file("a.txt", "a"), commit("task a")]],
        # commits, then is busy when the driver dies (codex hands a long command back after ~10 s: keep
        # asking); resumed, the same session ends without another commit: its commit, made before the
        # crash, is on its branch and --require-commit counts it (measured from where it first started)
        "b": [[write_file("b.txt", "b"), commit("task b"), *[run("sleep 120")] * 12], []],
    }
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": i, "prompt": f"[task:{i}] do it"}) + "\n" for i in "ab"))
    summaries = {}
    starts: dict[bool, str] = {}  # (is it the Ray batch) -> the repository's start commit
    for name, backend, jobs in (
        ("local", [], "2"),
        ("ray", ["--backend", "ray", "--ray-address", ray_cluster.address], "1"),
    ):
        scripted_model.responder = ScriptedAgent(scripts)
        repo = make_repo(tmp_path / f"repo-{name}")
        starts[name == "ray"] = git(repo, "rev-parse", "HEAD")
        summaries[name] = _kill_then_resume(backend, tmp_path / f"out-{name}", tasks, repo, cli_env, jobs)
        for i in "ab":
            assert git(repo, "log", "-1", "--format=%s", f"agent-fleet/{i}") == f"task {i}", name
        assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1, name
        assert git(repo, "branch", "--list", "agent-fleet-attempts/*") == "", name  # adopted, then gone
    local, ray_ = summaries["local"], summaries["ray"]
    assert set(local) <= set(ray_), set(local) - set(ray_)
    for key in local:
        if key != "tasks":
            assert _kind(ray_[key]) == _kind(local[key]) or local[key] is None, key
    for mine, theirs in zip(ray_["tasks"], local["tasks"], strict=True):
        assert mine["task_id"] == theirs["task_id"]
        # ``retries``: the times the backend ran the task again (Ray after a lost node, none here; a
        # local batch never does). Turn retries are in attempts.
        assert (mine["retries"], theirs["retries"]) == (0, 0)
        differ = {k: (_kind(mine.get(k, "<missing>")), _kind(v)) for k, v in theirs.items()}
        differ = {k: d for k, d in differ.items() if d[0] != d[1]}
        assert differ == {}, f"{mine['task_id']}: ray vs local {differ}"
        same = ("status", "state", "runs", "attempts", "followups", "branch", "error_code", "diff")
        assert {k: mine[k] for k in same} == {k: theirs[k] for k in same}, mine["task_id"]
        assert bool(mine["resumed_from"]) == bool(theirs["resumed_from"])
        assert len(mine["commands"]) == len(theirs["commands"]) and mine["model"] == theirs["model"]
    b = next(t for t in ray_["tasks"] if t["task_id"] == "b")
    assert (b["runs"], b["attempts"], b["state"]) == (2, 2, "finished")
    assert b["resumed_from"] == b["session_id"]
    for summary in (local, ray_):
        b = next(t for t in summary["tasks"] if t["task_id"] == "b")
        assert b["status"] == "succeeded" and b["gate"]["passed"], b["reason"]
        assert b["start_head"] == starts[summary is ray_] != b["end_head"]
