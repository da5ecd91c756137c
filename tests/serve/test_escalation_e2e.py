"""Escalation through the daemon (issues #27 and #28 item 3), with the real codex binary and the scripted
model: what asks to leave the sandbox needs proof, the daemon's ``--allow-escalation`` or a person
deciding in the daemon's approval queue; a client's escalation patterns only narrow the daemon's."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet._codex_toml import config_args
from agent_fleet.contract import PermissionConfig
from agent_fleet.testing import CodexTestEnv, FunctionCall, Reply, ScriptedModelServer

from .conftest import TOKEN, MakeDaemon, client, read_events

pytestmark = pytest.mark.e2e  # runs the real binary


def escalated(cmd: str) -> FunctionCall:
    """The scripted agent's ``exec_command`` asking to run ``cmd`` outside the sandbox."""
    args = {
        "cmd": cmd,
        "login": False,
        "sandbox_permissions": "require_escalated",
        "justification": "it has to write outside the workspace",
    }
    return FunctionCall(name="exec_command", arguments=args)


def script(path: Path, body: str) -> None:
    """A workspace script: opaque to the policy, so only the sandbox stands between it and ``body``."""
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Beside the workspace: outside every writable root of the session (and of the daemon)."""
    path = tmp_path / "outside"
    path.mkdir()
    return path


async def _pending(http: httpx.AsyncClient) -> list[dict[str, Any]]:
    async with asyncio.timeout(60):
        while True:
            approvals: list[dict[str, Any]] = (await http.get("/v1/approvals")).json()["approvals"]
            if approvals:
                return approvals
            await asyncio.sleep(0.05)


def _systems(events: list[tuple[int, dict[str, Any]]], subtype: str) -> list[dict[str, Any]]:
    return [r for _, r in events if r.get("type") == "System" and r.get("subtype") == subtype]


@pytest.mark.parametrize("answer", ["decline", "allow_once"])
async def test_a_person_decides_an_unproven_escalation_in_the_daemons_queue(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
    outside: Path,
    answer: str,
) -> None:
    """Default settings (allow): an escalated opaque script is not proven harmless; the daemon parks it
    for a person, with what makes it an escalation, and runs it outside the sandbox only on an accept."""
    marker = outside / "deployed"
    script(workspace / "deploy.sh", f"touch {marker}")
    scripted_model.enqueue(Reply(items=(escalated("./deploy.sh"),)), Reply.text("done"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        created = await http.post("/v1/sessions", json={"prompt": "deploy", "cwd": str(workspace)})
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        [pending] = await _pending(http)
        assert "./deploy.sh" in str(pending["command"])
        assert pending["escalated"] is True and pending["rule"] == "escalation-unproven"
        assert "outside the sandbox" in pending["why"]
        assert not marker.exists()  # nothing ran while it waited
        decided = await http.post(f"/v1/approvals/{pending['approval_id']}", json={"decision": answer})
        assert decided.status_code == 200, decided.text
        events = await read_events(http, sid)
    waiting = _systems(events, "approval_pending")
    assert waiting and waiting[0]["data"]["escalated"] is True
    assert waiting[0]["data"]["rule"] == "escalation-unproven"
    assert marker.exists() is (answer == "allow_once")
    assert events[-1][1]["type"] == "Result"


async def test_a_clients_escalation_patterns_cannot_let_a_command_out(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
    outside: Path,
) -> None:
    """The daemon allows no escalation; a client asking for ``.*`` only narrows that: still a person's."""
    marker = outside / "deployed"
    script(workspace / "deploy.sh", f"touch {marker}")
    scripted_model.enqueue(Reply(items=(escalated("./deploy.sh"),)), Reply.text("done"))
    daemon = await make_daemon(options=codex_serve_options, approval_timeout=0.5)
    spec = {
        "prompt": "deploy",
        "cwd": str(workspace),
        "permission": {"escalation_patterns": [".*"]},
    }
    async with client(daemon) as http:
        created = await http.post("/v1/sessions", json=spec)
        assert created.status_code == 201, created.text
        events = await read_events(http, created.json()["session_id"])
    assert not marker.exists()
    denied = _systems(events, "approval_denied")
    assert [d["data"]["rule"] for d in denied] == ["approval-timeout"], denied


async def test_the_daemons_escalation_patterns_let_a_matching_command_out(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
    outside: Path,
) -> None:
    marker = outside / "deployed"
    script(workspace / "deploy.sh", f"touch {marker}")
    scripted_model.enqueue(Reply(items=(escalated("./deploy.sh"),)), Reply.text("done"))
    floor = PermissionConfig(escalation_patterns=(r"^\./deploy\.sh$",))
    daemon = await make_daemon(options=codex_serve_options, permission=floor)
    async with client(daemon) as http:
        created = await http.post("/v1/sessions", json={"prompt": "deploy", "cwd": str(workspace)})
        events = await read_events(http, created.json()["session_id"])
        assert (await http.get("/v1/approvals")).json()["approvals"] == []
    assert not _systems(events, "approval_denied") and not _systems(events, "approval_pending")
    assert marker.exists()


async def _serve(codex_env: CodexTestEnv, tmp_path: Path, token_file: Path, *extra: str) -> tuple[Any, str]:
    argv = [str(Path(sys.executable).parent / "agent-fleet"), "serve", "--port", "0"]
    argv += ["--state-dir", str(tmp_path / "state"), "--token-file", str(token_file)]
    argv += [*config_args(codex_env.config), *extra]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, **codex_env.env},
        start_new_session=True,
    )
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        line = (await proc.stdout.readline()).decode()
    assert line.startswith("listening on http://127.0.0.1:"), line
    return proc, line.split()[-1]


async def test_serve_allow_escalation_end_to_end(
    codex_env: CodexTestEnv,
    scripted_model: ScriptedModelServer,
    workspace: Path,
    outside: Path,
    tmp_path: Path,
    token_file: Path,
) -> None:
    """``agent-fleet serve --allow-escalation REGEX``: an escalated ``touch`` outside the box stays
    declined (a built-in rule: no setting lets a write outside the box through), the matching escalated
    script runs outside the sandbox."""
    touched, deployed = outside / "marker", outside / "deployed"
    script(workspace / "deploy.sh", f"touch {deployed}")
    scripted_model.enqueue(
        Reply(items=(escalated(f"touch {touched}"),)),
        Reply(items=(escalated("./deploy.sh"),)),
        Reply.text("done"),
    )
    proc, url = await _serve(
        codex_env,
        tmp_path,
        token_file,
        "--allow-root",
        str(workspace),
        "--allow-escalation",
        r"^\./deploy\.sh$",
    )
    try:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
            created = await http.post("/v1/sessions", json={"prompt": "deploy", "cwd": str(workspace)})
            assert created.status_code == 201, created.text
            events = await read_events(http, created.json()["session_id"])
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            await proc.wait()
    assert not touched.exists()
    assert [d["data"]["rule"] for d in _systems(events, "approval_denied")] == ["write-outside-workspace"]
    assert deployed.exists()
    assert events[-1][1]["type"] == "Result"
