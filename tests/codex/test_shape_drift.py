"""Shape drift fails closed (issue 32): an approval whose safety-deciding parts carry a field this
version does not know is declined with a notice naming the field, never judged on the fields it knows.

Attack first: each request below would be accepted on its known fields alone (a rename inside the
workspace whose destination is spelled ``movePath``; a change kind after add/delete/update; a permission
or additional permission of a kind not listed). The fake app-server (real pipes) sends them."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Result, Spec, System
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.codex._shapes import change_drift, legacy_change_drift, profile_drift
from agent_fleet.events import Event

FAKE = Path(__file__).with_name("fake_app_server.py")


async def _run(tmp_path: Path, scenario: list[dict[str, Any]]) -> tuple[list[Event], list[dict[str, Any]]]:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    options = CodexOptions(codex_bin=wrapper, env={"FAKE_SCENARIO": json.dumps(scenario)})
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace))
        events = [e async for e in handle.events()]
    result = events[-1]
    assert isinstance(result, Result)
    return events, [a["result"] for a in json.loads(result.text)]


def _named(events: list[Event]) -> list[str]:
    return [
        e.data["field"] for e in events if isinstance(e, System) and e.subtype == "unknown_approval_field"
    ]


def _file_change(kind: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    item = {
        "type": "fileChange",
        "id": "fc1",
        "changes": [{"path": "a.txt", "kind": kind, "diff": "", **extra}],
    }
    return [
        {"method": "item/started", "params": {"item": item}, "notify": True},
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "fc1"}},
    ]


@pytest.mark.parametrize(
    ("kind", "extra", "field"),
    [
        ({"type": "update", "movePath": "/etc/cron.d/x"}, {}, "changes[0].kind.movePath"),
        ({"type": "rename", "to": "/etc/passwd"}, {}, "changes[0].kind.type 'rename'"),
        ({"type": "add"}, {"mode": "0777"}, "changes[0].mode"),
    ],
)
async def test_a_file_change_with_an_unknown_field_is_declined_naming_it(
    tmp_path: Path, kind: dict[str, Any], extra: dict[str, Any], field: str
) -> None:
    events, answers = await _run(tmp_path, _file_change(kind, **extra))
    assert answers == [{"decision": "decline"}]
    assert _named(events) == [field]


async def test_the_known_shape_is_still_judged_and_accepted(tmp_path: Path) -> None:
    events, answers = await _run(tmp_path, _file_change({"type": "update", "move_path": "b.txt"}))
    assert answers[0]["decision"] in ("accept", "acceptForSession") and _named(events) == []


async def test_legacy_patch_and_permission_profiles_with_unknown_fields_are_declined(tmp_path: Path) -> None:
    scenario = [
        {
            "method": "applyPatchApproval",
            "params": {
                "callId": "c",
                "fileChanges": {"a.txt": {"type": "update", "unified_diff": "", "movePath": "/x"}},
            },
        },
        {
            "method": "item/permissions/requestApproval",
            "params": {
                "itemId": "p1",
                "permissions": {"network": {"enabled": False}, "processes": {"spawn": True}},
            },
        },
        {
            "method": "item/commandExecution/requestApproval",
            "params": {
                "itemId": "c1",
                "command": "ls",
                "additionalPermissions": {"fileSystem": {"write": [], "mount": ["/"]}},
            },
        },
    ]
    events, answers = await _run(tmp_path, scenario)
    assert answers[0] == {
        "decision": {"denied": {"rejection": answers[0]["decision"]["denied"]["rejection"]}}
    }
    assert answers[1] == {"permissions": {}, "scope": "turn"}
    assert answers[2]["decision"] in ("decline", "cancel")
    assert _named(events) == [
        "fileChanges['a.txt'].movePath",
        "permissions.processes",
        "additionalPermissions.fileSystem.mount",
    ]


def test_the_shapes_codex_sends_have_no_drift() -> None:
    assert change_drift({"path": "a", "kind": {"type": "update", "move_path": None}, "diff": ""}) is None
    assert change_drift({"path": "a", "kind": "add", "diff": ""}) is None
    assert legacy_change_drift({"type": "add", "content": "x"}) is None
    assert profile_drift({"fileSystem": {"entries": [], "read": None}, "network": {"enabled": True}}) is None
