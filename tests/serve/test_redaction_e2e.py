"""Secrets planted in a pending command, a prompt and error messages reach no endpoint and no page (real
codex binary, scripted model)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet.testing import Reply, ScriptedModelServer, exec_command

from .conftest import TOKEN, MakeDaemon, client, read_events

pytestmark = pytest.mark.e2e  # runs the real binary

SECRET = "sk-proj-" + "Zq7" * 12
IN_COMMAND = "ghp_" + "k" * 36


async def _everything(http: httpx.AsyncClient, sid: str) -> dict[str, str]:
    """Every readable endpoint's body (and the dashboard's)."""
    out = {}
    for path in ("/", "/v1/approvals", "/v1/sessions", f"/v1/sessions/{sid}", "/v1/batches", "/v1/info"):
        response = await http.get(path)
        assert response.status_code == 200, (path, response.text)
        out[path] = response.text
    chunks: list[str] = []
    async with http.stream("GET", f"/v1/sessions/{sid}/events") as events:
        try:  # a running turn's stream does not end: what it sent in a second is every event so far
            async with asyncio.timeout(1):
                async for chunk in events.aiter_text():
                    chunks.append(chunk)
        except TimeoutError:
            pass
    out["events"] = "".join(chunks)
    assert '"type"' in out["events"]
    return out


async def test_no_secret_reaches_a_response(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    command = f"printf '%s' 'Authorization: Bearer {SECRET}' '{IN_COMMAND}' > note.txt"
    scripted_model.enqueue(Reply(items=(exec_command(command),)), Reply.text("ok"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        spec = {
            "prompt": f"use the key {SECRET} and {TOKEN} please",
            "cwd": str(workspace),
            "sandbox": "workspace-write",
            "permission": {"default": "ask"},
        }
        response = await http.post("/v1/sessions", json=spec)
        assert response.status_code == 201, response.text
        sid = response.json()["session_id"]
        async with asyncio.timeout(30):
            while not daemon.approvals.pending():
                await daemon.approvals.changed.wait()
        [pending] = (await http.get("/v1/approvals")).json()["approvals"]
        assert "printf" in str(pending["command"]) and "[REDACTED]" in str(pending["command"])
        while_pending = await _everything(http, sid)
        decided = await http.post(f"/v1/approvals/{pending['approval_id']}", json={"decision": "decline"})
        assert decided.status_code == 200
        events = await read_events(http, sid)
        assert events[-1][1]["type"] == "Result"
        after = await _everything(http, sid)

        # Errors that would echo what the client sent, or what the provider says about it.
        errors = [
            await http.post("/v1/sessions", json={"prompt": "p", SECRET: 1}),
            await http.post(
                "/v1/sessions", params={"resume": SECRET}, json={"prompt": "p", "cwd": str(workspace)}
            ),
            await http.post(f"/v1/sessions/{SECRET}/turns", json={"prompt": "p"}),
            await http.post("/v1/batches", json={"tasks": f'{{"id": "{SECRET}", "prompt": 1}}'}),
        ]
    assert [e.status_code for e in errors] == [400, 502, 404, 400]
    assert "[REDACTED]" in errors[0].text  # the message names the field, redacted
    for name, text in [*while_pending.items(), *after.items(), *((f"error {e.url}", e.text) for e in errors)]:
        for secret in (SECRET, IN_COMMAND, TOKEN):
            assert secret not in text, (name, secret)
