"""Model outages, unit by unit (issue 29 item 1): only model progress keeps a turn alive, and a batch
whose running tasks all lost the model pauses, probes with one task, resumes or gives up."""

from __future__ import annotations

import asyncio

from agent_fleet.events import (
    AssistantMessage,
    Error,
    RateLimits,
    Result,
    System,
    TextDelta,
    TokenUsage,
    ToolResult,
    ToolUse,
)
from agent_fleet.runner._outage import ModelOutage, ProgressWatch
from agent_fleet.runner._types import TaskEvent


async def test_notices_and_replayed_usage_are_not_progress_and_the_error_names_the_cause() -> None:
    silent = asyncio.Event()
    progressed: list[int] = []
    watch = ProgressWatch(0.2, silent.set, lambda: progressed.append(1))
    for _ in range(8):  # a reconnecting model: notices, usage, rate limits, for longer than the bound
        watch.feed(System(subtype="stream_retry", data={"message": "Reconnecting... waiting for network"}))
        watch.feed(TokenUsage(total_tokens=10))
        watch.feed(RateLimits())
        await asyncio.sleep(0.05)
    await asyncio.wait_for(silent.wait(), 2)
    assert progressed == []
    error = watch.outcome(Error(code="cancelled", message="stopped by the caller"))
    assert isinstance(error, Error) and error.code == "connection_failed" and error.retryable
    assert "no progress from the model for 0.2s" in error.message
    assert "Reconnecting... waiting for network" in error.message
    assert error.data == {"model_timeout": 0.2, "cause": "Reconnecting... waiting for network"}
    assert watch.outcome(Result(session_id="s")) == Result(session_id="s"), "a result stands"


async def test_model_output_is_progress_and_a_running_command_is_not_silence() -> None:
    silent = asyncio.Event()
    progressed: list[int] = []
    watch = ProgressWatch(0.2, silent.set, lambda: progressed.append(1))
    watch.feed(AssistantMessage(text="working on it"))
    watch.feed(TextDelta(text="more"))
    watch.feed(ToolUse(id="c1", name="shell"))  # a long command: nothing from the model meanwhile
    await asyncio.sleep(0.6)
    assert not silent.is_set() and progressed == [1], "progress reported once a turn"
    watch.feed(ToolResult(id="c1", output="done"))  # the command's own output is not the model
    await asyncio.wait_for(silent.wait(), 2)
    watch.cancel()
    off = ProgressWatch(None, silent.set)
    assert off.dog is None


def _outage(limit: float | None = None) -> tuple[ModelOutage, list[str], list[str]]:
    said: list[str] = []
    gave_up: list[str] = []

    def notify(event: TaskEvent) -> None:
        assert isinstance(event.event, System)
        said.append(f"{event.event.subtype} {event.task_id}")

    return ModelOutage(limit=limit, notify=notify, on_give_up=gave_up.append), said, gave_up


async def test_every_running_task_down_pauses_once_one_probes_the_rest_wait_then_all_resume() -> None:
    outage, said, _ = _outage()
    for task_id in ("a", "b", "c"):
        outage.enter(task_id)
    first = asyncio.create_task(outage.hit("a", "gone", settle=10))
    second = asyncio.create_task(outage.hit("b", "gone", settle=10))
    await asyncio.sleep(0.05)
    assert not outage.paused and not first.done(), "c may still reach the model: a and b wait for it"
    assert await outage.hit("c", "gone", settle=10) is True  # the last one: the batch pauses, c probes
    assert outage.paused and said == ["runner.batch_paused c"]
    await asyncio.sleep(0.05)
    assert not first.done() and not second.done(), "the others wait, burning nothing"
    opened = asyncio.create_task(outage.open())
    await asyncio.sleep(0)
    assert not opened.done(), "no task starts while paused"
    outage.progress("c")  # the probe's turn: the model answers
    assert await first is True and await second is True
    await opened
    assert said == ["runner.batch_paused c", "runner.batch_resumed c"] and not outage.paused


async def test_progress_elsewhere_means_no_outage_and_a_probe_that_leaves_is_replaced() -> None:
    outage, said, _ = _outage()
    outage.enter("a")
    outage.enter("b")
    waiting = asyncio.create_task(outage.hit("a", "gone", settle=10))
    await asyncio.sleep(0.01)
    outage.progress("b")  # b's model answers: a's trouble is its own
    assert await waiting is False and said == []
    outage.progress("a")  # (a's retry got through)
    waiter = asyncio.create_task(outage.hit("a", "gone", settle=10))
    await asyncio.sleep(0.01)
    assert await outage.hit("b", "gone", settle=10) is True and outage.paused  # both down: b probes
    await asyncio.sleep(0.01)
    assert not waiter.done()
    outage.leave("b")  # the probe finished: a probes in its place
    assert await waiter is True and outage.paused


async def test_a_short_settle_falls_back_to_the_usual_retry() -> None:
    outage, _, _ = _outage()
    outage.enter("a")
    outage.enter("busy")  # running a long command: neither down nor progressing
    assert await outage.hit("a", "gone", settle=0.05) is False


async def test_an_outage_past_its_limit_gives_up_with_the_cause() -> None:
    outage, _, gave_up = _outage(limit=0.1)
    outage.enter("a")
    assert await outage.hit("a", "Reconnecting... waiting for network", settle=1) is True
    await asyncio.sleep(0.3)
    assert gave_up == [
        "the model stayed unreachable for 0.1s (Reconnecting... waiting for network); "
        "no task was started meanwhile"
    ]
