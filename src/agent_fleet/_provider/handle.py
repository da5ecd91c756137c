"""What every handle whose turns each own an ``EventStream`` does the same way.

The codex app-server and Claude handles keep their current turn in ``self._turn`` (an object with
a ``stream``); ``events()``, ``wait()``, ``running`` and the guard of ``send()`` follow from that
alone. Each subclass says how to start a follow-up turn; ``stop()`` is scheduled on the ``HandleHost``
it was given (``self._host``) when the task reading ``events()`` is cancelled.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from agent_fleet._provider.sessions import HandleHost
from agent_fleet._provider.stream import EventStream
from agent_fleet.contract import Handle, Sandbox, check_text, refuse_turn_settings
from agent_fleet.errors import UsageError
from agent_fleet.events import Event, Result


class _HasStream(Protocol):
    stream: EventStream


TurnT = TypeVar("TurnT", bound=_HasStream)


class StreamedHandle(Handle, Generic[TurnT]):
    _turn: TurnT | None
    _host: HandleHost

    @property
    def running(self) -> bool:
        """True while the current turn has not ended (whether or not its events were read yet)."""
        return self._turn is not None and not self._turn.stream.done

    def events(self) -> AsyncIterator[Event]:
        """Events of the current turn, ending right after its terminal event.

        Cancelling the task iterating this stops the session, as ``stop()`` does. Raises
        ``UsageError`` when no turn was started.
        """
        return self._require_turn().stream.iterate(self._stop_soon)

    async def wait(self) -> Result:
        """Drain the current turn; return its ``Result`` or raise ``TurnFailed``."""
        return await self._require_turn().stream.result()

    async def send(
        self,
        prompt: str,
        *,
        images: Sequence[str | Path] = (),
        output_schema: Mapping[str, Any] | None = None,
        model: str | None = None,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        sandbox: Sandbox | None = None,
        approval_policy: str | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        """Start a follow-up turn. Raises ``UsageError`` while a turn runs or after ``stop()``, and
        ``Unsupported`` (nothing sent) for a per-turn setting the provider cannot change for one turn
        (``_turn_settings``)."""
        if self.running:
            raise UsageError("send(): the current turn is still running; wait for it or stop() first")
        check_text(prompt)
        self._turn_settings(
            model=model,
            reasoning_effort=reasoning_effort,
            reasoning_summary=reasoning_summary,
            sandbox=sandbox,
            approval_policy=approval_policy,
            cwd=cwd,
        )
        await self._follow_up(prompt, images=tuple(images), output_schema=output_schema)

    def _turn_settings(self, **settings: Any) -> None:
        """Take the per-turn settings of ``send()`` for the next turn; by default none is possible:
        ``Unsupported`` naming the first one given."""
        refuse_turn_settings(type(self).__name__, **settings)

    @abc.abstractmethod
    async def _follow_up(
        self, prompt: str, *, images: tuple[str | Path, ...], output_schema: Mapping[str, Any] | None
    ) -> None:
        """Start the next turn with ``prompt`` (the previous one has ended)."""

    def _stop_soon(self) -> None:
        self._host.spawn_task(self.stop(), f"stop:{self.session_id}")

    def _require_turn(self) -> TurnT:
        if self._turn is None:
            raise UsageError("no turn has been started on this handle")
        return self._turn
