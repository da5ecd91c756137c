"""Issue 16: every approval shape a (hostile) app-server can send is answered as the policy allows.

A scripted fake app-server (``fake_app_server.py``, real pipes) sends each request; the answers it got
back are the turn's final text. ``denied`` collects the ``approval_denied`` notices by rule.
"""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Error, PermissionConfig, Result, Spec, System, ToolResult
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.events import Event
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision

FAKE = Path(__file__).with_name("fake_app_server.py")
_CMD = "item/commandExecution/requestApproval"


async def _run(
    tmp_path: Path, scenario: list[dict[str, Any]], permission: PermissionConfig | None = None
) -> tuple[list[Event], list[dict[str, Any]]]:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    options = CodexOptions(codex_bin=wrapper, env={"FAKE_SCENARIO": json.dumps(scenario)})
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace, permission=permission))
        events = [e async for e in handle.events()]
    result = events[-1]
    assert isinstance(result, Result)
    answers = json.loads(result.text)
    assert all("result" in a for a in answers), answers  # never an RPC error
    return events, [a["result"] for a in answers]


def _denied(events: list[Event]) -> list[str | None]:
    return [e.data["rule"] for e in events if isinstance(e, System) and e.subtype == "approval_denied"]


def _statuses(events: list[Event]) -> list[str | None]:
    return [e.status for e in events if isinstance(e, ToolResult) and e.synthetic]


def _started(item: dict[str, Any]) -> dict[str, Any]:
    return {"method": "item/started", "params": {"item": item}, "notify": True}


# -- unknown approval methods ------------------------------------------------------------------------


async def test_unknown_approval_methods_are_declined_and_named(tmp_path: Path) -> None:
    scenario = [
        {"method": "item/networkAccess/requestApproval", "params": {"itemId": "n", "host": "evil.example"}},
        {"method": "fooApproval", "params": {"callId": "f"}},
    ]
    events, answers = await _run(tmp_path, scenario)  # default "allow" must not wave them through
    assert answers[0] == {"decision": "decline"}
    assert "denied" in answers[1]["decision"]
    notices = [
        e.data["method"] for e in events if isinstance(e, System) and e.subtype == "unknown_approval_kind"
    ]
    assert notices == ["item/networkAccess/requestApproval", "fooApproval"]
    assert _denied(events) == ["unknown-request", "unknown-request"]


# -- permission requests -------------------------------------------------------------------------------


async def test_full_permission_request_is_granted_only_what_the_policy_allows(tmp_path: Path) -> None:
    asked = {"network": {"enabled": True}, "fileSystem": {"write": ["/"]}}
    scenario = [
        {"method": "item/permissions/requestApproval", "params": {"itemId": "p", "permissions": asked}}
    ]
    events, answers = await _run(tmp_path, scenario)
    assert answers == [{"permissions": {}, "scope": "turn"}]
    assert _denied(events) == ["path-escape"]
    # network for any host needs '*' in the allow-list; "/" is never inside the workspace
    _, answers = await _run(tmp_path, scenario, PermissionConfig(allowed_hosts=("*",)))
    assert answers == [{"permissions": {}, "scope": "turn"}]  # "*" is any host on the web, not the sandbox
    _, answers = await _run(tmp_path, scenario, PermissionConfig(allowed_hosts=("*://*",)))
    assert answers == [{"permissions": {"network": {"enabled": True}}, "scope": "turn"}]


async def test_permission_entries_grant_contained_paths_only(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    entries = [
        {"access": "write", "path": {"type": "path", "path": str(ws / "out")}},
        {"access": "write", "path": {"type": "special", "value": {"kind": "root"}}},
        {"access": "read", "path": {"type": "path", "path": "/root/.ssh/id_rsa"}},
    ]
    asked = {"fileSystem": {"entries": entries}}
    scenario = [
        {"method": "item/permissions/requestApproval", "params": {"itemId": "p", "permissions": asked}}
    ]
    _, answers = await _run(tmp_path, scenario)
    assert answers == [{"permissions": {"fileSystem": {"entries": entries[:1]}}, "scope": "turn"}]


# -- network approvals and stdin (command: null) -------------------------------------------------------


def _network(host: str, protocol: str = "https") -> dict[str, Any]:
    context = {"host": host, "protocol": protocol}
    return {"method": _CMD, "params": {"itemId": "c", "command": None, "networkApprovalContext": context}}


async def test_network_approval_is_judged_on_the_allow_list(tmp_path: Path) -> None:
    scenario = [
        _network("pypi.org"),
        _network("evil.example"),
        _network("files.pypi.org", "socks5Tcp"),  # a bare entry is the web (http, https) only
        _network("proxy.corp.example", "socks5Tcp"),
    ]
    allowed = ("pypi.org", "*.pypi.org", "socks5tcp://proxy.corp.example")
    events, answers = await _run(tmp_path, scenario, PermissionConfig(allowed_hosts=allowed))
    decisions = ["acceptForSession", "decline", "decline", "acceptForSession"]
    assert [a["decision"] for a in answers] == decisions
    assert _denied(events) == ["network-not-allowed", "network-not-allowed"]
    # the default "allow" opens no network: an empty allow-list declines every host
    _, answers = await _run(tmp_path, [_network("pypi.org")])
    assert answers == [{"decision": "decline"}]


async def test_malformed_network_context_is_declined(tmp_path: Path) -> None:
    bad = _network("pypi.org", protocol="gopher")
    events, answers = await _run(tmp_path, [bad], PermissionConfig(allowed_hosts=("*://*",)))
    assert answers == [{"decision": "decline"}]
    assert _denied(events) == ["malformed-request"]


async def test_stdin_writes_are_judged_by_the_command_they_go_to(tmp_path: Path) -> None:
    def stdin(item_id: str) -> dict[str, Any]:
        command = "write_stdin --session-id 1000 'some data'"
        return {"method": _CMD, "params": {"itemId": item_id, "command": command, "kind": "writeStdin"}}

    scenario = [
        _started({"type": "commandExecution", "id": "cat", "command": "cat", "cwd": None}),
        _started({"type": "commandExecution", "id": "bad", "command": "git reset --hard", "cwd": None}),
        stdin("cat"),
        stdin("bad"),
        stdin("never-started"),
    ]
    events, answers = await _run(tmp_path, scenario)
    # input is accepted once (each write is judged), never for the session
    assert [a["decision"] for a in answers] == ["accept", "decline", "decline"]
    assert _denied(events) == ["git-reset-hard", "malformed-request"]


# -- offered decisions ----------------------------------------------------------------------------------


async def test_only_offered_decisions_are_used_narrowest_first(tmp_path: Path) -> None:
    offered = ["accept", {"acceptWithExecpolicyAmendment": {"execpolicy_amendment": ["ls"]}}, "cancel"]

    def cmd(command: str, available: list[Any]) -> dict[str, Any]:
        return {
            "method": _CMD,
            "params": {"itemId": "c", "command": command, "availableDecisions": available},
        }

    scenario = [
        cmd("ls", offered),  # acceptForSession not offered: accept
        cmd("git reset --hard", offered),  # decline not offered: cancel
        cmd("ls", ["decline", "cancel"]),  # no accept at all: declined, rule not-offered
    ]
    events, answers = await _run(tmp_path, scenario)
    assert [a["decision"] for a in answers] == ["accept", "cancel", "decline"]
    assert _statuses(events) == ["allow_once", "cancel", "decline"]
    assert _denied(events) == ["git-reset-hard", "not-offered"]


# -- file changes ----------------------------------------------------------------------------------------


async def test_a_rename_out_of_the_workspace_is_declined(tmp_path: Path) -> None:
    move = {"type": "update", "move_path": "/etc/cron.d/evil"}
    item = {"type": "fileChange", "id": "fc", "changes": [{"path": "src/main.py", "kind": move, "diff": ""}]}
    legacy = {"src/main.py": {"type": "update", "unified_diff": "", "move_path": "/etc/cron.d/evil"}}
    scenario = [
        _started(item),
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "fc"}},
        {"method": "applyPatchApproval", "params": {"callId": "p", "fileChanges": legacy}},
    ]
    events, answers = await _run(tmp_path, scenario)
    assert answers[0] == {"decision": "decline"}
    assert "denied" in answers[1]["decision"]
    assert _denied(events) == ["path-escape", "path-escape"]


async def test_file_change_approvals_without_paths_are_declined(tmp_path: Path) -> None:
    scenario = [
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "never-announced"}},
        {"method": "applyPatchApproval", "params": {"callId": "p"}},
    ]
    events, answers = await _run(tmp_path, scenario)
    assert answers[0] == {"decision": "decline"}
    assert "denied" in answers[1]["decision"]
    assert _denied(events) == ["no-paths", "no-paths"]


# -- the containment root ---------------------------------------------------------------------------------


async def test_a_foreign_cwd_is_declined_and_never_becomes_the_root(tmp_path: Path) -> None:
    inside = tmp_path / "ws" / "sub"
    inside.mkdir(parents=True)
    scenario = [
        {"method": _CMD, "params": {"itemId": "c", "command": "chmod -R 777 /opt/app", "cwd": "/opt/app"}},
        {"method": "execCommandApproval", "params": {"callId": "x", "command": ["ls"], "cwd": "/"}},
        {"method": _CMD, "params": {"itemId": "d", "command": "bash -lc ls", "cwd": str(inside)}},
    ]
    events, answers = await _run(tmp_path, scenario)
    assert answers[0] == {"decision": "decline"}
    assert "denied" in answers[1]["decision"]
    assert answers[2] == {"decision": "acceptForSession"}
    assert _denied(events) == ["foreign-cwd", "foreign-cwd"]


# -- a raising policy ---------------------------------------------------------------------------------------


async def test_a_raising_policy_declines_with_policy_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: ApprovalPolicy, request: ApprovalRequest) -> Decision:
        raise RuntimeError("bug in a rule")

    monkeypatch.setattr(ApprovalPolicy, "evaluate", broken)
    asked = {"network": {"enabled": True}}
    scenario = [
        {"method": _CMD, "params": {"itemId": "c", "command": "ls"}},
        {"method": "execCommandApproval", "params": {"callId": "x", "command": ["ls"]}},
        {"method": "item/permissions/requestApproval", "params": {"itemId": "p", "permissions": asked}},
    ]
    events, answers = await _run(tmp_path, scenario)
    assert answers[0] == {"decision": "decline"}
    assert "bug in a rule" in answers[1]["decision"]["denied"]["rejection"]
    assert answers[2] == {"permissions": {}, "scope": "turn"}
    assert _denied(events) == ["policy-error"] * 3


# -- a refusal codex only lets us send as cancel ------------------------------------------------------------


async def _run_interrupting(
    tmp_path: Path, first: list[dict[str, Any]], later: list[dict[str, Any]]
) -> tuple[list[Event], int]:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {
        "FAKE_SCENARIO": json.dumps(first),
        "FAKE_LATER_SCENARIO": json.dumps(later),
        "FAKE_INTERRUPT_ON_CANCEL": "1",
    }
    async with CodexProvider(CodexOptions(codex_bin=wrapper, env=env)) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        events = [e async for e in handle.events()]
        return events, provider.connection.requests_sent["turn/start"]


def _reset(available: list[str]) -> dict[str, Any]:
    params = {"itemId": "c", "command": "git reset --hard", "availableDecisions": available}
    return {"method": _CMD, "params": params}


async def test_a_refusal_sent_as_cancel_continues_the_turn(tmp_path: Path) -> None:
    events, turns = await _run_interrupting(tmp_path, [_reset(["accept", "cancel"])], later=[])
    assert turns == 2  # the interrupted codex turn, then the one that carries on
    continued = [e for e in events if isinstance(e, System) and e.subtype == "declined_turn_continued"]
    assert len(continued) == 1
    assert (
        "git reset --hard" in continued[0].data["reason"] and "git-reset-hard" in continued[0].data["reason"]
    )
    assert _statuses(events) == ["cancel"]
    result = events[-1]
    assert isinstance(result, Result) and json.loads(result.text) == []  # the second turn's answers


async def test_continuations_are_bounded(tmp_path: Path) -> None:
    reset = _reset(["accept", "cancel"])
    events, turns = await _run_interrupting(tmp_path, [reset], later=[reset])
    assert turns == 21  # the first turn and 20 continuations
    end = events[-1]
    assert isinstance(end, Error) and end.code == "cancelled"


async def test_an_offered_decline_does_not_interrupt(tmp_path: Path) -> None:
    events, turns = await _run_interrupting(tmp_path, [_reset(["accept", "decline", "cancel"])], later=[])
    assert turns == 1
    assert not any(isinstance(e, System) and e.subtype == "declined_turn_continued" for e in events)
    assert isinstance(events[-1], Result)
