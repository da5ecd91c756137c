"""Ctrl-C in the CLI: the first press stops cleanly, the second leaves within two seconds whatever happens."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e  # each test runs the CLI's exit path in a process of its own and signals it

# A run that ignores cancellation entirely: only the forced exit can end it.
_STUBBORN = """
import asyncio, os, signal, sys
from pathlib import Path

import pytest
from rich.console import Console
from agent_fleet.cli._exits import Interrupts, run_async

marker = Path(sys.argv[1])

async def stubborn(stop: asyncio.Event) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    await stop.wait()
    print("first press: stop set", flush=True)
    os.kill(os.getpid(), signal.SIGINT)
    while True:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            print("cancelled: ignoring it", flush=True)

run_async(stubborn, Console(stderr=True), Interrupts(on_force=lambda: marker.write_text("recorded")))
"""


def test_a_run_that_ignores_the_second_ctrl_c_is_left_by_force_within_two_seconds(tmp_path: Path) -> None:
    marker = tmp_path / "forced"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", _STUBBORN, str(marker)], capture_output=True, text=True, timeout=30
    )
    took = time.monotonic() - started
    assert proc.returncode == 130, proc.stderr
    assert "first press: stop set" in proc.stdout and "cancelled: ignoring it" in proc.stdout
    assert marker.read_text() == "recorded", "on_force ran before the process left"
    assert "left by force" in proc.stderr
    assert took < 10  # interpreter start-up included; the forced exit itself is 1 s after the press


_POLITE = """
import asyncio, os, signal, sys
import click
from rich.console import Console
from agent_fleet.cli._exits import run_async

async def polite(stop: asyncio.Event) -> None:
    os.kill(os.getpid(), signal.SIGINT)
    os.kill(os.getpid(), signal.SIGINT)
    await asyncio.sleep(60)

try:
    run_async(polite, Console(stderr=True))
except click.exceptions.Exit as exc:  # what click's main turns into the exit status
    sys.exit(exc.exit_code)
"""


def test_a_second_ctrl_c_that_cancels_cleanly_exits_130_at_once() -> None:
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _POLITE], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 130 and "error: interrupted" in proc.stderr
    assert "left by force" not in proc.stderr
    assert time.monotonic() - started < 10


# -- SIGTERM and SIGHUP stop like Ctrl-C (issue 29) --------------------------------------------------------

_SIGNALLED = """
import asyncio, os, signal, sys
import click
from rich.console import Console
from agent_fleet.cli._exits import Interrupts, run_async

first, second = (getattr(signal, name) if name != "-" else None for name in sys.argv[1:3])
seen = Interrupts(on_force=lambda: print("forced", flush=True))

async def stopped_by(stop: asyncio.Event) -> str:
    os.kill(os.getpid(), first)
    await stop.wait()
    print("stop set", flush=True)
    if second is None:
        return "clean"
    os.kill(os.getpid(), second)
    while True:  # only the forced exit ends this run
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            pass

try:
    print(run_async(stopped_by, Console(stderr=True), seen), flush=True)
    os.kill(os.getpid(), signal.SIGINT)  # a late Ctrl-C, as the command prints its summary
    os.kill(os.getpid(), signal.SIGTERM)
    sys.exit(seen.exit_code)
except click.exceptions.Exit as exc:
    sys.exit(exc.exit_code)
"""


@pytest.mark.parametrize(
    ("first", "second", "code"),
    [
        ("SIGTERM", "-", 143),
        ("SIGHUP", "-", 129),
        ("SIGINT", "-", 130),
        ("SIGTERM", "SIGTERM", 143),
        ("SIGTERM", "SIGINT", 143),
    ],
)
def test_a_stop_signal_stops_cleanly_a_second_forces_and_the_exit_code_says_which(
    first: str, second: str, code: int
) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SIGNALLED, first, second], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "stop set" in proc.stdout
    if second == "-":
        assert "clean" in proc.stdout and "forced" not in proc.stdout
        assert "Traceback" not in proc.stderr, "a late signal is ignored, never a KeyboardInterrupt"
    else:
        assert "forced" in proc.stdout and "left by force" in proc.stderr


# -- leaving without the interpreter's teardown ------------------------------------------------------------

_LEAVE = """
import atexit, concurrent.futures, sys, threading, time
from pathlib import Path
from agent_fleet.cli._exits import leave

out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))

def late() -> None:
    time.sleep(0.3)
    (out / "thread").write_text("finished")

threading.Thread(target=late).start()  # non-daemon: the exit waits for it, as Python's own does
pool = concurrent.futures.ThreadPoolExecutor(1)
pool.submit(lambda: (time.sleep(0.3), (out / "pool").write_text("finished")))  # never shut down
sys.stdout.write("buffered, no newline")

class Teardown:
    def __del__(self) -> None:  # runs in the interpreter's teardown, which leave() skips
        (out / "teardown").write_text("ran")

keep = Teardown()
leave(sys.argv[2] if sys.argv[2] == "message" else int(sys.argv[2]))
"""


@pytest.mark.parametrize(("code", "status"), [("0", 0), ("3", 3), ("130", 130), ("message", 1)])
def test_leave_exits_as_sys_exit_would_without_the_teardown(tmp_path: Path, code: str, status: int) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # what leave() flushes
    done = subprocess.run(
        [sys.executable, "-c", _LEAVE, str(tmp_path), code],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == status, done.stderr
    assert done.stdout == "buffered, no newline"  # flushed
    assert (done.stderr == "message\n") == (code == "message")
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "finished"  # joined
    assert (tmp_path / "pool").read_text() == "finished"  # its work done, as at a normal exit
    assert not (tmp_path / "teardown").exists()  # the teardown was skipped


def test_leave_with_stdout_closed_says_so_in_its_status() -> None:
    script = "import sys\nfrom agent_fleet.cli._exits import leave\nsys.stdout.write('x' * 100)\nleave(0)\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # the write stays buffered
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    assert proc.stdout is not None
    proc.stdout.close()  # `| head` that has read enough
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 120, err  # as Python's own exit, and no traceback
    assert b"Traceback" not in err
