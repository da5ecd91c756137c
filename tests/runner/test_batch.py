"""``agent-fleet batch`` / ``run_batch``: one app-server, worktrees, failures, fatal stop, clean stop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet import Spec
from agent_fleet.cli import cli
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import GateConfig, Task, TaskEvent
from agent_fleet.runner.batch import BatchTask, run_batch
from agent_fleet.testing import Reply, ScriptedModelServer

from .conftest import git
from .scripted import ScriptedAgent, commit, run, write_file

pytestmark = pytest.mark.e2e


def _branches(repo: Path) -> list[str]:
    return sorted(git(repo, "branch", "--list", "agent-fleet/*", "--format=%(refname:short)").split())


def test_six_tasks_three_at_a_time_in_worktrees(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    ids = [f"t{i}" for i in range(6)]
    scripted_model.responder = ScriptedAgent(
        {i: [[write_file(f"{i}.txt", f"work of {i}"), commit(f"task {i}")]] for i in ids}
    )
    lines = [{"id": i, "prompt": f"[task:{i}] write {i}.txt and commit", "require_commit": True} for i in ids]
    lines[3]["gate_cmd"] = "echo 'tests are red'; exit 1"  # t3 commits but never passes its gate
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    out = tmp_path / "out"
    start = git(repo, "rev-parse", "HEAD")
    args = ["batch", str(tasks), "-j", "3", "--worktrees", "--out", str(out), "--cwd", str(repo)]
    result = CliRunner().invoke(cli, [*args, "--max-followups", "1", *cli_env], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # one task failed
    summary = json.loads((out / "summary.json").read_text())
    statuses = {t["task_id"]: t["status"] for t in summary["tasks"]}
    assert statuses == {**{i: "succeeded" for i in ids}, "t3": "failed"}
    assert len(summary["provider_pids"]) == 1, "all tasks shared one app-server"
    assert summary["stopped"] is None
    failed = next(t for t in summary["tasks"] if t["task_id"] == "t3")
    assert failed["followups"] == 1 and "the gate never passed" in failed["reason"]
    # Every task has its branch with its own commit on top of the start; the worktrees are gone.
    assert _branches(repo) == [f"agent-fleet/{i}" for i in ids]
    for i in ids:
        assert git(repo, "log", "-1", "--format=%s", f"agent-fleet/{i}") == f"task {i}"
        assert git(repo, "rev-parse", f"agent-fleet/{i}~1") == start
        assert (out / f"{i}.jsonl").exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert git(repo, "rev-parse", "HEAD") == start and not git(repo, "status", "--porcelain")
    # The follow-up of the failing task carried its gate output.
    assert any(
        "tests are red" in r.last_user_text
        for r in scripted_model.requests
        if "[task:t3]" in json.dumps(r.body)
    )
    for name in ("task", "status", "follow-ups", "duration", "tokens"):
        assert name in result.stdout
    # The report page is written beside the summary; the summary says where each worktree was.
    assert "report: " in result.stdout and (out / "report.html").is_file()
    t0 = next(t for t in summary["tasks"] if t["task_id"] == "t0")
    assert t0["branch"] == "agent-fleet/t0" and t0["worktree"]["kept"] is False
    assert t0["worktree"]["path"].endswith("/t0") and Path(t0["transcript"]) == (out / "t0.jsonl").resolve()


def _template(repo: Path) -> Task:
    return Task(
        spec=Spec(prompt="-", cwd=repo, sandbox="workspace-write"), gate=GateConfig(), max_followups=0
    )


async def test_a_fatal_error_stops_the_batch(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent(
        {"ok": [], "auth": [[Reply.http_error(401, "invalid api key")]], "later": []}
    )
    tasks = [BatchTask(id=i, prompt=f"[task:{i}] go") for i in ("ok", "auth", "later")]
    result = await run_batch(
        tasks, template=_template(repo), out_dir=tmp_path / "out", jobs=1, options=codex_options
    )
    statuses = [e.result.status for e in result.entries]
    assert statuses == ["succeeded", "error", "cancelled"]
    assert result.fatal and result.stopped is not None and "auth" in result.stopped
    assert result.entries[1].result.error_code == "auth_failed"
    assert "not started" in result.entries[2].result.reason
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["fatal"] is True


async def test_stop_interrupts_running_tasks_and_cleans_up(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent({i: [[run("sleep 30")]] for i in ("a", "b", "c")})
    tasks = [BatchTask(id=i, prompt=f"[task:{i}] sleep") for i in ("a", "b", "c")]
    stop = asyncio.Event()
    sleeping: set[str] = set()

    def on_event(event: TaskEvent) -> None:
        if "sleep 30" in str(event.event):
            sleeping.add(event.task_id)
            if len(sleeping) == 2:
                stop.set()

    result = await asyncio.wait_for(
        run_batch(
            tasks,
            template=_template(repo),
            out_dir=tmp_path / "out",
            jobs=2,
            worktrees=True,
            options=codex_options,
            on_event=on_event,
            stop=stop,
        ),
        60,
    )
    assert [e.result.status for e in result.entries] == ["cancelled"] * 3
    assert result.stopped == "stopped by the user"
    assert (tmp_path / "out" / "summary.json").exists()
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert _branches(repo) == ["agent-fleet/a", "agent-fleet/b"]
