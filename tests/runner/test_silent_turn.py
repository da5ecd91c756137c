"""A turn the model went silent in is interrupted, not the session (issue 32): the retry continues on
the same handle; only a provider that cannot interrupt a turn has its session stopped and resumed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from agent_fleet.contract import Handle, Spec
from agent_fleet.errors import Unsupported
from agent_fleet.events import Error, Event, Result
from agent_fleet.runner import Task
from agent_fleet.runner._outage import end_turn
from agent_fleet.runner._task_retry import TaskRetries


class _Handle(Handle):
    """Records what the runner does to it."""

    def __init__(self, *, can_interrupt: bool) -> None:
        self.can_interrupt = can_interrupt
        self.calls: list[str] = []

    @property
    def session_id(self) -> str:
        return "s-1"

    async def events(self) -> AsyncIterator[Event]:
        yield Result(text="", session_id="s-1")

    async def send(self, prompt: str, **settings: Any) -> None:
        self.calls.append(f"send:{prompt}")

    async def inject(self, text: str) -> None:
        raise Unsupported("no")

    async def stop(self) -> None:
        self.calls.append("stop")

    async def interrupt(self) -> None:
        self.calls.append("interrupt")
        if not self.can_interrupt:
            raise Unsupported("this provider can only end the whole session")

    async def wait(self) -> Result:
        return Result(text="", session_id="s-1")


class _Provider:
    def __init__(self) -> None:
        self.resumed: list[tuple[str, str]] = []
        self.handle = _Handle(can_interrupt=True)

    async def resume(self, session_id: str, spec: Spec) -> Handle:
        self.resumed.append((session_id, spec.prompt))
        return self.handle


class _Run(TaskRetries):
    def __init__(self, tmp: Path) -> None:
        self.task = Task(spec=Spec(prompt="p", cwd=tmp))
        self.provider = None
        self.session_id = "s-1"
        self.status = "running"
        self.outage = None
        self.stopped_for_outage = False
        self._ending: set[asyncio.Task[bool]] = set()
        self.notes: list[str] = []

    def note(self, subtype: str, /, **data: Any) -> None:
        self.notes.append(subtype)


SILENT = Error(code="connection_failed", message="no progress from the model", retryable=True)


async def test_a_silent_turn_is_interrupted_and_retried_on_the_same_handle(tmp_path: Path) -> None:
    run, provider, handle = _Run(tmp_path), _Provider(), _Handle(can_interrupt=True)
    run._end_silent_turn(handle)
    retried = await run._retry(provider, handle, SILENT, "again", 1, 0.0, None)  # type: ignore[arg-type]
    assert retried is handle and handle.calls == ["interrupt", "send:again"]
    assert provider.resumed == [] and run.notes == ["retry"]


async def test_without_interrupt_the_session_is_stopped_and_resumed(tmp_path: Path) -> None:
    run, provider, handle = _Run(tmp_path), _Provider(), _Handle(can_interrupt=False)
    run._end_silent_turn(handle)
    retried = await run._retry(provider, handle, SILENT, "again", 1, 0.0, None)  # type: ignore[arg-type]
    assert handle.calls[:2] == ["interrupt", "stop"] and "send:again" not in handle.calls
    assert retried is provider.handle and provider.resumed == [("s-1", "again")]
    assert not run.stopped_for_outage  # the next silent turn is judged afresh


async def test_end_turn_says_whether_the_session_was_stopped() -> None:
    assert await end_turn(_Handle(can_interrupt=True)) is False
    assert await end_turn(_Handle(can_interrupt=False)) is True
