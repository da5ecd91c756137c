"""The terminal tests' own helper (``tests/runner/terminal.py``): it knows how a program in it ended.

tmux 3.3a as Debian builds it (with libutempter, as on CI) can lose the exit of a program whose
terminal closes just before it is reaped (see ``Terminal.exit_status``): the program stays a zombie,
the pane dead without an exit status, and ``wait_exit`` waited out its limit (on CI, the run and batch
terminal tests timed out after their program had printed its last line and exited)."""

from __future__ import annotations

import pytest

from .terminal import Terminal, terminal

pytestmark = pytest.mark.e2e  # programs in a real terminal (tmux)

__all__ = ["terminal"]  # the fixture

RUNS = 12
# The program lets go of its terminal a moment before it exits, as every program does when its process
# ends; here the moment is long enough (a shell's exit) for tmux to lose most exits, not one in many.
# (tmux then closes the terminal, whose hangup sends SIGHUP: ignored, the exit status is the program's.)
CLOSES_THEN_EXITS = "trap '' HUP; sleep 0.2; exec </dev/null >/dev/null 2>&1; exit {}"


def test_wait_exit_gets_the_status_of_every_program(terminal: Terminal) -> None:
    for n in range(1, RUNS + 1):
        terminal.start(["sh", "-c", CLOSES_THEN_EXITS.format(n)], {"PATH": "/usr/bin:/bin"})
        assert terminal.wait_exit(10) == n, f"run {n}: {terminal.scrollback()}"
        terminal.close()


def test_wait_exit_tells_a_death_by_signal(terminal: Terminal) -> None:
    terminal.start(["sh", "-c", "sleep 0.2; kill -TERM $$"], {"PATH": "/usr/bin:/bin"})
    assert terminal.wait_exit(10) == -15  # as subprocess says it: minus the signal's number
