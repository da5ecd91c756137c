"""A provider's live handles and background work: the one object its handles call back into.

A handle never calls its provider's private methods. It gets a ``HandleHost`` when it is made (the
provider's ``Sessions``) and asks it for the three things a handle needs from outside itself: run a
task in the background (an interrupt, an approval handler, reaping a process), drop it from the
provider's table of live sessions when it closes, and re-file it when the agent reports a different
session id than the one it was opened with.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, Generic, Protocol, TypeVar

from agent_fleet._provider.tasks import BackgroundTasks
from agent_fleet.contract import Handle

HandleT = TypeVar("HandleT", bound=Handle)


class HandleHost(Protocol):
    """What a handle may ask of the provider that opened it."""

    def spawn_task(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` in the background, owned (and cancelled at shutdown) by the provider."""
        ...

    def forget(self, handle: Handle) -> None:
        """``handle`` closed: it is no longer a live session of the provider. Idempotent."""
        ...

    def rekey(self, handle: Handle, new_id: str) -> None:
        """``handle`` (still under its old ``session_id``) is now known as ``new_id``."""
        ...


class Sessions(HandleHost, Generic[HandleT]):
    """Live handles by session id, plus the provider's ``BackgroundTasks``. Implements ``HandleHost``."""

    def __init__(self, logger: logging.Logger) -> None:
        self._open: dict[str, HandleT] = {}
        self._background = BackgroundTasks(logger)

    def add(self, handle: HandleT) -> None:
        self._open[handle.session_id] = handle

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._open

    def handles(self) -> list[HandleT]:
        """A snapshot of the live handles (safe to iterate while they close)."""
        return list(self._open.values())

    def spawn_task(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        return self._background.spawn(coro, name)

    def forget(self, handle: Handle) -> None:
        session_id = handle.session_id
        if self._open.get(session_id) is handle:
            del self._open[session_id]

    def rekey(self, handle: Handle, new_id: str) -> None:
        old_id = handle.session_id
        entry = self._open.get(old_id)
        if entry is handle:  # a handle not filed yet (or already forgotten) stays out
            del self._open[old_id]
            self._open[new_id] = entry

    async def close(self, *, grace: float = 0.0) -> None:
        """End the background work: ``grace`` seconds to finish, then cancelled (see ``BackgroundTasks``)."""
        await self._background.close(grace=grace)
