"""The codex approval bridge never holds the event loop long, whatever the size of a request (issue 30,
item 8): file changes, permission profiles (alone, as a command's ``additionalPermissions``, granted
again after an ``approval_handler``) and network requests of 10,000 paths or a 60 KB host are judged
while a 1 ms ticker on the same loop keeps ticking -- the stall is measured on the loop, not inferred
from where the call was made. The verdicts are the ones the small requests get."""

from __future__ import annotations

import shlex
from typing import Any

from tests.loop_stall import best_of, held, shown

from agent_fleet import PermissionConfig
from agent_fleet.codex import _approvals
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision

WS = "/work/ws"
_PERMS = "item/permissions/requestApproval"
_CMD = "item/commandExecution/requestApproval"
_FILES = "item/fileChange/requestApproval"
PATHS = [f"{WS}/src/pkg{i % 97}/module{i}.py" for i in range(10_000)]


def _policy(config: PermissionConfig | None = None) -> ApprovalPolicy:
    policy = ApprovalPolicy(config)
    policy.evaluate(ApprovalRequest(kind="command", command="ls | cat", cwd=WS))  # rules and packs loaded
    return policy


async def _judged(
    policy: ApprovalPolicy, method: str, params: dict[str, Any], session: _approvals.Session
) -> tuple[_approvals.Judged, list[float]]:
    async def work() -> _approvals.Judged:
        return await _approvals.judge(policy, method, params, session)

    return await best_of(work)


async def test_a_permission_request_of_10000_write_roots() -> None:
    params = {"itemId": "p", "permissions": {"fileSystem": {"write": PATHS}, "network": {"enabled": True}}}
    judged, stalls = await _judged(_policy(), _PERMS, params, _approvals.Session(workspace=WS))
    assert held(stalls), shown(stalls)
    assert judged.decision.action == "allow_once", judged.decision
    assert judged.grant is not None and judged.grant["fileSystem"]["write"] == PATHS
    assert "network" not in judged.grant  # the whole network needs *://* in allowed_hosts


async def test_one_escaping_root_among_10000_is_withheld() -> None:
    asked = [*PATHS[:5000], "/etc", *PATHS[5000:]]
    params = {"itemId": "p", "permissions": {"fileSystem": {"write": asked}}}
    judged, stalls = await _judged(_policy(), _PERMS, params, _approvals.Session(workspace=WS))
    assert held(stalls), shown(stalls)
    assert judged.decision.action == "allow_once" and "/etc" in (judged.decision.reason or "")
    assert judged.grant == {"fileSystem": {"write": PATHS}}


async def test_10000_read_roots_and_entries() -> None:
    entries = [{"access": "write", "path": {"type": "path", "path": p}} for p in PATHS[:5000]]
    entries.append({"access": "read", "path": {"type": "path", "path": "/root/.ssh/id_rsa"}})
    asked = {"fileSystem": {"read": PATHS[5000:], "entries": entries}}
    params = {"itemId": "p", "permissions": asked}
    judged, stalls = await _judged(_policy(), _PERMS, params, _approvals.Session(workspace=WS))
    assert held(stalls), shown(stalls)
    assert judged.decision.action == "allow_once"
    assert judged.grant is not None and judged.grant["fileSystem"]["read"] == PATHS[5000:]
    assert len(judged.grant["fileSystem"]["entries"]) == 5000  # the key file is withheld


async def test_a_command_asking_for_10000_additional_roots() -> None:
    params = {"itemId": "c", "command": "ls", "additionalPermissions": {"fileSystem": {"write": PATHS}}}
    judged, stalls = await _judged(_policy(), _CMD, params, _approvals.Session(workspace=WS))
    assert held(stalls), shown(stalls)
    assert judged.decision.action == "allow_once", judged.decision
    escaping = {**params, "additionalPermissions": {"fileSystem": {"write": [*PATHS, "/usr/lib"]}}}
    judged, stalls = await _judged(_policy(), _CMD, escaping, _approvals.Session(workspace=WS))
    assert held(stalls), shown(stalls)
    assert (judged.decision.action, judged.decision.rule) == ("decline", "path-escape")


async def test_a_file_change_of_10000_paths() -> None:
    changes = [{"path": p, "kind": {"type": "add"}} for p in PATHS]
    session = _approvals.Session(workspace=WS, file_changes={"f": changes})
    judged, stalls = await _judged(_policy(), _FILES, {"itemId": "f"}, session)
    assert held(stalls), shown(stalls)
    assert judged.decision.action == "allow_for_session", judged.decision
    hook = _approvals.Session(
        workspace=WS, file_changes={"f": [*changes, {"path": f"{WS}/.git/hooks/pre-commit", "kind": {}}]}
    )
    judged, stalls = await _judged(_policy(), _FILES, {"itemId": "f"}, hook)
    assert held(stalls), shown(stalls)
    assert (judged.decision.action, judged.decision.rule) == ("decline", "vital-path")


async def test_a_network_request_for_a_60_kb_host() -> None:
    host = "a." * 30_000 + "example.com"
    context = {"host": host, "protocol": "https", "port": 443}
    params = {"itemId": "n", "command": None, "networkApprovalContext": context}
    judged, stalls = await _judged(_policy(), _CMD, params, _approvals.Session(workspace=WS))
    assert held(stalls), shown(stalls)
    assert judged.decision.action == "decline"


async def test_a_permission_grant_after_the_handler_accepts() -> None:
    policy = _policy(PermissionConfig(default="ask"))
    params = {"itemId": "p", "permissions": {"fileSystem": {"write": [*PATHS, "/etc"]}}}
    judged, _ = await _judged(policy, _PERMS, params, _approvals.Session(workspace=WS))
    assert judged.decision.rule == "default-ask"

    async def regranted() -> _approvals.Judged:
        return await _approvals.regrant(policy, params, judged, Decision(action="allow_once"))

    again, stalls = await best_of(regranted)
    assert held(stalls), shown(stalls)
    assert again.decision.action == "allow_once"
    assert again.grant == {"fileSystem": {"write": PATHS}}  # containment still holds


async def test_input_for_a_process_started_by_a_large_command() -> None:
    """The process's command line and the input are both parsed: in the child when large."""
    started = "echo" + " src/a/b.txt" * 10_000 + "; bash"
    session = _approvals.Session(workspace=WS, commands={"s": started})
    line = "echo " + "hi " * 33 + "\n"
    text = line * 500 + "rm -rf ~\n"
    params = {"itemId": "s", "kind": "writeStdin", "command": f"write_stdin s {shlex.quote(text)}"}
    judged, stalls = await _judged(_policy(), _CMD, params, session)
    assert held(stalls), shown(stalls)
    assert (judged.decision.action, judged.decision.rule) == ("decline", "rm-root")
    harmless = {**params, "command": ["write_stdin", "s", line * 500]}
    judged, stalls = await _judged(_policy(), _CMD, harmless, session)
    assert held(stalls), shown(stalls)
    assert judged.decision.action == "allow_once" and judged.stdin == ("s", line * 500)
