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

from .procs import alive, sleepers


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
sys.path.insert(0, {str(Path(__file__).parent)!r})
from procs import sleepers
from agent_fleet._process import ChildProcess
async def main():
    child = await ChildProcess.start({_detaching(marker)!r}, stdin=None)
    assert child.stdout is not None
    await child.stdout.readline()
    while len(sleepers({marker!r})) < 3:  # "ready" comes before the sleeps are exec'd
        await asyncio.sleep(0.01)
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


# -- one long-lived reaper per process (issue 29) -----------------------------------------------------------


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[1])


def _reaper_of(child: ChildProcess) -> tuple[int, int]:
    """The child's supervisor and the reaper that forked it, read from /proc."""
    supervisor = _parent(child.pid)
    return supervisor, _parent(supervisor)


async def test_every_child_is_forked_from_one_long_lived_reaper() -> None:
    children = [await ChildProcess.start(["sleep", "30"], stdin=None) for _ in range(3)]
    try:
        found = [_reaper_of(child) for child in children]
        reapers = {reaper for _, reaper in found}
        assert len(reapers) == 1, found
        (reaper,) = reapers
        assert _parent(reaper) == os.getpid()
        assert b"_reaper.py" in Path(f"/proc/{reaper}/cmdline").read_bytes()  # noqa: ASYNC240
        assert len({supervisor for supervisor, _ in found}) == 3, "one supervisor per child"
    finally:
        for child in children:
            await child.stop(grace=0)
    later = await ChildProcess.start(["sleep", "30"], stdin=None)
    try:
        assert _reaper_of(later)[1] == reaper, "the same reaper serves the next child"
    finally:
        await later.stop(grace=0)


async def test_a_killed_supervisor_leaves_nothing_behind() -> None:
    """The reaper is a subreaper too: what a dead supervisor's tree left comes to it and is killed."""
    marker = _marker()
    child = await ChildProcess.start(_detaching(marker), stdin=None)
    await until(lambda: len(sleepers(marker)) == 3)
    supervisor, _ = _reaper_of(child)
    os.kill(supervisor, signal.SIGKILL)
    assert await asyncio.wait_for(child.wait(), 5) == -signal.SIGKILL
    await until(lambda: sleepers(marker) == [], within=5)


async def test_a_dead_reaper_is_replaced_and_its_children_still_end_with_us() -> None:
    marker = _marker()
    first = await ChildProcess.start(_detaching(marker), stdin=None)
    await until(lambda: len(sleepers(marker)) == 3)
    _, reaper = _reaper_of(first)
    os.kill(reaper, signal.SIGKILL)
    await until(lambda: not alive(reaper))
    second = await ChildProcess.start(["sleep", "30"], stdin=None)
    try:
        assert _reaper_of(second)[1] not in (reaper, os.getpid())
        # the first child's supervisor outlived its reaper: it still answers on its lifeline
        await first.stop(grace=0.5)
        assert sleepers(marker) == []
    finally:
        await second.stop(grace=0)


async def test_a_bad_working_directory_raises_like_create_subprocess_exec(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await ChildProcess.start(["true"], cwd=tmp_path / "missing")
    # the environment and directory of the moment, as a plain spawn would give them
    child = await ChildProcess.start(
        ["sh", "-c", "pwd; echo $AF_PROBE"], env={"AF_PROBE": "yes"}, cwd=tmp_path
    )
    assert child.stdout is not None
    assert (await child.stdout.read()).decode().split() == [str(tmp_path), "yes"]
    assert await child.wait() == 0
