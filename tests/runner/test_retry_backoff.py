"""The runner's retry decision and backoff, and the retry settings of a ``Task`` (pure)."""

from __future__ import annotations

import math

import pytest

from agent_fleet import Error, RateLimits, Spec
from agent_fleet.errors import UsageError
from agent_fleet.runner import GateConfig, ReviewConfig, Task
from agent_fleet.runner._retry import retry_backoff, retry_hint, should_retry


def test_backoff_doubles_and_is_capped() -> None:
    middle = [retry_backoff(n, base=1.0, cap=5.0, jitter=0.5) for n in (1, 2, 3, 4)]
    assert middle == [1.0, 2.0, 4.0, 5.0]


def test_jitter_spreads_within_a_quarter() -> None:
    assert retry_backoff(1, base=4.0, cap=60, jitter=0.0) == 3.0
    assert retry_backoff(1, base=4.0, cap=60, jitter=1.0) == 5.0
    samples = {retry_backoff(1, base=4.0, cap=60) for _ in range(50)}
    assert len(samples) > 1 and all(3.0 <= s <= 5.0 for s in samples)


def test_a_longer_hint_wins_up_to_its_own_cap() -> None:
    def backoff(hint: object, hint_cap: float | None = None) -> float:
        return retry_backoff(1, base=1.0, cap=30.0, hint=hint, hint_cap=hint_cap, jitter=0.5)

    assert backoff(7.5) == 7.5
    assert backoff(0.1) == 1.0
    assert backoff(999) == 30.0  # without a cap of its own: the backoff's
    assert backoff(999, hint_cap=900.0) == 900.0  # a rate limit's reset is often longer than any backoff
    assert backoff(600, hint_cap=900.0) == 600.0
    assert backoff("soon") == 1.0
    assert backoff(math.nan) == 1.0
    assert backoff(True) == 1.0


NOW = 1_700_000_000.0


@pytest.mark.parametrize(
    ("data", "code", "limits", "expected"),
    [
        ({"retry_after": 12}, "rate_limited", None, 12.0),
        ({"retry_after": -3}, "rate_limited", None, 0.0),
        ({"retry_at": NOW + 600}, "rate_limited", None, 600.0),  # Claude Code's rate-limit reset
        ({"retry_at": NOW - 5}, "rate_limited", None, 0.0),
        ({"retry_after": "soon"}, "rate_limited", None, None),
        ({}, "rate_limited", None, None),  # codex 0.163: no hint at all
        # the provider's rate limit, when it says the limit is reached
        ({}, "rate_limited", RateLimits(reached=True, resets_at=NOW + 90), 90.0),
        ({}, "rate_limited", RateLimits(reached=False, used_percent=40.0, resets_at=NOW + 90), None),
        ({}, "rate_limited", RateLimits(reached=True), None),
        ({}, "server_error", RateLimits(reached=True, resets_at=NOW + 90), None),
        ({"retry_after": 5}, "rate_limited", RateLimits(reached=True, resets_at=NOW + 90), 5.0),
    ],
)
def test_the_providers_hint(
    data: dict[str, object], code: str, limits: RateLimits | None, expected: float | None
) -> None:
    error = Error(code=code, message="m", retryable=True, data=data)  # type: ignore[arg-type]
    assert retry_hint(error, limits, NOW) == expected


@pytest.mark.parametrize(
    ("error", "attempt", "session", "expected"),
    [
        (Error(code="server_error", message="m", retryable=True), 1, None, True),
        (Error(code="server_error", message="m", retryable=True), 3, None, False),  # budget of 2 spent
        (Error(code="bad_request", message="m"), 1, None, False),
        (Error(code="timeout", message="m", retryable=True), 1, None, False),
        (Error(code="cancelled", message="m", retryable=True), 1, None, False),
        (Error(code="app_server_crashed", message="m", retryable=True), 1, "s", True),
        (Error(code="app_server_crashed", message="m", retryable=True), 1, None, False),
    ],
)
def test_should_retry(error: Error, attempt: int, session: str | None, expected: bool) -> None:
    assert should_retry(error, attempt, 2, session_id=session) is expected


@pytest.mark.parametrize(
    "kw",
    [
        {"retries": -1},
        {"retry_delay": -1.0},
        {"retry_delay": math.nan},
        {"retry_max_delay": math.inf},
        {"retry_hint_max_delay": math.nan},
        {"retry_hint_max_delay": -1.0},
    ],
)
def test_bad_retry_settings_are_usage_errors(kw: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        Task(spec=Spec(prompt="p"), **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0.0, -3.0, math.nan, math.inf])
def test_a_task_timeout_must_be_a_finite_positive_number(bad: float) -> None:
    with pytest.raises(UsageError, match="task timeout"):
        Task(spec=Spec(prompt="p"), timeout=bad)
    with pytest.raises(UsageError, match="review timeout"):
        ReviewConfig(timeout=bad)
    assert Task(spec=Spec(prompt="p"), timeout=None).timeout is None
    assert ReviewConfig(timeout=None).timeout is None
    with pytest.raises(UsageError, match="gate command timeout"):
        GateConfig(command_timeout=bad)
