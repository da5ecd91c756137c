"""``ChildProcess``: a child and everything it starts end together, however they detach."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from agent_fleet._process import ChildProcess, Tail

from .procs import sleepers


async def until(predicate: object, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _marker() -> str:
    return str(uuid.uuid4().int % 10**9)


def _detaching(marker: str) -> list[str]:
    """A shell that starts two sleeps that leave its group and session (one via a double fork)."""
    double_fork = f"(setsid sh -c 'sleep 61.{marker}2 & sleep 61.{marker}3' &)"
    script = f"setsid sleep 61.{marker}1 & {double_fork}; echo ready; wait"
    return ["sh", "-c", script]


def test_tail_keeps_the_last_bytes() -> None:
    tail = Tail(10)
    for chunk in (b"abc", b"defghij", b"klmnop", b"q"):
        tail.write(chunk)
    assert tail.bytes() == b"hijklmnopq" and tail.text() == "hijklmnopq"
    assert Tail(0).bytes() == b""


async def test_exit_code_stdout_and_stderr_tail() -> None:
    child = await ChildProcess.start(
        ["sh", "-c", "echo out; printf '%0100d' 0 >&2; echo last >&2; exit 3"], tail_bytes=20
    )
    assert child.stdout is not None
    assert await child.stdout.read() == b"out\n"
    assert await child.wait() == 3
    await child.stderr_done()
    assert child.stderr_tail() == "0" * 15 + "last\n"


async def test_a_missing_program_raises_like_create_subprocess_exec() -> None:
    with pytest.raises(FileNotFoundError):
        await ChildProcess.start(["/nonexistent/agent-fleet-test-binary"])


async def test_pid_is_the_child_and_a_signal_exit_is_reported_as_such() -> None:
    child = await ChildProcess.start(["sleep", "30"], stdin=None)
    assert Path(f"/proc/{child.pid}/cmdline").read_bytes().split(b"\0")[0] == b"sleep"  # noqa: ASYNC240
    os.kill(child.pid, signal.SIGKILL)
    assert await asyncio.wait_for(child.wait(), 5) == -signal.SIGKILL


async def test_sigkill_of_the_child_ends_what_left_its_session() -> None:
    marker = _marker()
    child = await ChildProcess.start(_detaching(marker), stdin=None)
    await until(lambda: len(sleepers(marker)) == 3)
    os.kill(child.pid, signal.SIGKILL)
    await asyncio.wait_for(child.wait(), 2)
    assert sleepers(marker) == []


async def test_stop_ends_the_tree_and_kills_what_ignores_sigterm_after_the_grace() -> None:
    marker = _marker()
    script = f"trap '' TERM; setsid sh -c \"trap '' TERM; sleep 61.{marker}1\" & sleep 61.{marker}2"
    child = await ChildProcess.start(["sh", "-c", script], stdin=None, grace=0.5)
    await until(lambda: len(sleepers(marker)) == 2)
    started = time.monotonic()
    await child.stop()
    assert sleepers(marker) == [] and time.monotonic() - started < 2.5


async def test_a_finished_child_leaves_nothing_running() -> None:
    marker = _marker()
    child = await ChildProcess.start(["sh", "-c", f"setsid sleep 61.{marker} & echo started"], stdin=None)
    await asyncio.wait_for(child.wait(), 3)
    assert sleepers(marker) == []


def test_the_tree_ends_when_our_process_dies() -> None:
    """The reaper watches a socket only this process holds: when it dies, the tree ends."""
    marker = _marker()
    program = f"""
import asyncio, os, sys
from agent_fleet._process import ChildProcess
async def main():
    child = await ChildProcess.start({_detaching(marker)!r}, stdin=None)
    assert child.stdout is not None
    await child.stdout.readline()
    print("up", flush=True)
    os._exit(0)  # no cleanup: as if killed
asyncio.run(main())
"""
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=30)
    assert done.stdout == "up\n", done.stderr
    deadline = time.monotonic() + 2
    while sleepers(marker) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sleepers(marker) == []
