"""Sessions an operator stops, loses to a crash or leaves waiting, as clients meet them (real codex
binary, scripted model; issue 28 items 10 and 11)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet.contract import PermissionConfig
from agent_fleet.testing import Reply, ScriptedModelServer, exec_command

from .conftest import TOKEN, MakeDaemon, client, page_data, read_events

pytestmark = pytest.mark.e2e  # runs the real binary


async def _start(http: httpx.AsyncClient, workspace: Path, **extra: Any) -> str:
    response = await http.post(
        "/v1/sessions", json={"prompt": "remember token-7373", "cwd": str(workspace), **extra}
    )
    assert response.status_code == 201, response.text
    return str(response.json()["session_id"])


async def _turn(http: httpx.AsyncClient, sid: str, prompt: str) -> list[dict[str, Any]]:
    response = await http.post(f"/v1/sessions/{sid}/turns", json={"prompt": prompt})
    assert response.status_code == 200, response.text
    return [r for _, r in await read_events(http, sid, after=response.json()["last_event_id"])]


async def test_a_stopped_session_continues_by_turns_and_by_resume(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    """After POST /stop both ways of continuing answered 400."""
    scripted_model.enqueue(
        Reply.text("never", delay=30),
        Reply.text("continued"),
        Reply.text("never", delay=30),
        Reply.text("resumed"),
    )
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        sid = await _start(http, workspace)
        await scripted_model.wait_for_request()
        assert (await http.post(f"/v1/sessions/{sid}/stop")).status_code == 200
        events = await read_events(http, sid)
        assert events[-1][1]["type"] == "Error" and events[-1][1]["code"] == "cancelled"
        assert (await http.get(f"/v1/sessions/{sid}")).json()["state"] == "stopped"
        records = await _turn(http, sid, "go on")
        assert records[-1]["type"] == "Result" and records[-1]["text"] == "continued"
        assert "remember token-7373" in scripted_model.requests[-1].user_texts()  # the same conversation

        following = await http.post(f"/v1/sessions/{sid}/turns", json={"prompt": "once more"})
        await scripted_model.wait_for_request(count=3)
        await http.post(f"/v1/sessions/{sid}/stop")
        await read_events(http, sid, after=following.json()["last_event_id"])
        resumed = await http.post(
            f"/v1/sessions?resume={sid}", json={"prompt": "and now", "cwd": str(workspace)}
        )
        assert resumed.status_code == 201, resumed.text
        records = [r for _, r in await read_events(http, sid, after=resumed.json()["last_event_id"])]
        assert records[-1]["type"] == "Result" and records[-1]["text"] == "resumed"
        history = (await http.get(f"/v1/sessions/{sid}")).json()["history"]
        assert [t["status"] for t in history] == ["cancelled", "completed", "cancelled", "completed"]


async def test_a_session_whose_app_server_crashed_continues(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply.text("never", delay=30), Reply.text("back again"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        sid = await _start(http, workspace)
        await scripted_model.wait_for_request()
        [pid] = daemon.sessions.provider_pids().values()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        events = await read_events(http, sid)
        assert events[-1][1]["type"] == "Error" and events[-1][1]["code"] != "cancelled"
        assert (await http.get(f"/v1/sessions/{sid}")).json()["state"] == "failed"
        records = await _turn(http, sid, "are you there?")
        assert records[-1]["type"] == "Result" and records[-1]["text"] == "back again"
        assert "remember token-7373" in scripted_model.requests[-1].user_texts()


async def test_a_pending_approval_is_an_event_of_its_session(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply(items=(exec_command("touch asked.txt"),)), Reply.text("made it"))
    daemon = await make_daemon(options=codex_serve_options, permission=PermissionConfig(default="ask"))
    async with client(daemon) as http:
        sid = await _start(http, workspace, sandbox="workspace-write")
        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(30):
            while not any(r.get("subtype") == "approval_pending" for r in seen):
                seen = [r for _, r in await read_events(http, sid, follow=True, limit=len(seen) + 1)]
        [pending] = [r for r in seen if r.get("subtype") == "approval_pending"]
        data = pending["data"]
        assert "touch asked.txt" in str(data["command"])
        assert (
            data["dashboard"] == f"{daemon.url}/"
            and data["decide"] == f"POST /v1/approvals/{data['approval_id']}"
        )
        decided = await http.post(f"/v1/approvals/{data['approval_id']}", json={"decision": "allow_once"})
        assert decided.status_code == 200
        records = [r for _, r in await read_events(http, sid)]
    outcomes = [r["data"] for r in records if r.get("subtype") == "approval_decided"]
    assert outcomes == [{"approval_id": data["approval_id"], "decision": "allow_once", "rule": None}]
    assert records[-1]["type"] == "Result"


async def test_batch_with_server_shows_what_waits_for_a_person(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
    tmp_path: Path,
) -> None:
    """`batch --server` under ask printed nothing for 5 minutes while approvals waited."""
    scripted_model.enqueue(Reply(items=(exec_command("touch waited.txt"),)), Reply.text("done"))
    daemon = await make_daemon(options=codex_serve_options, permission=PermissionConfig(default="ask"))
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "make the file"}\n')
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "OPENAI_API_KEY")}
    argv = [str(Path(sys.executable).parent / "agent-fleet"), "batch", str(tasks), "--server", daemon.url]
    argv += ["--cwd", str(workspace), "--out", str(tmp_path / "out"), "--sandbox", "workspace-write"]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={**env, "AGENT_FLEET_TOKEN": TOKEN},
        cwd=workspace,
    )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(60):
            while not any("waiting for approval" in line for line in lines):
                line = (await proc.stdout.readline()).decode()
                assert line, "".join(lines)
                lines.append(line)
        [waiting] = [line for line in lines if "waiting for approval" in line]
        assert "touch waited.txt" in waiting and daemon.url in waiting
        async with client(daemon) as http:
            [pending] = (await http.get("/v1/approvals")).json()["approvals"]
            await http.post(f"/v1/approvals/{pending['approval_id']}", json={"decision": "allow_once"})
        async with asyncio.timeout(60):
            rest = (await proc.stdout.read()).decode()
            assert await proc.wait() == 0, "".join(lines) + rest
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_running_session_without_a_client_is_stopped_and_can_go_on(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply.text("never", delay=30), Reply.text("picked up"))
    daemon = await make_daemon(options=codex_serve_options, orphan_timeout=1.0)
    async with client(daemon) as http:
        sid = await _start(http, workspace)
        await scripted_model.wait_for_request()
        row = next(r for r in (await http.get("/v1/sessions")).json()["sessions"] if r["session_id"] == sid)
        assert row["clients"] == 0 and row["state"] == "running"
        [shown] = page_data((await http.get("/")).text)["sessions"]  # the dashboard marks it
        assert shown["clients"] == 0 and shown["loaded"] and shown["orphan_deadline"] > time.time()
        pump = daemon.sessions.live[sid].pump
        assert pump is not None
        async with asyncio.timeout(20):  # nobody reads it: stopped after the orphan timeout
            await asyncio.wait([pump])
        assert (await http.get(f"/v1/sessions/{sid}")).json()["state"] == "stopped"
        records = await _turn(http, sid, "still there?")
        assert records[-1]["text"] == "picked up"
