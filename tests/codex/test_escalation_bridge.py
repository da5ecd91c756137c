"""The approval bridge's "outside the sandbox?" for every approval kind codex 0.163 sends (issue #27):
what would run or write outside the session's sandbox is judged as an escalation (proof, a setting or a
person; never the default), what stays inside is judged as before. Attacks first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import PermissionConfig
from agent_fleet.codex import _approvals
from agent_fleet.codex._box import Box, make_box
from agent_fleet.policy import ApprovalPolicy

_CMD = "item/commandExecution/requestApproval"
_RETRY = "command failed; retry without sandbox?"  # codex's own words when it wants to leave the sandbox


@pytest.fixture
def box(tmp_path: Path) -> Iterator[Box]:
    work = tmp_path / "ws"
    work.mkdir()
    made = make_box(str(work), None, None, ())
    yield made
    made.close()


def _session(box: Box | None, workspace: str, **extra: Any) -> _approvals.Session:
    roots = box.roots if box is not None else ()
    return _approvals.Session(workspace=workspace, writable_roots=roots, box=box, **extra)


async def _judge(
    method: str, params: dict[str, Any], session: _approvals.Session, config: PermissionConfig | None = None
) -> _approvals.Judged:
    return await _approvals.judge(ApprovalPolicy(config), method, params, session)


def _command(command: Any, reason: str | None = None, **more: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"itemId": "c", "command": command, **more}
    if reason is not None:
        params["reason"] = reason
    return params


@pytest.mark.parametrize(
    ("command", "reason"),
    [
        ("/bin/bash -c 'touch inside.txt'", "I need to write this file"),  # an escalated exec_command
        ("/bin/bash -lc ./deploy.sh", "deploy"),
        ("/bin/bash -c ./run-tests.sh", _RETRY),  # codex asking to retry without the sandbox
        ("/usr/bin/sh -c 'touch inside.txt'", None),  # a shell the tripwire cannot watch
        ("/bin/zsh -lc 'touch inside.txt'", None),
        ("touch inside.txt", None),  # no shell at all: nothing stops a retry outside
    ],
)
async def test_what_may_run_outside_the_sandbox_needs_proof(
    box: Box, command: str, reason: str | None
) -> None:
    judged = await _judge(_CMD, _command(command, reason), _session(box, box.workspace))
    assert judged.request.escalated
    assert judged.decision.action == "decline" and judged.decision.rule == "escalation-unproven", judged
    assert _approvals.describe(judged.request)["escalated"] is True


async def test_the_legacy_method_is_judged_the_same(box: Box) -> None:
    params = {"callId": "x", "command": ["/bin/bash", "-lc", "./deploy.sh"], "reason": "deploy"}
    judged = await _judge("execCommandApproval", params, _session(box, box.workspace))
    assert judged.request.escalated and judged.decision.rule == "escalation-unproven"


async def test_a_proven_escalation_is_accepted_once_with_a_grant(box: Box) -> None:
    command = "/bin/bash -c 'git add -A && git commit -m x'"
    judged = await _judge(_CMD, _command(command, "record the work"), _session(box, box.workspace))
    assert judged.decision.action == "allow_once" and judged.once
    assert judged.escalation == command  # what the box grants one run outside the sandbox


async def test_an_escalation_pattern_is_an_explicit_setting(box: Box) -> None:
    config = PermissionConfig(escalation_patterns=[r"^\./deploy\.sh$"])
    judged = await _judge(
        _CMD, _command("/bin/bash -lc ./deploy.sh", "deploy"), _session(box, box.workspace), config
    )
    assert judged.decision.action == "allow_once"
    # and the handler/person route: the decline is one an approval handler may refine
    from agent_fleet._provider.refine import for_handler

    judged = await _judge(
        _CMD, _command("/bin/bash -lc ./other.sh", "x"), _session(box, box.workspace), config
    )
    assert for_handler(judged.decision)


async def test_a_plain_command_through_the_tripwire_stays_inside(box: Box) -> None:
    judged = await _judge(_CMD, _command("/bin/bash -lc ./run-tests.sh"), _session(box, box.workspace))
    assert not judged.request.escalated and judged.escalation is None
    assert judged.decision.action == "allow_for_session"


@pytest.mark.parametrize("sandbox", ["danger-full-access", None])
async def test_without_a_sandbox_nothing_is_an_escalation(tmp_path: Path, sandbox: str | None) -> None:
    """Under danger-full-access (or with no box) the policy is the only guard: judged as before."""
    made = make_box(str(tmp_path), sandbox, None, ()) if sandbox else None
    try:
        session = _session(made, str(tmp_path))
        judged = await _judge(_CMD, _command("/usr/bin/sh -c ./deploy.sh", "deploy"), session)
        assert not judged.request.escalated and judged.decision.action == "allow_for_session"
    finally:
        if made is not None:
            made.close()


async def test_a_network_approval_is_judged_by_the_allow_list_alone(box: Box) -> None:
    context = {"host": "example.com", "protocol": "https", "port": 443}
    params = {"itemId": "c", "command": None, "networkApprovalContext": context}
    judged = await _judge(_CMD, params, _session(box, box.workspace))
    assert judged.request.kind == "network" and judged.decision.rule == "network-not-allowed"
    allowed = PermissionConfig(allowed_hosts=("example.com",))
    assert (await _judge(_CMD, params, _session(box, box.workspace), allowed)).decision.accepted


async def test_input_for_a_process_outside_the_sandbox_is_an_escalation(box: Box) -> None:
    commands = {"esc": "/bin/bash -lc bash", "in": "/bin/bash -lc bash"}
    params = {"itemId": "esc", "command": "write_stdin --session-id 1 'echo hi > f\n'", "kind": "writeStdin"}
    outside = _session(box, box.workspace, commands=commands, escalated_items={"esc"})
    judged = await _judge(_CMD, params, outside)
    assert judged.decision.rule == "escalation-unproven", judged.decision
    assert judged.escalation is None  # input is never a grant
    inside = await _judge(_CMD, {**params, "itemId": "in"}, outside)
    assert inside.decision.accepted


async def test_additional_permissions_are_judged_as_a_grant(box: Box) -> None:
    asked = {"fileSystem": {"write": [str(Path(box.workspace) / ".git")]}}
    judged = await _judge(
        _CMD, _command("/bin/bash -lc make", additionalPermissions=asked), _session(box, box.workspace)
    )
    assert not judged.request.escalated
    assert judged.decision.rule == "vital-path"


async def test_file_changes_are_judged_against_the_box(box: Box) -> None:
    def change(path: str) -> tuple[str, dict[str, Any], _approvals.Session]:
        changes = {"fc": [{"path": path, "kind": {"type": "add"}}]}
        return (
            "item/fileChange/requestApproval",
            {"itemId": "fc"},
            _session(box, box.workspace, file_changes=changes),
        )

    assert box.temp_dir is not None
    assert (await _judge(*change(f"{box.workspace}/.git/hooks/pre-commit"))).decision.rule == "vital-path"
    assert (await _judge(*change(f"{box.workspace}/.codex/config.toml"))).decision.rule == "vital-path"
    assert (await _judge(*change("/tmp/shared/x"))).decision.rule == "path-escape"
    assert (await _judge(*change(f"{box.temp_dir}/scratch.txt"))).decision.accepted
    assert (await _judge(*change(f"{box.workspace}/src/a.py"))).decision.accepted


async def test_a_permission_request_for_git_machinery_is_declined(box: Box) -> None:
    asked = {"fileSystem": {"write": [f"{box.workspace}/.git"]}}
    judged = await _judge(
        "item/permissions/requestApproval",
        {"itemId": "p", "permissions": asked},
        _session(box, box.workspace),
    )
    assert not judged.decision.accepted and judged.decision.rule == "vital-path"
