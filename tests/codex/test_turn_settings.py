"""Per-turn settings on ``send()``: the walls (pure) and what reaches codex (the real binary, e2e)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.codex._turn_settings import SessionSettings, TurnSettings
from agent_fleet.errors import UsageError
from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer

WS = "/work/space"


def _settings(sandbox: str = "workspaceWrite", approval: Any = "untrusted") -> TurnSettings:
    response = {
        "model": "gpt-5.5",
        "reasoningEffort": "medium",
        "sandbox": {"type": sandbox, "writableRoots": ["/work/tmp"], "excludeSlashTmp": True},
        "approvalPolicy": approval,
        "cwd": WS,
    }
    session = SessionSettings.from_response(
        response, workspace=WS, writable_roots=("/work/tmp",), summary=None
    )
    return TurnSettings(session)


@pytest.mark.parametrize(
    ("session", "asked"),
    [
        ("workspaceWrite", "danger-full-access"),
        ("readOnly", "workspace-write"),
        ("readOnly", "danger-full-access"),
    ],
)
def test_a_turns_sandbox_is_never_wider_than_the_sessions(session: str, asked: str) -> None:
    with pytest.raises(UsageError, match="may not be wider"):
        _settings(session).params(sandbox=asked)


def test_narrower_or_equal_sandboxes_and_their_policies() -> None:
    settings = _settings("dangerFullAccess")
    assert settings.params(sandbox="read-only") == {
        "sandboxPolicy": {"type": "readOnly", "networkAccess": False}
    }
    narrowed = settings.params(sandbox="workspace-write")["sandboxPolicy"]
    assert narrowed == {
        "type": "workspaceWrite",
        "writableRoots": ["/work/tmp"],
        "networkAccess": False,
        "excludeSlashTmp": True,
        "excludeTmpdirEnvVar": True,
    }
    same = _settings("workspaceWrite").params(sandbox="workspace-write")["sandboxPolicy"]
    assert same == {"type": "workspaceWrite", "writableRoots": ["/work/tmp"], "excludeSlashTmp": True}
    with pytest.raises(UsageError, match="not one a turn can be narrowed"):
        _settings("externalSandbox").params(sandbox="read-only")


def test_the_approval_policy_never_asks_less_than_the_sessions() -> None:
    for looser in ("never", "on-request"):
        with pytest.raises(UsageError, match="may not ask less"):
            _settings(approval="untrusted").params(approval_policy=looser)
    assert _settings(approval="on-request").params(approval_policy="untrusted") == {
        "approvalPolicy": "untrusted"
    }
    with pytest.raises(UsageError, match="may not ask less"):  # a granular session policy: unknown rank
        _settings(approval={"granular": {}}).params(approval_policy="untrusted")
    with pytest.raises(UsageError, match="must be one of"):
        _settings().params(approval_policy="sometimes")


def test_a_turns_cwd_lies_inside_the_workspace() -> None:
    assert _settings().params(cwd="sub/dir") == {"cwd": f"{WS}/sub/dir"}
    assert _settings().params(cwd="/work/tmp/x") == {"cwd": "/work/tmp/x"}
    for outside in ("/etc", "../elsewhere", f"{WS}/../x"):
        with pytest.raises(UsageError, match="inside the session's workspace"):
            _settings().params(cwd=outside)


def test_overrides_hold_for_one_turn_then_the_sessions_values_come_back() -> None:
    settings = _settings()
    first = settings.params(
        model="m2", reasoning_effort="high", reasoning_summary="detailed", sandbox="read-only"
    )
    assert first == {
        "model": "m2",
        "effort": "high",
        "summary": "detailed",
        "sandboxPolicy": {"type": "readOnly", "networkAccess": False},
    }
    second = settings.params(model="m3")
    assert second == {
        "model": "m3",
        "effort": "medium",
        "summary": "auto",
        "sandboxPolicy": {"type": "workspaceWrite", "writableRoots": ["/work/tmp"], "excludeSlashTmp": True},
    }
    assert settings.params() == {"model": "gpt-5.5"}
    assert settings.params() == {}
    with pytest.raises(UsageError):
        settings.params(reasoning_summary="verbose")
    with pytest.raises(UsageError):
        settings.params(model=" ")


def _sandbox_mode(request: RecordedRequest) -> str:
    """The sandbox codex told the model about in this request (its latest permissions message)."""
    found = re.findall(r"`sandbox_mode` is `([a-z-]+)`", json.dumps(request.input))
    return found[-1] if found else ""


@pytest.mark.protocol_smoke
@pytest.mark.e2e
async def test_a_read_only_turn_then_the_sessions_own_sandbox_again(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("ready"), Reply.text("looked"), Reply.text("back"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="start", cwd=workspace, sandbox="workspace-write"))
        await handle.wait()
        with pytest.raises(UsageError, match="may not be wider"):
            await handle.send("x", sandbox="danger-full-access")
        await handle.send("look only", sandbox="read-only", model="gpt-5.5", reasoning_effort="low")
        await handle.wait()
        await handle.send("back to work")
        await handle.wait()
    first, narrowed, restored = scripted_model.requests
    # what codex told the model each turn: the session's sandbox, the turn's, the session's again
    assert [_sandbox_mode(r) for r in (first, narrowed, restored)] == [
        "workspace-write",
        "read-only",
        "workspace-write",
    ]
    assert narrowed.body.get("reasoning", {}).get("effort") == "low"
    assert restored.body.get("reasoning", {}).get("effort") != "low"
