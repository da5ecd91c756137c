"""The runner's retry backoff and the retry settings of a ``Task`` (pure)."""

from __future__ import annotations

import math

import pytest

from agent_fleet import Spec
from agent_fleet.errors import UsageError
from agent_fleet.runner import Task
from agent_fleet.runner.task import retry_backoff


def _task(**kw: float) -> Task:
    return Task(spec=Spec(prompt="p"), **kw)  # type: ignore[arg-type]


def test_backoff_doubles_and_is_capped() -> None:
    task = _task(retry_delay=1.0, retry_max_delay=5.0)
    middle = [retry_backoff(task, n, jitter=0.5) for n in (1, 2, 3, 4)]
    assert middle == [1.0, 2.0, 4.0, 5.0]


def test_jitter_spreads_within_a_quarter() -> None:
    task = _task(retry_delay=4.0)
    assert retry_backoff(task, 1, jitter=0.0) == 3.0
    assert retry_backoff(task, 1, jitter=1.0) == 5.0
    samples = {retry_backoff(task, 1) for _ in range(50)}
    assert len(samples) > 1 and all(3.0 <= s <= 5.0 for s in samples)


def test_a_longer_retry_after_hint_wins_but_never_past_the_cap() -> None:
    task = _task(retry_delay=1.0, retry_max_delay=30.0)
    assert retry_backoff(task, 1, 7.5, jitter=0.5) == 7.5
    assert retry_backoff(task, 1, 0.1, jitter=0.5) == 1.0
    assert retry_backoff(task, 1, 999, jitter=0.5) == 30.0
    assert retry_backoff(task, 1, "soon", jitter=0.5) == 1.0
    assert retry_backoff(task, 1, math.nan, jitter=0.5) == 1.0


@pytest.mark.parametrize(
    "kw",
    [{"retries": -1}, {"retry_delay": -1.0}, {"retry_delay": math.nan}, {"retry_max_delay": math.inf}],
)
def test_bad_retry_settings_are_usage_errors(kw: dict[str, float]) -> None:
    with pytest.raises(UsageError):
        _task(**kw)
