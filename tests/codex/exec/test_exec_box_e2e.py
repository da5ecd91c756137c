"""codex exec's box (issue #27): the same writable world as the app-server's, through --sandbox and -c."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from agent_fleet.codex.exec import CodexExecProvider
from agent_fleet.codex.options import CodexOptions
from agent_fleet.contract import Spec
from agent_fleet.events import Result
from agent_fleet.testing import Reply, ScriptedModelServer

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
