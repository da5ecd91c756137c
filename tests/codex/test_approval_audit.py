"""Issue 16, the audit: approval shapes that were waved through, each answered as the policy allows.

A scripted fake app-server (``fake_app_server.py``, real pipes) sends each request; the answers it got
back are the turn's final text (see ``test_approval_shapes``).
"""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import PermissionConfig, Result, Spec, System, ToolUse
from agent_fleet.codex import CodexProvider
from agent_fleet.events import Event
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision

from .test_approval_shapes import _CMD, _denied, _run, _started, _statuses
from .test_appserver_fake import _options
from .test_appserver_fake import _run as _run_options

_NO_DECLINE = ["accept", "acceptForSession", "cancel"]


async def _run_app(
    tmp_path: Path, scenario: list[dict[str, Any]], spec: Spec, **options: Any
) -> tuple[list[Event], list[dict[str, Any]]]:
    return await _run_options(_options(tmp_path, scenario, **options), spec)


def _with_permissions(
    command: str, asked: dict[str, Any], available: list[Any] | None = None
) -> dict[str, Any]:
    params: dict[str, Any] = {"itemId": "c", "command": command, "additionalPermissions": asked}
    if available is not None:
        params["availableDecisions"] = available
    return {"method": _CMD, "params": params}


# -- gap 1: a command approval's additionalPermissions ---------------------------------------------------


async def test_additional_permissions_beyond_the_policy_refuse_the_command(tmp_path: Path) -> None:
    wide = {"network": {"enabled": True}, "fileSystem": {"write": ["/"]}}
    scenario = [_with_permissions("ls", wide), _with_permissions("ls", wide, _NO_DECLINE)]
    events, answers = await _run(tmp_path, scenario)
    # an accept cannot narrow the grant: the whole command is refused (cancel where decline is not offered)
    assert [a["decision"] for a in answers] == ["decline", "cancel"]
    assert _denied(events) == ["path-escape", "path-escape"]


async def test_additional_permissions_the_policy_grants_accept_once(tmp_path: Path) -> None:
    inside = {"fileSystem": {"write": [str(tmp_path / "ws" / "build")]}}
    network = {"network": {"enabled": True}}
    scenario = [
        _with_permissions("bash -lc make", inside, _NO_DECLINE),
        _with_permissions("bash -lc make", network, _NO_DECLINE),
        _with_permissions("git reset --hard", inside, _NO_DECLINE),
    ]
    events, answers = await _run(tmp_path, scenario)
    # wider rights are for this command only: never acceptForSession
    assert [a["decision"] for a in answers] == ["accept", "cancel", "cancel"]
    assert _denied(events) == ["network-not-allowed", "git-reset-hard"]
    _, answers = await _run(tmp_path, scenario[1:2], PermissionConfig(allowed_hosts=("*://*",)))
    assert answers == [{"decision": "accept"}]


async def test_additional_permissions_that_cannot_be_judged_refuse(tmp_path: Path) -> None:
    glob = {
        "fileSystem": {"entries": [{"access": "write", "path": {"type": "glob_pattern", "pattern": "**"}}]}
    }
    scenario = [
        _with_permissions("ls", glob, _NO_DECLINE),
        _with_permissions("ls", "everything", _NO_DECLINE),  # type: ignore[arg-type]
    ]
    events, answers = await _run(tmp_path, scenario)
    assert [a["decision"] for a in answers] == ["cancel", "cancel"]
    assert _denied(events) == ["no-paths", "malformed-request"]


# -- gap 2: file changes of an item never announced --------------------------------------------------------


async def test_a_grant_root_alone_is_no_file_change(tmp_path: Path) -> None:
    inside = str(tmp_path / "ws" / "src")
    item = {"type": "fileChange", "id": "fc", "changes": [{"path": "src/a.py", "kind": {"type": "add"}}]}
    scenario = [
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "ghost", "grantRoot": inside}},
        _started(item),
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "fc", "grantRoot": "/etc"}},
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "fc", "grantRoot": inside}},
    ]
    events, answers = await _run(tmp_path, scenario)
    assert [a["decision"] for a in answers] == ["decline", "decline", "acceptForSession"]
    assert _denied(events) == ["no-paths", "path-escape"]


# -- gap 10: an unknown approval that offers no decline ------------------------------------------------------


async def test_an_unknown_approval_gets_the_refusal_it_offers(tmp_path: Path) -> None:
    scenario = [
        {
            "method": "item/teleport/requestApproval",
            "params": {"itemId": "t", "availableDecisions": _NO_DECLINE},
        },
        {"method": "item/teleport/requestApproval", "params": {"itemId": "u"}},
    ]
    events, answers = await _run(tmp_path, scenario)
    assert [a["decision"] for a in answers] == ["cancel", "decline"]
    assert _statuses(events) == ["cancel", "decline"]
    assert _denied(events) == ["unknown-request", "unknown-request"]


# -- gap 6: an approval_handler's accept of a refinable decline grants what the policy would --------------


async def test_a_handler_accepting_default_ask_gets_the_policys_grant(tmp_path: Path) -> None:
    asked_of_handler: list[str | None] = []

    async def yes(request: ApprovalRequest, decision: Decision) -> Decision:
        asked_of_handler.append(decision.rule)
        return Decision(action="allow_for_session", reason="a person said yes")

    ws = tmp_path / "ws"
    ws.mkdir()
    asked = {"network": {"enabled": True}, "fileSystem": {"write": [str(ws / "out"), "/etc"]}}
    scenario = [
        {"method": "item/permissions/requestApproval", "params": {"itemId": "p", "permissions": asked}},
        _with_permissions("bash -lc make", {"fileSystem": {"write": [str(ws / "out")]}}, _NO_DECLINE),
    ]
    _, answers = await _run_app(
        tmp_path,
        scenario,
        Spec(prompt="p", cwd=ws, permission=PermissionConfig(default="ask")),
        approval_handler=yes,
    )
    # the contained root is granted; /etc (path-escape) and the network (not in allowed_hosts) are not
    assert answers[0]["result"] == {
        "permissions": {"fileSystem": {"write": [str(ws / "out")]}},
        "scope": "session",
    }
    # more rights for one command: once, whatever the handler said
    assert answers[1]["result"] == {"decision": "accept"}
    assert asked_of_handler == ["default-ask", "default-ask"]


# -- gap 9: a policy that raises on a Spec.tools call --------------------------------------------------------


async def test_a_raising_policy_still_answers_a_tool_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: ApprovalPolicy, request: ApprovalRequest) -> Decision:
        raise RuntimeError("bug in a rule")

    def double(n: int) -> int:
        """Twice n."""
        return 2 * n

    monkeypatch.setattr(ApprovalPolicy, "evaluate", broken)
    call = {"method": "item/tool/call", "params": {"callId": "c1", "tool": "double", "arguments": {"n": 2}}}
    events, answers = await asyncio.wait_for(
        _run_app(tmp_path, [call], Spec(prompt="p", cwd=tmp_path, tools=[double])), 30
    )
    result = answers[0]["result"]
    assert result["success"] is False and "policy-error" in result["contentItems"][0]["text"]
    assert _denied(events) == ["policy-error"]


# -- gap 3: input written to a running command is judged by what reads it ---------------------------------


def _process(item_id: str, command: str) -> dict[str, Any]:
    return _started({"type": "commandExecution", "id": item_id, "command": command, "cwd": None})


def _stdin(item_id: str, text: str | None) -> dict[str, Any]:
    command = None if text is None else shlex.join(["write_stdin", "--session-id", "1000", text])
    params = {
        "itemId": item_id,
        "command": command,
        "kind": "writeStdin",
        "availableDecisions": ["accept", "cancel"],
    }
    return {"method": _CMD, "params": params}


async def test_input_to_a_shell_is_judged_as_a_command(tmp_path: Path) -> None:
    scenario = [
        _process("sh", "/bin/bash -lc bash"),
        _stdin("sh", "ls -la\n"),
        _stdin("sh", "git reset --hard\n"),
        _stdin("sh", "cd /\n"),
        _stdin("sh", "rm -rf *\n"),  # what was accepted before is the context of what comes now
        _stdin("sh", "rm -rf "),  # harmless alone ...
        _stdin("sh", "/\n"),  # ... but the shell has the first half of the line
        _stdin("sh", "\x03"),  # Ctrl-C runs nothing
        _stdin("sh", None),
    ]
    events, answers = await _run(tmp_path, scenario)
    decisions = ["accept", "cancel", "accept", "cancel", "accept", "cancel", "accept", "cancel"]
    assert [a["decision"] for a in answers] == decisions
    assert _denied(events) == ["git-reset-hard", "rm-root", "rm-root", "malformed-request"]


async def test_input_to_an_interpreter_is_judged_as_its_inline_code(tmp_path: Path) -> None:
    scenario = [
        _process("py", "python3"),
        _process("node", "/bin/bash -lc 'cd src && node'"),
        _process("db", "psql -h db.internal"),
        _process("app", "python3 app.py"),
        _stdin("py", "print(sum(range(10)))\n"),
        _stdin("py", "import shutil as s\n"),
        _stdin("py", "s.rmtree('/')\n"),
        _stdin("node", "require('child_process').execSync('rm -rf /')\n"),
        _stdin("db", "DROP TABLE users;\n"),  # a client we cannot look into: declined
        _stdin("app", "rm -rf /\n"),  # data for a script that was itself judged when it started
    ]
    events, answers = await _run(tmp_path, scenario)
    assert [a["decision"] for a in answers] == ["accept", "accept", "cancel", "cancel", "cancel", "accept"]
    assert _denied(events) == ["rm-root", "rm-root", "opaque-code"]


# -- gap 7: the writable roots a session declares are inside its limits -----------------------------------


async def test_declared_writable_roots_count_as_the_workspace(tmp_path: Path) -> None:
    ws, cache, shared, other = (tmp_path / n for n in ("ws", "cache", "shared", "other"))
    for d in (ws, cache, shared, other):
        d.mkdir()

    def change(item_id: str, path: Path) -> list[dict[str, Any]]:
        item = {
            "type": "fileChange",
            "id": item_id,
            "changes": [{"path": str(path / "f"), "kind": {"type": "add"}}],
        }
        return [_started(item), {"method": "item/fileChange/requestApproval", "params": {"itemId": item_id}}]

    scenario = [
        *change("a", cache),
        *change("b", shared),
        *change("c", other),
        {"method": _CMD, "params": {"itemId": "d", "command": "bash -lc ls", "cwd": str(cache)}},
    ]
    spec = Spec(prompt="p", cwd=ws, config={"sandbox_workspace_write": {"writable_roots": [str(cache)]}})
    options_config = {"sandbox_workspace_write.writable_roots": [str(shared)]}
    events, answers = await _run_app(tmp_path, scenario, spec, config=options_config)
    # the session's own declaration wins over the provider's for the same key
    assert [a["result"]["decision"] for a in answers] == [
        "acceptForSession",
        "decline",
        "decline",
        "acceptForSession",
    ]
    assert _denied(events) == ["path-escape", "path-escape"]
    _, answers = await _run_app(tmp_path, scenario, Spec(prompt="p", cwd=ws), config=options_config)
    assert [a["result"]["decision"] for a in answers] == ["decline", "acceptForSession", "decline", "decline"]


# -- gap 4: an MCP tool approval asked as an elicitation is the policy's ------------------------------------


def _mcp_call(item_id: str, server: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    item = {"type": "mcpToolCall", "id": item_id, "server": server, "tool": tool, "arguments": arguments}
    return _started(item)


def _tool_approval(server: str, params: dict[str, Any], kind: str = "mcp_tool_call") -> dict[str, Any]:
    meta = {"codex_approval_kind": kind, "persist": ["session", "always"], "tool_params": params}
    return {
        "method": "mcpServer/elicitation/request",
        "params": {
            "serverName": server,
            "mode": "form",
            "_meta": meta,
            "message": f"Allow the {server} MCP server to run tool?",
            "requestedSchema": {"type": "object", "properties": {}},
        },
    }


async def test_mcp_tool_approvals_are_judged_by_mcp_tools(tmp_path: Path) -> None:
    asked: list[object] = []

    async def never(request: object) -> object:
        asked.append(request)
        raise AssertionError("an approval is not a question for the input handler")

    scenario = [
        _mcp_call("m1", "docs", "wipe", {"what": "all"}),
        _mcp_call("m2", "docs", "search", {"q": "x"}),
        _tool_approval("docs", {"what": "all"}),  # the call it is about: by server and arguments
        _tool_approval("docs", {"q": "x"}),
        _tool_approval("other", {}),  # no call of that server in progress: nothing to judge
        _tool_approval("docs", {}, kind="tool_suggestion"),  # an approval kind we do not know
    ]
    spec = Spec(prompt="p", cwd=tmp_path, permission=PermissionConfig(mcp_tools=("docs/search",)))
    events, answers = await _run_app(tmp_path, scenario, spec, input_handler=never)
    accept = {"action": "accept", "content": {}, "_meta": {"persist": "session"}}
    decline = {"action": "decline", "content": None}
    assert [a["result"] for a in answers] == [decline, accept, decline, decline]
    assert _denied(events) == ["mcp-not-allowed", "malformed-request", "unknown-request"]
    about = [e.input for e in events if isinstance(e, ToolUse) and e.synthetic]
    assert [a.get("tool") for a in about[:2]] == ["mcp:docs/wipe", "mcp:docs/search"]
    assert asked == []
    # nothing allowed by default
    _, answers = await _run_app(tmp_path, scenario[:3], Spec(prompt="p", cwd=tmp_path), input_handler=never)
    assert [a["result"] for a in answers] == [decline]


# -- gap 5: approvals of threads without a handle (sub-agents) ---------------------------------------------


def _on(thread: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"method": method, "params": params, "notify": True, "thread": thread}


def _spawned(item_id: str, receivers: list[str]) -> dict[str, Any]:
    item = {"type": "collabAgentToolCall", "id": item_id, "tool": "spawnAgent", "status": "completed"}
    return {"item": {**item, "receiverThreadIds": receivers, "prompt": "p", "agentsStates": {}}}


def _ask(thread: str, command: str) -> dict[str, Any]:
    params = {"itemId": "c", "command": command, "availableDecisions": ["accept", "cancel"]}
    return {"method": _CMD, "params": params, "thread": thread}


async def test_sub_agent_approvals_are_judged_in_the_parent_session(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    inside = {
        "type": "fileChange",
        "id": "fc",
        "changes": [{"path": str(ws / "a.py"), "kind": {"type": "add"}}],
    }
    outside = {
        "type": "fileChange",
        "id": "fx",
        "changes": [{"path": "/etc/cron.d/x", "kind": {"type": "add"}}],
    }
    root_turn = {"id": "sub-turn", "rootTurnId": "turn-thr-1"}
    scenario = [
        _on("thr-1", "item/completed", _spawned("spawn-1", ["sub-1"])),  # the parent spawned sub-1
        _ask("sub-1", "git reset --hard"),
        _ask("sub-1", "ls"),
        _on("sub-2", "turn/started", {"turn": root_turn}),  # sub-2 names the parent's turn as its root
        _ask("sub-2", "ls"),
        _on("sub-1", "item/started", {"item": inside}),
        _on("sub-1", "item/started", {"item": outside}),
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "fc"}, "thread": "sub-1"},
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "fx"}, "thread": "sub-1"},
        _on("sub-1", "item/completed", _spawned("spawn-2", ["sub-3"])),  # sub-1 spawned sub-3
        _ask("sub-3", "git reset --hard"),
        _ask("ghost", "ls"),  # a thread that belongs to no session
        {
            "method": "item/permissions/requestApproval",
            "params": {"itemId": "p", "permissions": {}},
            "thread": "ghost",
        },
    ]
    board: list[Event] = []
    async with CodexProvider(_options(tmp_path, scenario)) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=ws))
        events = [e async for e in handle.events()]
        async with asyncio.timeout(10):
            async for event in provider.notices():
                board.append(event)
                if len([e for e in board if isinstance(e, System) and e.subtype == "approval_denied"]) == 2:
                    break
    result = events[-1]
    assert isinstance(result, Result)
    answers = [a["result"] for a in json.loads(result.text)]  # never -32601
    decisions = [a.get("decision") for a in answers]
    assert decisions == [
        "cancel",
        "accept",
        "accept",
        "acceptForSession",
        "decline",
        "cancel",
        "cancel",
        None,
    ]
    assert answers[-1] == {"permissions": {}, "scope": "turn"}
    # the parent's stream has the audit, naming the thread that asked
    threads = [e.input.get("thread_id") for e in events if isinstance(e, ToolUse) and e.synthetic]
    assert threads == ["sub-1", "sub-1", "sub-2", "sub-1", "sub-1", "sub-3"]
    assert _denied(events) == ["git-reset-hard", "path-escape", "git-reset-hard"]
    # a refusal in a sub-agent does not continue (or end) the parent's turn
    assert not [e for e in events if isinstance(e, System) and e.subtype == "declined_turn_continued"]
    denied = [e.data for e in board if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [(d["rule"], d["thread_id"]) for d in denied] == [("unknown-thread", "ghost")] * 2
