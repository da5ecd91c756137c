"""Ctrl-C in the CLI: the first press stops cleanly, the second leaves within two seconds whatever happens."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

# A run that ignores cancellation entirely: only the forced exit can end it.
_STUBBORN = """
import asyncio, os, signal, sys
from pathlib import Path
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
    assert took < 10  # interpreter start-up included; the forced exit itself is 1.5 s after the press


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
