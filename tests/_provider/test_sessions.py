from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

from agent_fleet._provider.sessions import HandleHost, Sessions
from agent_fleet.contract import Handle
from agent_fleet.events import Event, Result


class _Handle(Handle):
    """Only what Sessions reads: the session id."""

    def __init__(self, session_id: str) -> None:
        self.id = session_id

    @property
    def session_id(self) -> str:
        return self.id

    def events(self) -> AsyncIterator[Event]:
        raise NotImplementedError

    async def send(self, prompt: str) -> None:
        raise NotImplementedError

    async def inject(self, text: str) -> None:
        raise NotImplementedError

    async def stop(self) -> None:
        raise NotImplementedError

    async def wait(self) -> Result:
        raise NotImplementedError


def _sessions() -> Sessions[_Handle]:
    return Sessions(logging.getLogger("test"))


def test_add_forget_and_contains() -> None:
    sessions = _sessions()
    a, b = _Handle("a"), _Handle("b")
    sessions.add(a)
    sessions.add(b)
    assert "a" in sessions and sessions.handles() == [a, b]
    sessions.forget(a)
    sessions.forget(a)  # idempotent
    assert "a" not in sessions and sessions.handles() == [b]


def test_forget_leaves_a_newer_handle_of_the_same_session() -> None:
    sessions = _sessions()
    old, new = _Handle("s"), _Handle("s")
    sessions.add(old)
    sessions.add(new)  # resumed under the same id
    sessions.forget(old)
    assert sessions.handles() == [new]


def test_rekey_files_the_handle_under_its_new_id() -> None:
    sessions = _sessions()
    handle = _Handle("provisional")
    sessions.add(handle)
    sessions.rekey(handle, "reported")
    handle.id = "reported"  # the handle adopts the id after telling its host
    assert "provisional" not in sessions and "reported" in sessions
    sessions.forget(handle)
    assert sessions.handles() == []


def test_rekey_does_not_resurrect_a_forgotten_handle() -> None:
    sessions = _sessions()
    handle = _Handle("x")
    sessions.add(handle)
    sessions.forget(handle)
    sessions.rekey(handle, "y")
    assert sessions.handles() == []


async def test_background_tasks_are_cancelled_on_close() -> None:
    sessions = _sessions()
    host: HandleHost = sessions
    started = asyncio.Event()

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    task = host.spawn_task(forever(), "forever")
    await started.wait()
    await sessions.close()
    assert task.cancelled()


def test_no_handle_calls_its_providers_private_methods() -> None:
    # Handles reach their provider through the HandleHost they were given (or, for codex exec, the
    # turn launcher); the provider's own underscore names are its business.
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "agent_fleet"
    calls = [
        f"{path.relative_to(src)}:{number}"
        for path in sorted(src.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if re.search(r"\bself\._provider\._[a-z]", line)
    ]
    assert calls == []
