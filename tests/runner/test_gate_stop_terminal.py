"""No traceback reaches the user when gates are stopped (issue 29 item 8), in a real terminal (tmux):
Ctrl-C while three gates run printed ``_GatheringFuture exception was never retrieved ...
CancelledError`` three times, and ``--timeout`` cancelling a gate printed one."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer

from .terminal import Terminal, terminal, until
from .test_batch_view_terminal import _ledger

__all__ = ["terminal"]  # the fixture

pytestmark = pytest.mark.e2e

SCRIPT = Path(sys.executable).parent / "agent-fleet"
GATES = 3


def _gates_running(out: Path) -> bool:
    found = 0
    for n in range(GATES):
        path = out / f"g{n}.jsonl"
        found += path.exists() and '"runner.gate_started"' in path.read_text()
    return found == GATES


@pytest.mark.parametrize("how", ["ctrl-c", "timeout"])
def test_stopping_gates_prints_no_traceback(
    how: str,
    terminal: Terminal,
    scripted_model: ScriptedModelServer,
    codex_env: CodexTestEnv,
    tmp_path: Path,
) -> None:
    scripted_model.responder = lambda request: Reply.text("done")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"g{n}", "prompt": "go"}) + "\n" for n in range(GATES)))
    out = tmp_path / "out"
    command = [
        str(SCRIPT), "batch", str(tasks), "--out", str(out), "-j", str(GATES), "--cwd", str(tmp_path),
        "--gate-cmd", "echo gating; sleep 30", *codex_env.codex_args(),
    ]  # fmt: skip
    if how == "timeout":
        command += ["--timeout", "6"]
    terminal.start(command, codex_env.full_env(), width=150, height=50)
    try:
        until("every gate running", lambda: _gates_running(out), limit=90)
        if how == "ctrl-c":
            time.sleep(0.3)  # the gates' commands are under way
            terminal.keys("C-c")
        status = terminal.wait_exit(60)
        screen = terminal.scrollback()
    finally:
        for (pid,) in _ledger(out, "SELECT pid FROM pids"):
            with pytest.raises(OSError):  # the batch ended its providers itself
                os.killpg(int(str(pid)), signal.SIGKILL)
    for noise in ("Traceback", "never retrieved", "CancelledError", "Exception"):
        assert noise not in screen, screen
    if how == "ctrl-c":
        assert status == 130 and "continue it with: agent-fleet batch --resume" in screen, screen
    else:
        assert status == 1 and screen.count("exceeded its timeout of 6s") >= GATES, screen
