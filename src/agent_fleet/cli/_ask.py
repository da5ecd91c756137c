"""``run --default-approval ask`` on a terminal: the person at it decides what the policy left open.

``TerminalAsker.handler`` is the provider's ``approval_handler``. It sees what the policy accepted (and
returns it unchanged) and the declines a person may still turn into an accept
(``agent_fleet._provider.refine.REFINABLE_DECLINES``: ``default-ask``, an escalation or a strict-profile
command not proven harmless); every other decline is final and never reaches it. One question at a
time: it is drawn in the live view (or printed, without one) and answered with a single key --
``y`` allow once, ``s`` allow for the session, ``n`` decline -- read from the terminal in cbreak mode
(no echo, no Enter; Ctrl-C still stops the run). Keys typed before the question appeared are dropped,
so a stray key never answers it. The answer is printed above the view, so the scrollback says who
decided what.

Where nobody can answer (no terminal; ``batch`` without ``--server``) the CLI refuses ``ask`` before any
work (``ask_problem``), rather than declining everything silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sys
import termios
import tty
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any

from rich.text import Text

from agent_fleet._provider.refine import REFINABLE_DECLINES
from agent_fleet.cli._describe import command_text
from agent_fleet.cli._run_view import ANSWER_KEYS, Question
from agent_fleet.errors import UsageError
from agent_fleet.policy import ApprovalRequest, Decision

if TYPE_CHECKING:
    from agent_fleet.cli._view import Progress

__all__ = ["NOBODY_TO_ASK", "TerminalAsker", "ask_problem", "with_asker"]

#: What to use instead of ``ask`` where nobody can answer.
NOBODY_TO_ASK = (
    "use --server URL (an `agent-fleet serve` daemon asks on its dashboard), or decide in advance: "
    "--default-approval deny with --allow REGEX for what may run (or allow, with --deny REGEX)"
)
_DECLINE_RULE = "terminal-decline"


def ask_problem(*, batch: bool, stdin: IO[str], terminal: bool) -> str | None:
    """Why ``--default-approval ask`` (without ``--server``) cannot work here, or None when it can."""
    if batch:
        return f"--default-approval ask: a batch without --server has nobody to ask; {NOBODY_TO_ASK}"
    if not (terminal and stdin.isatty()):
        return (
            "--default-approval ask needs a person at a terminal (stdin and the output a TTY) to answer; "
            + NOBODY_TO_ASK
        )
    return None


def with_asker(options: Any, asker: TerminalAsker, provider: str) -> Any:
    """``options`` with ``asker`` as its ``approval_handler``. Raises ``UsageError`` for a provider
    whose options take none (it could not ask)."""
    if "approval_handler" not in {f.name for f in dataclasses.fields(options)}:
        raise UsageError(
            f"--default-approval ask: the {provider} provider cannot ask a person; {NOBODY_TO_ASK}"
        )
    return dataclasses.replace(options, approval_handler=asker.handler)


def _what(request: ApprovalRequest) -> str:
    match request.kind:
        case "command":
            return command_text(request.command)
        case "network":
            return f"{request.host or 'any host'}" + (f":{request.port}" if request.port else "")
        case "tool":
            return str(request.tool)
        case "permissions":
            parts = [*map(str, request.paths), *(["network access"] if request.network else [])]
            return ", ".join(parts) or "wider permissions"
    return ", ".join(map(str, request.paths)) or request.kind


class TerminalAsker:
    """Asks the person at the terminal (see the module docstring). ``stdin`` must be a TTY."""

    def __init__(self, progress: Progress, stdin: IO[str] | None = None) -> None:
        self._progress = progress
        self._stdin = stdin
        self._lock: asyncio.Lock | None = None
        self.asked = 0

    async def handler(self, request: ApprovalRequest, decision: Decision) -> Decision:
        if decision.action != "decline" or decision.rule not in REFINABLE_DECLINES:
            return decision  # accepted, or a decline no person may overturn
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one question at a time
            redact = self._progress.redactor.text
            question = Question(
                kind=request.kind,
                what=redact(_what(request)),
                cwd=request.cwd if isinstance(request.cwd, str) else None,
                why=redact(
                    "no rule decides it (--default-approval ask)"
                    if decision.rule == "default-ask"
                    else f"{decision.rule}: {decision.reason}"
                ),
            )
            self.asked += 1

            def show() -> None:  # once the terminal reads: a key pressed as it appears counts
                self._progress.question = question
                if not self._progress.live_mode:
                    self._print(question)
                self._progress.refresh()

            try:
                key = await self._read_key(show)
            finally:
                self._progress.question = None
                self._progress.refresh()
        answer = next((a for k, _, a in ANSWER_KEYS if k == key), None)
        shown = ("$ " if request.kind == "command" else f"{request.kind}: ") + question.what.splitlines()[0]
        if answer == "allow_once":
            self._progress.say(Text(f"you allowed once: {shown}", style="green"))
            return Decision(action="allow_once", reason="allowed once by the person at the terminal")
        if answer == "allow_for_session":
            self._progress.say(Text(f"you allowed for this session: {shown}", style="green"))
            return Decision(action="allow_for_session", reason="allowed for the session at the terminal")
        self._progress.say(Text(f"you declined: {shown}", style="yellow"))
        return Decision(action="decline", rule=_DECLINE_RULE, reason="declined by the person at the terminal")

    def _print(self, question: Question) -> None:
        say = self._progress.say
        say(
            Text("approve? " + ("$ " if question.kind == "command" else f"{question.kind}: ") + question.what)
        )
        if question.cwd:
            say(f"  in {question.cwd}")
        say(f"  why asked: {question.why}")
        keys = "   ".join(f"[{k}] {label}" for k, label, _ in ANSWER_KEYS)
        say(f"  {keys}   [n] decline")

    async def _read_key(self, show: Callable[[], None]) -> str:
        """The first of ``y``/``s``/``n`` typed once the terminal is read, which is before ``show()``
        puts the question up (end of input: ``n``)."""
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[str] = loop.create_future()
        fd = (self._stdin or sys.stdin).fileno()
        saved = termios.tcgetattr(fd)

        def readable() -> None:
            try:
                data = os.read(fd, 64)
            except OSError:
                data = b""
            if answered.done():
                return
            if not data:
                answered.set_result("n")
                return
            for char in data.decode(errors="ignore").lower():
                if char in "ysn":
                    answered.set_result(char)
                    return

        try:
            tty.setcbreak(fd)  # a key at a time, no echo; Ctrl-C still sends SIGINT
            termios.tcflush(fd, termios.TCIFLUSH)  # what was typed before the question answers nothing
            loop.add_reader(fd, readable)
            show()
            return await answered
        finally:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(fd)
            with contextlib.suppress(termios.error):
                termios.tcsetattr(fd, termios.TCSADRAIN, saved)
