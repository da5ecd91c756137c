"""A real terminal for the CLI's tests: ``agent-fleet`` in a detached tmux session of a fixed size.

Each test gets a tmux server of its own (``tmux -L``); ``screen()`` reads what is on the screen with
wrapped lines joined (``capture-pane -J``), ``scrollback()`` everything the program printed. The pane
stays after the program exits (``remain-on-exit``), so the last screen can be read and the exit
status known. tmux is required (``.ci/run`` installs it): its absence fails the test, never skips it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence

import pytest

__all__ = ["Terminal", "terminal", "until"]


def until(what: str, check: Callable[[], bool], limit: float = 60) -> None:
    """Wait for ``check``; polled: what is awaited is another process's screen or files."""
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.1)


class Terminal:
    def __init__(self, binary: str) -> None:
        self._binary = binary
        self._socket = f"agent-fleet-test-{uuid.uuid4().hex[:8]}"
        self.pid: int | None = None

    def tmux(self, *args: str, env: Mapping[str, str] | None = None) -> str:
        done = subprocess.run(
            [self._binary, "-L", self._socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=dict(env) if env is not None else None,
            timeout=30,
        )
        if done.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {done.stderr}")
        return done.stdout

    def start(
        self, command: Sequence[str], env: Mapping[str, str], width: int = 100, height: int = 30
    ) -> None:
        """Run ``command`` in a terminal ``width`` x ``height`` (TERM xterm-256color, no size overrides)."""
        # A server of its own each time: one just killed may still answer on its old socket.
        self._socket = f"agent-fleet-test-{uuid.uuid4().hex[:8]}"
        env = {**env, "TERM": "xterm-256color"}
        for name in ("NO_COLOR", "COLUMNS", "LINES"):
            env.pop(name, None)
        size = ("-x", str(width), "-y", str(height))
        # One tmux command line: the pane stays once the program ends, however quickly it ends.
        self.tmux(
            "new-session", "-d", "-s", "view", *size, *command, ";",
            "set-option", "-t", "view", "remain-on-exit", "on",
            env=env,
        )  # fmt: skip
        self.pid = int(self.tmux("display-message", "-p", "-t", "view", "#{pane_pid}").strip())

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-J", "-t", "view").rstrip("\n").split("\n")

    def scrollback(self) -> str:
        """Everything printed, the history and the screen, wrapped lines joined."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "view")

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "view", *keys)

    def exit_status(self) -> int | None:
        """The program's exit status once it ended (minus the signal's number if a signal ended it, as
        ``subprocess`` says it), else None.

        tmux 3.3a built with libutempter (Debian's, so CI's) can lose a program's exit: when the
        terminal closes before the program is reaped, tmux marks the pane dead and runs utempter's
        helper, which sets SIGCHLD to SIG_DFL until the helper ends; a program that exits meanwhile is
        never reaped, its status never known (tmux/tmux#311, #4559). A dead pane with neither status nor
        signal is that case: a SIGCHLD to this terminal's own tmux server makes it reap the program (the
        same nudge tmux gives itself after utempter when a pane starts), and a later call sees it."""
        dead, status, signum, server = (
            self.tmux(
                "display-message", "-p", "-t", "view",
                "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}:#{pid}",
            )
            .strip()
            .split(":")
        )  # fmt: skip
        if dead != "1":
            return None
        if status or signum:
            return int(status) if status else -int(signum)
        os.kill(int(server), signal.SIGCHLD)
        return None

    def wait_exit(self, limit: float = 60) -> int:
        deadline = time.monotonic() + limit
        while self.exit_status() is None:
            if time.monotonic() > deadline:
                pytest.fail("timed out waiting for the program to exit; its screen:\n" + self.scrollback())
            time.sleep(0.1)
        status = self.exit_status()
        assert status is not None
        return status

    def close(self) -> None:
        """Stop the program (Ctrl-C, then SIGKILL to its group) and the tmux server, whatever fails;
        ``start`` may then run another program (a second ``close`` does nothing more)."""
        try:
            if self.pid is not None and self.exit_status() is None:
                with contextlib.suppress(AssertionError):
                    self.keys("C-c")  # a clean stop: the providers go with the program
                with contextlib.suppress(BaseException):
                    self.wait_exit(30)
            if self.pid is not None and self.exit_status() is None:
                with contextlib.suppress(OSError):
                    os.killpg(self.pid, signal.SIGKILL)
        finally:
            with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
                self.tmux("kill-server")
            self.pid = None


@pytest.fixture
def terminal() -> Iterator[Terminal]:
    binary = shutil.which("tmux")
    if binary is None:
        pytest.fail("tmux is needed for the CLI's terminal tests (.ci/run installs it)")
    term = Terminal(binary)
    try:
        yield term
    finally:
        term.close()
