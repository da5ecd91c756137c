"""Overload refusals (-32001): which errors they are, the retry helper's bounds, and the provider."""

from __future__ import annotations

import json
import random
import stat
import sys
from pathlib import Path

import pytest

from agent_fleet import Result, Spec
from agent_fleet.codex import CodexOptions, CodexProvider, is_retryable, retry_on_overload
from agent_fleet.errors import RequestTimeout, RPCError, UsageError

FAKE = Path(__file__).with_name("fake_app_server.py")
OVERLOADED = RPCError(-32001, "Server overloaded; retry later.")


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def _failing(times: int, error: Exception = OVERLOADED) -> tuple[list[int], object]:
    calls: list[int] = []

    async def op() -> str:
        calls.append(1)
        if len(calls) <= times:
            raise error
        return "ok"

    return calls, op


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (OVERLOADED, True),
        (RPCError(-32000, "busy", {"codexErrorInfo": "server_overloaded"}), True),
        (RPCError(-32603, "internal"), False),
        (RPCError(-32600, "invalid"), False),
        (RequestTimeout("thread/start", 1.0), False),  # it may have run: never retried as a refusal
        (ValueError("x"), False),
    ],
)
def test_is_retryable_means_refused_unprocessed(exc: BaseException, expected: bool) -> None:
    assert is_retryable(exc) is expected


async def test_overload_is_retried_with_growing_jittered_waits() -> None:
    clock = _Clock()
    calls, op = _failing(5)
    result = await retry_on_overload(op, timeout=60, sleep=clock.sleep, clock=clock, rng=random.Random(1))  # type: ignore[arg-type]
    assert result == "ok" and len(calls) == 6
    caps = [min(2.0, 0.05 * 2**n) for n in range(5)]
    assert all(0 <= wait <= cap for wait, cap in zip(clock.sleeps, caps, strict=True))
    assert len(set(clock.sleeps)) == 5  # jittered, not one fixed delay


async def test_no_wait_ends_past_the_callers_timeout() -> None:
    clock = _Clock()
    calls, op = _failing(10_000)
    with pytest.raises(RPCError):
        await retry_on_overload(op, timeout=5.0, sleep=clock.sleep, clock=clock, rng=random.Random(2))  # type: ignore[arg-type]
    assert clock.now < 5.0 and len(calls) > 3


async def test_other_errors_are_raised_at_once_and_attempts_are_bounded() -> None:
    clock = _Clock()
    calls, op = _failing(1, RPCError(-32602, "bad params"))
    with pytest.raises(RPCError):
        await retry_on_overload(op, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert len(calls) == 1 and clock.sleeps == []
    calls, op = _failing(100)
    with pytest.raises(RPCError):
        await retry_on_overload(op, max_attempts=3, sleep=clock.sleep, clock=clock)  # type: ignore[arg-type]
    assert len(calls) == 3
    with pytest.raises(UsageError):
        await retry_on_overload(op, max_attempts=0)  # type: ignore[arg-type]


async def test_the_provider_retries_refused_thread_and_turn_starts(tmp_path: Path) -> None:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    options = CodexOptions(codex_bin=wrapper, env={"FAKE_SCENARIO": json.dumps([]), "FAKE_OVERLOAD": "3"})
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        result = await handle.wait()
        sent = provider.connection.requests_sent
    assert isinstance(result, Result)
    assert (sent["thread/start"], sent["turn/start"]) == (4, 4)
