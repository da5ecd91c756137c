"""The floor against the real codex binary (scripted model), as an attacker holding the token would try
it (issue 28 items 1-3): every attack aims at a marker file outside the workspace, which never appears."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet.contract import PermissionConfig
from agent_fleet.testing import FunctionCall, Reply, ScriptedModelServer

from .conftest import MakeDaemon, client, read_events

pytestmark = pytest.mark.e2e  # runs the real binary

ONLY_GIT_STATUS = PermissionConfig(allow_patterns=("^git status$",), default="deny")
# The old merge's prefix for the daemon's '^git status$', shown to every client in GET /v1/sessions/{id}.
OLD_PREFIX = r"\A(?=[\s\S]*?(?:(?:^git status$)))"


def _shell(cmd: str, *, escalate: bool = False) -> FunctionCall:
    args: dict[str, object] = {"cmd": cmd, "login": False}
    if escalate:  # asks to run outside codex's sandbox
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = "needs to"
    return FunctionCall(name="exec_command", arguments=args)


def _exists(path: Path) -> bool:
    return path.exists()


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    outside.mkdir()
    return outside / "marker"


async def _run(http: httpx.AsyncClient, spec: dict[str, Any]) -> list[dict[str, Any]]:
    response = await http.post("/v1/sessions", json=spec)
    assert response.status_code == 201, response.text
    return [record for _, record in await read_events(http, response.json()["session_id"])]


def _denied(records: list[dict[str, Any]]) -> list[str]:
    return [r["data"]["rule"] for r in records if r["type"] == "System" and r["subtype"] == "approval_denied"]


@pytest.mark.parametrize(
    "patterns",
    [
        [".*"],
        [OLD_PREFIX + r"|[\s\S]*"],  # "combined already" to the old merge
    ],
    ids=["anything", "old-prefix"],
)
@pytest.mark.parametrize("escalate", [False, True], ids=["sandboxed", "escalated"])
async def test_a_clients_allow_pattern_cannot_escape_the_daemons(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
    marker: Path,
    patterns: list[str],
    escalate: bool,
) -> None:
    # Since the walls round a write outside the workspace is declined by a built-in rule before any pattern
    # is read, so the marker that shows the floor at work is inside the workspace: only the daemon's
    # '^git status$' stands between the client's '.*' and it.
    inside = workspace / "marker"
    # One call a reply: a refusal codex lets us send only as "cancel" interrupts the turn, and a call
    # made alongside it would be dropped with the turn rather than judged (seen once in CI).
    scripted_model.enqueue(
        Reply(items=(_shell(f"touch {marker}", escalate=escalate),)),
        Reply(items=(_shell(f"touch {inside}", escalate=escalate),)),
        Reply.text("done"),
    )
    daemon = await make_daemon(options=codex_serve_options, permission=ONLY_GIT_STATUS)
    spec = {
        "prompt": "touch it",
        "cwd": str(workspace),
        "sandbox": "workspace-write",
        "permission": {"allow_patterns": patterns, "default": "allow"},
    }
    async with client(daemon) as http:
        records = await _run(http, spec)
        shown = (await http.get(f"/v1/sessions/{records[0]['task_id']}")).json()["spec"]["permission"]
    assert not _exists(marker) and not _exists(inside)
    assert records[-1]["type"] == "Result"
    assert sorted(_denied(records)) == ["not-allowed", "write-outside-workspace"]
    assert shown["allow_patterns"] == patterns  # the client's as sent: never combined with the daemon's


async def test_a_client_pattern_that_only_compiles_inside_the_daemons_is_refused(
    make_daemon: MakeDaemon, codex_serve_options: dict[str, Any], workspace: Path, marker: Path
) -> None:
    """``x))|((.*`` closed the daemon's group in the old combination and accepted everything."""
    daemon = await make_daemon(options=codex_serve_options, permission=ONLY_GIT_STATUS)
    spec = {"prompt": "p", "cwd": str(workspace), "permission": {"allow_patterns": ["x))|((.*"]}}
    async with client(daemon) as http:
        response = await http.post("/v1/sessions", json=spec)
    assert response.status_code == 400, response.text
    assert "invalid regular expression" in response.json()["error"]["message"]
    assert not _exists(marker)


@pytest.fixture
def repo(workspace: Path) -> Path:
    subprocess.run(["git", "init", "-q"], cwd=workspace, check=True)
    return workspace


def _fsmonitor_env(marker: Path) -> dict[str, str]:
    """Git configuration by environment: ``git status`` runs ``core.fsmonitor`` as a command."""
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "core.fsmonitor",
        "GIT_CONFIG_VALUE_0": f"touch {marker}; false",
    }


async def test_env_cannot_turn_an_allowed_command_into_another(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    repo: Path,
    marker: Path,
) -> None:
    scripted_model.enqueue(Reply(items=(_shell("git status", escalate=True),)), Reply.text("done"))
    daemon = await make_daemon(options=codex_serve_options, permission=ONLY_GIT_STATUS)
    spec = {"prompt": "status", "cwd": str(repo), "sandbox": "workspace-write", "env": _fsmonitor_env(marker)}
    async with client(daemon) as http:
        for path, body in (
            ("/v1/sessions", spec),
            ("/v1/sessions?resume=019a0000-0000-7000-8000-000000000000", spec),
            ("/v1/batches", {"tasks": [{"id": "a", "prompt": "status"}], "spec": {**spec, "prompt": "t"}}),
        ):
            response = await http.post(path, json=body)
            assert response.status_code == 403, (path, response.text)
            assert "'env'" in response.json()["error"]["message"]
    assert not _exists(marker)
    assert daemon.sessions.provider_pids() == {}  # refused before any agent ran


async def test_env_is_taken_from_a_trusted_client(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply(items=(_shell("echo $FLOOR_PROBE > probe.txt"),)), Reply.text("done"))
    daemon = await make_daemon(options=codex_serve_options, trust_clients=True)
    spec = {"prompt": "p", "cwd": str(workspace), "sandbox": "workspace-write", "env": {"FLOOR_PROBE": "yes"}}
    async with client(daemon) as http:
        records = await _run(http, spec)
    assert records[-1]["type"] == "Result"
    assert (workspace / "probe.txt").read_text().strip() == "yes"
