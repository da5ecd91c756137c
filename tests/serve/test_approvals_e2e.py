"""Deferred approvals on the daemon, against the real codex binary and the scripted model."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet.contract import PermissionConfig
from agent_fleet.testing import Reply, ScriptedModelServer, exec_command

from .conftest import MakeDaemon, client, read_events

pytestmark = pytest.mark.e2e  # runs the real binary

ASK = {"default": "ask"}


async def _pending(http: httpx.AsyncClient, count: int = 1) -> list[dict[str, Any]]:
    async with asyncio.timeout(30):
        while True:
            approvals: list[dict[str, Any]] = (await http.get("/v1/approvals")).json()["approvals"]
            if len(approvals) >= count:
                return approvals
            await asyncio.sleep(0.05)


async def _start(http: httpx.AsyncClient, prompt: str, cwd: Path) -> str:
    spec = {"prompt": prompt, "cwd": str(cwd), "sandbox": "workspace-write", "permission": ASK}
    response = await http.post("/v1/sessions", json=spec)
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])


async def test_a_deferred_approval_decided_through_the_api_lets_the_command_run_and_blocks_no_one(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply(items=(exec_command("touch approved.txt"),)))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        sid = await _start(http, "make the file", workspace)
        [pending] = await _pending(http)
        assert "touch approved.txt" in str(pending["command"])
        # Another session runs to its end while the first one waits for a person.
        scripted_model.enqueue(Reply.text("not blocked"))
        other = (await http.post("/v1/sessions", json={"prompt": "quick", "cwd": str(workspace)})).json()
        other_events = await read_events(http, other["session_id"])
        assert other_events[-1][1]["type"] == "Result" and other_events[-1][1]["text"] == "not blocked"
        assert not (workspace / "approved.txt").exists()

        scripted_model.enqueue(Reply.text("made it"))
        decided = await http.post(f"/v1/approvals/{pending['approval_id']}", json={"decision": "allow_once"})
        assert decided.status_code == 200
        events = await read_events(http, sid)
        assert events[-1][1]["type"] == "Result" and events[-1][1]["text"] == "made it"
        assert (workspace / "approved.txt").exists()
        assert (await http.get("/v1/approvals")).json()["approvals"] == []
        again = await http.post(f"/v1/approvals/{pending['approval_id']}", json={"decision": "decline"})
        assert again.status_code == 404


async def test_an_undecided_approval_is_declined_at_its_timeout(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply(items=(exec_command("touch never.txt"),)), Reply.text("gave up"))
    daemon = await make_daemon(options=codex_serve_options, approval_timeout=1.0)
    async with client(daemon) as http:
        sid = await _start(http, "make the file", workspace)
        await _pending(http)
        events = await read_events(http, sid)
    assert events[-1][1]["type"] == "Result" and events[-1][1]["text"] == "gave up"
    assert not (workspace / "never.txt").exists()
    denied = [r for _, r in events if r["type"] == "System" and r["subtype"] == "approval_denied"]
    assert [d["data"]["rule"] for d in denied] == ["approval-timeout"]


@pytest.fixture
def repo(workspace: Path) -> Path:
    path = workspace / "repo"
    path.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    return path


async def test_a_built_in_decline_never_waits_in_the_queue(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    repo: Path,
) -> None:
    scripted_model.enqueue(Reply(items=(exec_command("git reset --hard"),)), Reply.text("ok then"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        sid = await _start(http, "reset", repo)
        events = await read_events(http, sid)
    assert events[-1][1]["type"] == "Result"
    denied = [r for _, r in events if r["type"] == "System" and r["subtype"] == "approval_denied"]
    assert [d["data"]["rule"] for d in denied] == ["git-reset-hard"]
    assert daemon.approvals.parked == 0


async def test_a_clients_permission_cannot_weaken_the_daemons(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    """The daemon says --deny ^rm --default-approval ask; the client says allow everything."""
    (workspace / "keep.txt").write_text("keep")
    scripted_model.enqueue(
        Reply(items=(exec_command("rm keep.txt"),)),
        Reply.text("could not"),
        Reply(items=(exec_command("touch asked.txt"),)),
    )
    daemon = await make_daemon(
        options=codex_serve_options,
        permission=PermissionConfig(disallow_patterns=("^rm",), default="ask"),
    )
    async with client(daemon) as http:
        spec = {
            "prompt": "remove it",
            "cwd": str(workspace),
            "sandbox": "workspace-write",
            "permission": {"default": "allow", "allow_patterns": [".*"]},
        }
        response = await http.post("/v1/sessions", json=spec)
        assert response.status_code == 201, response.text
        sid = response.json()["session_id"]
        events = await read_events(http, sid)
        denied = [
            r["data"]["rule"]
            for _, r in events
            if r["type"] == "System" and r["subtype"] == "approval_denied"
        ]
        assert denied == ["user-deny"]
        assert (workspace / "keep.txt").exists()
        shown = (await http.get(f"/v1/sessions/{sid}")).json()
        stored = shown["spec"]["permission"]  # the client's, kept apart from the daemon's
        assert {key: stored[key] for key in spec["permission"]} == spec["permission"]
        assert shown["floor"]["disallow_patterns"] == ["^rm"] and shown["floor"]["default"] == "ask"
        # The stricter default stands too: what no rule decides waits for a person.
        await http.post(f"/v1/sessions/{sid}/turns", json={"prompt": "make a file"})
        [pending] = await _pending(http)
        assert "touch asked.txt" in str(pending["command"])
        await http.post(f"/v1/sessions/{sid}/stop")


async def test_a_pending_approval_says_where_it_comes_from_and_a_decline_reason_reaches_the_model(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    """Issue 33: a person deciding sees the session, its prompt and the rule that left the request open,
    and the reason of a decline is what the model reads next (codex's approval answers carry none)."""
    reason = "use the make target instead (ZQ-7731)"
    scripted_model.enqueue(Reply(items=(exec_command("touch declined.txt"),)), Reply.text("understood"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        sid = await _start(http, "make the declined file", workspace)
        [pending] = await _pending(http)
        assert pending["session_id"] == sid
        assert pending["prompt"] == "make the declined file"
        assert pending["rule"] == "default-ask" and "default is ask" in pending["rule_means"]
        assert (await http.get("/v1/approvals", params={"session": "another"})).json()["approvals"] == []
        decided = await http.post(
            f"/v1/approvals/{pending['approval_id']}", json={"decision": "decline", "reason": reason}
        )
        assert decided.status_code == 200
        events = await read_events(http, sid)
    assert events[-1][1]["type"] == "Result"
    assert not (workspace / "declined.txt").exists()
    after = [request for request in scripted_model.requests[1:] if request.contains("ZQ-7731")]
    assert after, "the model never read the reason of the decline"
