"""Batches on the daemon (real codex binary, scripted model): progress from the ledger, summary, report
page, the daemon's approval policy as a floor, and a batch that fails after its 201 keeping its reason."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet.contract import PermissionConfig
from agent_fleet.serve import Daemon
from agent_fleet.testing import (
    CustomToolCall,
    FunctionCall,
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    exec_command,
)

from .conftest import MakeDaemon, client, page_data

pytestmark = pytest.mark.e2e  # runs the real binary


async def _finished(daemon: Daemon, http: httpx.AsyncClient, batch_id: str) -> dict[str, Any]:
    running = daemon.batches.running.get(batch_id)
    if running is not None:
        async with asyncio.timeout(120):
            await asyncio.wait([running])
    done: dict[str, Any] = (await http.get(f"/v1/batches/{batch_id}")).json()
    return done


async def test_a_batch_runs_on_the_daemon_and_serves_its_summary_and_report(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.responder = lambda request: Reply.text("done")
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        tasks = "\n".join(
            ['{"id": "one", "prompt": "first thing"}', '{"id": "two", "prompt": "second thing"}']
        )
        response = await http.post(
            "/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}, "jobs": 2}
        )
        assert response.status_code == 201, response.text
        batch_id = response.json()["batch_id"]
        progress = (await http.get(f"/v1/batches/{batch_id}")).json()
        assert progress["total"] == 2 and progress["summary"] is None
        done = await _finished(daemon, http, batch_id)
        assert done["state"] == "succeeded", done
        assert done["total"] == 2 and done["done"] == 2 and done["ok"] == 2
        assert done["states"] == {"finished": 2, "finished:succeeded": 2}
        assert [(t["task_id"], t["state"], t["status"]) for t in done["tasks"]] == [
            ("one", "finished", "succeeded"),
            ("two", "finished", "succeeded"),
        ]
        assert all(t["session_id"] for t in done["tasks"])
        assert sorted(t["task_id"] for t in done["summary"]["tasks"]) == ["one", "two"]
        report = await http.get(f"/v1/batches/{batch_id}/report")
        assert report.status_code == 200 and "<html" in report.text.lower()
        listed = (await http.get("/v1/batches")).json()["batches"]
        assert [b["batch_id"] for b in listed] == [batch_id]
        assert (await http.get("/v1/batches/b20260101-000000-000000")).status_code == 404
        assert (await http.get("/v1/batches/..")).status_code == 404
        [shown] = page_data((await http.get("/")).text)["batches"]
        assert shown["batch_id"] == batch_id and [t["task_id"] for t in shown["tasks"]] == ["one", "two"]
    # Transcripts, summary and report hold prompts and outputs: nobody else may read them (issue 28).
    loose = {str(p): oct(m) for p, m in _modes(daemon.config.state_dir).items() if m & 0o077}
    assert loose == {}
    assert any(p.name == "summary.json" for p in daemon.config.state_dir.rglob("*"))


def _modes(root: Path) -> dict[Path, int]:
    return {path: path.lstat().st_mode & 0o777 for path in [root, *root.rglob("*")]}


def _runs(command: str) -> Any:
    """A responder: the first turn of every task runs ``command``, then answers."""

    def respond(request: RecordedRequest) -> Reply:
        if any(item.get("type") == "function_call_output" for item in request.input):
            return Reply.text("tried it")
        return Reply(items=(exec_command(command),))

    return respond


async def test_a_batch_gets_the_daemons_policy_and_a_task_line_cannot_replace_it(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.responder = _runs("touch forbidden.txt")
    daemon = await make_daemon(
        options=codex_serve_options, permission=PermissionConfig(disallow_patterns=("^touch",))
    )
    async with client(daemon) as http:
        tasks = [
            {"id": "plain", "prompt": "make the file"},
            {"id": "own-deny", "prompt": "make the file", "deny": ["^curl"], "allow": [".*"]},
        ]
        spec = {"cwd": str(workspace), "sandbox": "workspace-write", "permission": {"default": "allow"}}
        response = await http.post("/v1/batches", json={"tasks": tasks, "spec": spec})
        assert response.status_code == 201, response.text
        done = await _finished(daemon, http, response.json()["batch_id"])
    assert not (workspace / "forbidden.txt").exists()
    for task in done["summary"]["tasks"]:
        assert [d["rule"] for d in task["declines"]] == ["user-deny"], task["declines"]


async def test_a_batch_that_fails_after_its_201_keeps_its_reason_redacted(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    secret = "sk-proj-" + "q" * 24
    plain = workspace / secret  # a directory whose name looks like a key: the reason names it
    plain.mkdir()
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        tasks = [{"id": "needs-git", "prompt": "p", "cwd": str(plain), "require_commit": True}]
        response = await http.post("/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}})
        assert response.status_code == 201, response.text
        batch_id = response.json()["batch_id"]
        done = await _finished(daemon, http, batch_id)
        listed = (await http.get("/v1/batches")).json()["batches"]
        page = (await http.get("/")).text
    assert done["state"] == "error"
    assert "not in a git repository" in done["reason"]
    assert "[REDACTED]" in done["reason"]
    for text in (json.dumps(done), json.dumps(listed), page):
        assert secret not in text


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


def _writes_and_commits(request: RecordedRequest) -> Reply:
    """A responder: each task writes ``<its prompt>.txt`` by apply_patch, commits it, then answers."""
    name = next(
        t.get("text", "").split()[-1]
        for item in request.input
        if item.get("type") == "message" and item.get("role") == "user"
        for t in item.get("content") or []
        if isinstance(t, dict) and t.get("text", "").startswith("write ")
    )
    outputs = sum(
        1 for item in request.input if item.get("type") in ("function_call_output", "custom_tool_call_output")
    )
    if outputs == 0:
        patch = f"*** Begin Patch\n*** Add File: {name}.txt\n+work of {name}\n*** End Patch\n"
        return Reply(items=(CustomToolCall(name="apply_patch", input=patch),))
    if outputs == 1:
        commit = {"cmd": f"git add -A && git commit -q -m {name}", "login": False}
        commit |= {"sandbox_permissions": "require_escalated", "justification": "commit the work"}
        return Reply(items=(FunctionCall(name="exec_command", arguments=commit),))
    return Reply.text("done")


async def test_a_daemon_batch_with_worktrees_keeps_its_boxes_in_the_daemons_state_dir(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
    tmp_path: Path,
) -> None:
    repo = workspace / "repo"
    repo.mkdir()
    for args in (
        ["init", "-q"],
        ["config", "user.name", "agent-fleet tests"],
        ["config", "user.email", "tests@agent-fleet.invalid"],
        ["commit", "-q", "--allow-empty", "-m", "start"],
    ):
        await asyncio.to_thread(_git, repo, *args)
    scripted_model.responder = _writes_and_commits
    daemon = await make_daemon(options=codex_serve_options)
    state = tmp_path / "state"
    async with client(daemon) as http:
        tasks = [{"id": n, "prompt": f"write {n}", "require_commit": True} for n in ("one", "two")]
        spec = {"cwd": str(repo), "sandbox": "workspace-write", "env": {}}
        body = {"tasks": tasks, "spec": spec, "jobs": 2, "worktrees": True}
        response = await http.post("/v1/batches", json=body)
        assert response.status_code == 201, response.text
        done = await _finished(daemon, http, response.json()["batch_id"])
    assert done["state"] == "succeeded", done
    for task in done["summary"]["tasks"]:
        worktree = Path(task["worktree"]["path"])
        assert worktree.parent.parent.parent == state / "boxes", "the daemon's own box, not /tmp"
        assert task["worktree"]["kept"] is False and task["branch"] == f"agent-fleet/{task['task_id']}"
        assert task["files_changed"] == [f"{task['task_id']}.txt"] and task["shared_tree"] is False
        shown = await asyncio.to_thread(_git, repo, "show", "--name-only", "--format=", task["branch"])
        assert shown.split() == [f"{task['task_id']}.txt"]
    assert not any((state / "boxes").iterdir()), "each box is removed with its batch"
    assert stat.S_IMODE((state / "boxes").stat().st_mode) == 0o700
