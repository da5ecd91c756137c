"""A provider double for hermetic daemon tests: every turn answers at once (no agent binary runs)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from agent_fleet.contract import Capabilities, Handle, Provider, Spec
from agent_fleet.errors import UsageError
from agent_fleet.events import Error, Event, Result, TextDelta

_IDS = itertools.count(1)


class FakeHandle(Handle):
    def __init__(self, session_id: str, prompt: str) -> None:
        self._id = session_id
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._running = False
        self._turn(prompt)

    def _turn(self, prompt: str) -> None:
        self._running = True
        self._queue.put_nowait(TextDelta(text=f"re: {prompt[:20]}"))
        self._queue.put_nowait(Result(text="done", session_id=self._id))

    @property
    def session_id(self) -> str:
        return self._id

    async def events(self) -> AsyncIterator[Event]:
        while True:
            event = await self._queue.get()
            yield event
            if isinstance(event, Result | Error):
                self._running = False
                return

    async def send(
        self,
        prompt: str,
        *,
        images: Sequence[str | Path] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> None:
        if self._running:
            raise UsageError("a turn is running")
        self._turn(prompt)

    async def inject(self, text: str) -> None:
        if not self._running:
            raise UsageError("no turn is running")

    async def stop(self) -> None:
        if self._running:
            self._queue.put_nowait(Error(code="cancelled", message="stopped"))

    async def interrupt(self) -> None:
        await self.stop()

    async def wait(self) -> Result:
        async for event in self.events():
            if isinstance(event, Result):
                return event
        raise UsageError("no result")


class FakeProvider(Provider):
    name = "fake"
    options = None

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            supports_injection=True,
            supports_resume=True,
            supports_tool_plugins=False,
            supports_output_schema=True,
            supports_reasoning_effort=True,
            needs_permission_config=True,
            emits_subagent_events=False,
            tool_permission_format="none",
        )

    async def spawn(self, spec: Spec) -> Handle:
        return FakeHandle(f"fake-{next(_IDS)}", spec.prompt)

    async def resume(self, session_id: str, spec: Spec) -> Handle:
        return FakeHandle(session_id, spec.prompt)

    async def shutdown(self) -> None:
        pass


def fake_providers(name: str, options: Any) -> Provider:
    return FakeProvider()
