"""``--default-approval ask`` at a terminal (issue 33): the person's key is the decision, a key typed
before the question answers nothing, only the declines a person may overturn are asked, and where
nobody can answer ``ask`` is refused before any work."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import os
import pty
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from agent_fleet.claude import ClaudeOptions
from agent_fleet.cli import cli
from agent_fleet.cli._ask import TerminalAsker, ask_problem, with_asker
from agent_fleet.cli._view import Progress
from agent_fleet.codex import CodexOptions
from agent_fleet.errors import UsageError
from agent_fleet.policy import ApprovalRequest, Decision

ASK = Decision(action="decline", rule="default-ask", reason="command: nothing decided it")
REQUEST = ApprovalRequest(kind="command", command=["bash", "-lc", "touch x"], cwd="/repo")


@pytest.fixture
def tty() -> Iterator[tuple[int, io.TextIOWrapper]]:
    """(the terminal's master end, its slave end opened as stdin)."""
    master, slave = pty.openpty()
    stdin = os.fdopen(slave, "r")
    try:
        yield master, stdin
    finally:
        stdin.close()
        os.close(master)


def _asker(stdin: io.TextIOWrapper) -> tuple[TerminalAsker, Progress, io.StringIO]:
    out = io.StringIO()
    progress = Progress(Console(file=out, width=100), json_output=False, batch=False)
    return TerminalAsker(progress, stdin), progress, out


async def _answer(asker: TerminalAsker, progress: Progress, master: int, keys: bytes) -> Decision:
    shown = asyncio.Event()
    drawn = progress.refresh

    def refresh() -> None:  # the question is drawn: the terminal reads from now on
        drawn()
        if progress.question is not None:
            shown.set()

    progress.refresh = refresh  # type: ignore[method-assign]
    asking = asyncio.create_task(asker.handler(REQUEST, ASK))
    await asyncio.wait_for(shown.wait(), 10)
    await asyncio.sleep(0)  # the reader is added right after the question is drawn
    os.write(master, keys)
    return await asyncio.wait_for(asking, 10)


@pytest.mark.parametrize(
    ("keys", "action", "said"),
    [
        (b"y", "allow_once", "you allowed once: $ touch x"),
        (b"S", "allow_for_session", "you allowed for this session: $ touch x"),
        (b"n", "decline", "you declined: $ touch x"),
        (b"xq\x1by", "allow_once", "you allowed once"),  # other keys are ignored
    ],
)
async def test_the_persons_key_is_the_decision(
    tty: tuple[int, io.TextIOWrapper], keys: bytes, action: str, said: str
) -> None:
    master, stdin = tty
    asker, progress, out = _asker(stdin)
    decision = await _answer(asker, progress, master, keys)
    assert decision.action == action
    if action == "decline":
        assert decision.rule == "terminal-decline"
    assert progress.question is None
    text = out.getvalue()
    assert "approve? $ touch x" in text and "why asked: no rule decides it" in text and said in text


async def test_a_key_typed_before_the_question_answers_nothing(tty: tuple[int, io.TextIOWrapper]) -> None:
    master, stdin = tty
    asker, progress, _ = _asker(stdin)
    os.write(master, b"y")  # typed ahead, before anything asked
    await asyncio.sleep(0.05)
    decision = await _answer(asker, progress, master, b"n")
    assert decision.action == "decline"


async def test_the_terminal_is_restored_after_the_question(tty: tuple[int, io.TextIOWrapper]) -> None:
    import termios

    master, stdin = tty
    before = termios.tcgetattr(stdin.fileno())
    asker, progress, _ = _asker(stdin)
    await _answer(asker, progress, master, b"y")
    assert termios.tcgetattr(stdin.fileno()) == before


async def test_only_declines_a_person_may_overturn_are_asked(tty: tuple[int, io.TextIOWrapper]) -> None:
    _, stdin = tty
    asker, progress, _ = _asker(stdin)
    accepted = Decision(action="allow_for_session", reason="allowed")
    final = Decision(action="decline", rule="git-reset-hard", reason="discards work")
    assert await asker.handler(REQUEST, accepted) is accepted
    assert await asker.handler(REQUEST, final) is final
    assert asker.asked == 0 and progress.question is None


def test_ask_needs_a_terminal_and_a_provider_that_asks() -> None:
    class NotATty(io.StringIO):
        def isatty(self) -> bool:
            return False

    assert ask_problem(batch=True, stdin=NotATty(), terminal=True) is not None
    assert "needs a person at a terminal" in str(ask_problem(batch=False, stdin=NotATty(), terminal=True))
    progress = Progress(Console(file=io.StringIO()), json_output=False, batch=False)
    asker = TerminalAsker(progress, io.StringIO())
    assert with_asker(CodexOptions(), asker, "codex").approval_handler == asker.handler
    assert with_asker(ClaudeOptions(), asker, "claude").approval_handler == asker.handler

    @dataclasses.dataclass
    class NoHandler:  # a provider whose options take no approval_handler
        env: dict[str, str] = dataclasses.field(default_factory=dict)

    with pytest.raises(UsageError, match="the acme provider cannot ask a person"):
        with_asker(NoHandler(), asker, "acme")


@pytest.mark.parametrize(
    "args",
    [
        ["run", "x", "--default-approval", "ask"],
        ["batch", "tasks.jsonl", "--default-approval", "ask"],
    ],
)
def test_ask_where_nobody_can_answer_exits_2_saying_what_to_use(
    args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.jsonl").write_text('{"id": "a", "prompt": "p"}\n')
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "--server URL" in result.stderr and "--default-approval deny" in result.stderr
    assert "Traceback" not in result.output
