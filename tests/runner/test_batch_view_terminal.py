"""The batch's live view in a real terminal (tmux), at sizes where it used to overflow: the header's
counts stay on screen, no line is wider than the terminal or wraps, nothing scrolls off, running and
failed tasks are pinned, the next queued tasks shown where there is room.

``agent-fleet batch`` runs against the scripted model inside a detached tmux session of a fixed size
(its own server: ``tmux -L``); ``capture-pane -J`` reads the screen with wrapped lines joined, so a
line the terminal had to wrap shows up wider than the pane. tmux is required (``.ci/run`` installs
it): its absence fails the test rather than skipping it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from rich.cells import cell_len

from agent_fleet.cli._fleet_view import QUEUED_SHOWN
from agent_fleet.runner._admit import shared_tree_warning
from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer

from .scripted import ScriptedAgent, run

pytestmark = pytest.mark.e2e

SCRIPT = Path(sys.executable).parent / "agent-fleet"
RUNNING, FAILED, TOTAL = 4, 3, 40


@pytest.fixture
def tmux() -> Iterator[Callable[..., str]]:
    """``tmux(*args)``: the output of a tmux command on a server of this test's own."""
    binary = shutil.which("tmux")
    if binary is None:
        pytest.fail("tmux is needed for the live view's terminal test (.ci/run installs it)")
    socket = f"agent-fleet-test-{uuid.uuid4().hex[:8]}"

    def call(*args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            [binary, "-L", socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
        )
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr}")
        return done.stdout

    try:
        yield call
    finally:
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            call("kill-server")


def _ledger(out: Path, sql: str) -> list[tuple[object, ...]]:
    if not (out / "batch.db").exists():
        return []
    db = sqlite3.connect(f"file:{out / 'batch.db'}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def _until(what: str, check: Callable[[], bool], limit: float = 60) -> None:
    # Polled: what is awaited is a terminal's screen and another process's ledger.
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


def _tasks(path: Path) -> Path:
    lines = [{"id": f"bad-{n}", "prompt": f"[task:bad-{n}] go"} for n in range(FAILED)]
    lines += [{"id": f"run-{n}", "prompt": f"[task:run-{n}] go"} for n in range(TOTAL - FAILED)]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.mark.parametrize(("width", "height"), [(60, 12), (120, 40), (40, 10)])
def test_the_live_view_fits_a_real_terminal(
    width: int,
    height: int,
    tmux: Callable[..., str],
    scripted_model: ScriptedModelServer,
    codex_env: CodexTestEnv,
    tmp_path: Path,
) -> None:
    scripted_model.responder = ScriptedAgent(
        {
            **{f"bad-{n}": [[Reply.http_error(400, "refused")]] for n in range(FAILED)},
            **{f"run-{n}": [[run("sleep 60")]] for n in range(TOTAL - FAILED)},
        }
    )
    out = tmp_path / "out"
    command = [
        str(SCRIPT), "batch", str(_tasks(tmp_path / "tasks.jsonl")), "--out", str(out),
        "-j", str(RUNNING), "--cwd", str(tmp_path), *codex_env.codex_args(),
    ]  # fmt: skip
    env = {**codex_env.full_env(), "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    env.pop("COLUMNS", None)
    env.pop("LINES", None)
    tmux("new-session", "-d", "-s", "view", "-x", str(width), "-y", str(height), *command, env=env)
    pane_pid = int(tmux("display-message", "-p", "-t", "view", "#{pane_pid}").strip())
    try:
        _until(
            "the failed tasks finished and the others running",
            lambda: (
                len(_ledger(out, "SELECT id FROM tasks WHERE state = 'finished'")) == FAILED
                and len(
                    _ledger(out, "SELECT id FROM tasks WHERE state = 'running' AND session_id IS NOT NULL")
                )
                == RUNNING
            ),
        )

        def screen() -> list[str]:
            return tmux("capture-pane", "-p", "-J", "-t", "view").rstrip("\n").split("\n")

        def settled() -> bool:
            text = " ".join(screen())
            return f"running {RUNNING}" in text and f"failed {FAILED}" in text

        _until("the view to show the fleet", settled, limit=30)
        lines = screen()
        text = " ".join(lines)
        # the header, in full
        for part in (
            f"running {RUNNING}",
            f"queued {TOTAL - RUNNING - FAILED}",
            "succeeded 0",
            f"failed {FAILED}",
            "tokens",
            "elapsed",
        ):
            assert part in text, (part, lines)
        # What the command printed before the view (where the record goes; the warning that the tasks
        # share a tree) may show above it; the header is the view's first line: nothing scrolled off.
        header = next(i for i, line in enumerate(lines) if line.startswith("running "))
        start = " ".join(
            ["record:", str(out.resolve()), "warning:", shared_tree_warning(tmp_path.resolve(), TOTAL)]
        )
        assert all(line.strip() in start for line in lines[:header]), lines
        assert len(lines) <= height
        view = lines[header:]
        assert all(cell_len(line) <= width for line in view), "a line wrapped: " + max(view, key=cell_len)
        assert not re.search(r"\d…", text), "a number was cut"
        # running and failed tasks pinned, each row on one line with its status; then, with room, the
        # next queued ones
        rows = {line.split()[0]: line for line in lines if re.match(r"(run|bad)-\d+ ", line)}
        assert sum(1 for line in rows.values() if " running " in line) == RUNNING, lines
        failed_shown = sum(1 for r in rows if r.startswith("bad-"))
        if failed_shown < FAILED:  # a short terminal: the last line says how many more
            assert f"… {FAILED - failed_shown} more failed" in lines[-1], lines
        order = list(rows)
        assert all(" running " in rows[r] for r in order[:RUNNING]), "running first"
        failures = order[RUNNING : RUNNING + failed_shown]
        assert all(r.startswith("bad-") for r in failures), "then failures"
        assert all(" failed " in rows[r] for r in failures)
        queued = order[RUNNING + failed_shown :]
        assert all(r.startswith("run-") and " queued " in rows[r] for r in queued), "then queued ones"
        if height >= 40:
            assert len(queued) == QUEUED_SHOWN, lines
    finally:
        with contextlib.suppress(AssertionError):
            tmux("send-keys", "-t", "view", "C-c")  # a clean stop: the providers go with the batch
        _until("the batch to stop", lambda: not _alive(pane_pid), limit=30)
        for (pid,) in _ledger(out, "SELECT pid FROM pids"):
            with contextlib.suppress(OSError):
                os.killpg(int(str(pid)), signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError):
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        return state != "Z"
    return True
