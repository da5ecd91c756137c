"""codex exec's box (issue #27): the same writable world as the app-server's, through --sandbox and -c."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agent_fleet.codex.exec import CodexExecProvider
from agent_fleet.codex.options import CodexOptions
from agent_fleet.contract import Spec
from agent_fleet.events import Result, System
from agent_fleet.testing import FunctionCall, Reply, ScriptedModelServer

pytestmark = pytest.mark.e2e  # runs the real binary


async def test_codex_exec_writes_only_in_its_box(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, tmp_path: Path
) -> None:
    work, box_tmp, shared = tmp_path / "ws", tmp_path / "task-tmp", tmp_path / "shared-marker"
    work.mkdir()
    inherited = Path(exec_options.env["TMPDIR"]) / "inherited-marker"  # the codex child's own TMPDIR
    probe = work / "probe.sh"
    probe.write_text(
        f'#!/bin/sh\necho "$TMPDIR" > tmpdir.txt\ntouch "$TMPDIR/box" {shared} {inherited} in-ws\n'
    )
    probe.chmod(probe.stat().st_mode | stat.S_IXUSR)
    scripted_model.enqueue(Reply.exec("./probe.sh"), Reply.text("done"))
    async with CodexExecProvider(exec_options) as provider:  # Spec.sandbox unset: workspace-write
        handle = await provider.spawn(Spec(prompt="probe", cwd=work, temp_dir=box_tmp))
        assert isinstance(await handle.wait(), Result)
    assert (work / "tmpdir.txt").read_text().strip() == str(box_tmp)
    assert (box_tmp / "box").exists() and (work / "in-ws").exists()
    assert not shared.exists() and not inherited.exists()  # the shared /tmp and codex's TMPDIR: read-only


async def test_codex_exec_never_lets_a_command_out_of_its_box(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, tmp_path: Path
) -> None:
    """An escalated command (the agent asks to run outside the sandbox) and a plain one the sandbox
    denies: codex exec (approval policy ``never``) rejects the first and never retries the second
    unsandboxed; neither writes outside, and the rejection is reported."""
    work, outside = tmp_path / "ws", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    escape = work / "escape.sh"
    escape.write_text(f'#!/bin/sh\ntouch "{outside}/$1"\n')
    escape.chmod(escape.stat().st_mode | stat.S_IXUSR)
    asks = {"sandbox_permissions": "require_escalated", "justification": "it must write outside"}
    scripted_model.enqueue(
        Reply(items=(FunctionCall(name="exec_command", arguments={"cmd": "./escape.sh escalated", **asks}),)),
        Reply.exec("./escape.sh plain"),
        Reply.text("done"),
    )
    async with CodexExecProvider(exec_options) as provider:
        handle = await provider.spawn(Spec(prompt="escape", cwd=work))
        events = [event async for event in handle.events()]
    assert sorted(p.name for p in outside.iterdir()) == []
    refused = [e.data.get("kind") for e in events if isinstance(e, System) and e.subtype == "codex_refused"]
    assert "escalation" in refused, events
