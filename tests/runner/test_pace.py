"""The runner slows down before a provider's rate limit: the pure rule, and a task that waits."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest

from agent_fleet import RateLimits, Result, Spec, System
from agent_fleet._provider.handle import StreamedHandle
from agent_fleet._provider.sessions import Sessions
from agent_fleet._provider.stream import EventStream
from agent_fleet.contract import Capabilities, Handle, Provider
from agent_fleet.runner import Task, TaskEvent, run_task
from agent_fleet.runner._pace import MAX_PAUSE, NEAR_PAUSE, pause_before_turn


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        (None, 0.0),
        (RateLimits(), 0.0),
        (RateLimits(used_percent=89.9, resets_at=1060.0), 0.0),
        (RateLimits(used_percent=90.0, resets_at=1010.0), 10.0),
        (RateLimits(used_percent=95.0, resets_at=5000.0), NEAR_PAUSE),
        (RateLimits(used_percent=95.0), NEAR_PAUSE),
        (RateLimits(used_percent=100.0, resets_at=1100.0), 100.0),
        (RateLimits(reached=True, resets_at=9000.0), MAX_PAUSE),
        (RateLimits(reached=True), MAX_PAUSE),
        (RateLimits(used_percent=99.0, resets_at=900.0), 0.0),  # the window already reset
    ],
)
def test_pause_before_turn(limits: RateLimits | None, expected: float) -> None:
    assert pause_before_turn(limits, now=1000.0) == expected


class _Turn:
    def __init__(self, session_id: str) -> None:
        self.stream = EventStream()
        self.stream.finish(Result(session_id=session_id, text="done"))


class _Handle(StreamedHandle[_Turn]):
    def __init__(self, host: Sessions[_Handle]) -> None:
        self._host = host
        self._turn = _Turn("s1")

    @property
    def session_id(self) -> str:
        return "s1"

    async def _follow_up(self, prompt: str, *, images: tuple[object, ...], output_schema: object) -> None:
        self._turn = _Turn("s1")

    async def inject(self, text: str) -> None:
        raise AssertionError

    async def stop(self) -> None:
        pass


class _NearLimit(Provider):
    """A provider whose account is at 95 % of a window that resets in a moment."""

    name = "near"
    options = None

    def __init__(self, resets_at: float) -> None:
        self._limits = RateLimits(used_percent=95.0, resets_at=resets_at)
        self._sessions: Sessions[_Handle] = Sessions(logging.getLogger("test"))

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            supports_injection=False,
            supports_resume=False,
            supports_tool_plugins=False,
            supports_output_schema=False,
            supports_reasoning_effort=False,
            needs_permission_config=False,
            emits_subagent_events=False,
            tool_permission_format="none",
        )

    @property
    def rate_limits(self) -> RateLimits | None:
        return self._limits

    async def spawn(self, spec: Spec) -> Handle:
        return _Handle(self._sessions)

    async def resume(self, session_id: str, spec: Spec) -> Handle:
        raise AssertionError

    async def shutdown(self) -> None:
        await self._sessions.close()


async def test_a_task_waits_before_its_turn_when_a_limit_is_near(repo: Path) -> None:
    seen: list[TaskEvent] = []
    provider = _NearLimit(resets_at=time.time() + 0.2)
    started = time.monotonic()
    result = await run_task(Task(spec=Spec(prompt="p", cwd=repo)), provider=provider, on_event=seen.append)
    assert result.status == "succeeded", result.reason
    notes = [
        e.event for e in seen if isinstance(e.event, System) and e.event.subtype == "runner.rate_limited"
    ]
    assert len(notes) == 1 and notes[0].data["used"] == 95.0 and 0 < notes[0].data["wait"] <= 0.2
    assert time.monotonic() - started >= 0.1
    await provider.shutdown()
