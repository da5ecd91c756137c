"""Failures end to end: scripted API failures -> real codex -> ``Error`` codes and retry notices."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agent_fleet import Error, Result, Spec, System, TextDelta
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.testing import CodexTestEnv, ReasoningItem, Reply, ScriptedModelServer, Text, exec_command

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("reply", "code", "retryable"),
    [
        (Reply.http_error(400, "Invalid value for 'input'."), "bad_request", False),
        (Reply.http_error(401, "Incorrect API key provided"), "auth_failed", False),
        (Reply.http_error(404, "The model `gpt-x` does not exist"), "model_not_found", False),
        (Reply.rate_limited(1.0), "rate_limited", True),
        (Reply.http_error(500, "boom"), "server_error", True),
        (Reply.http_error(503, "overloaded"), "server_error", True),
        (Reply(failed=("server_error", "kaput")), "connection_failed", True),
        (Reply.context_window_exceeded(), "context_window_exceeded", False),
        (Reply.usage_limit_exceeded(), "usage_limit_exceeded", False),
    ],
    ids=["400", "401", "404", "429", "500", "503", "failed", "context", "usage"],
)
@pytest.mark.protocol_smoke
async def test_api_failures_map_to_codes(
    codex_options: CodexOptions,
    scripted_model: ScriptedModelServer,
    workspace: Path,
    reply: Reply,
    code: str,
    retryable: bool,
) -> None:
    scripted_model.enqueue(reply)
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace))
        events = [event async for event in handle.events()]
    terminal = events[-1]
    assert isinstance(terminal, Error)
    assert (terminal.code, terminal.retryable) == (code, retryable), terminal


async def test_a_stream_codex_retries_is_marked_before_the_repeated_output(
    codex_env: CodexTestEnv, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    config = dict(codex_env.config)
    config["model_providers.scripted"] = {**config["model_providers.scripted"], "stream_max_retries": 1}
    words = "one two three four five"
    # response.created, output_item.added, two deltas, then the connection drops.
    scripted_model.enqueue(Reply(items=[Text(text=words)], cut_after=4))
    scripted_model.enqueue(Reply.text(words))
    options = CodexOptions(config=config, env=dict(codex_env.env))
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace))
        events = [event async for event in handle.events()]
    assert isinstance(events[-1], Result) and events[-1].text == words
    kinds = [type(e).__name__ if not isinstance(e, System) else e.subtype for e in events]
    retry = kinds.index("stream_retry")
    before = "".join(e.text for e in events[:retry] if isinstance(e, TextDelta))
    after = "".join(e.text for e in events[retry:] if isinstance(e, TextDelta))
    assert before == "one two "  # the partial text a consumer must discard ...
    assert after == words  # ... because it is streamed again in full after the notice
    assert kinds.count("stream_retry") == 1


async def test_a_stalled_model_ends_the_turn_with_an_idle_timeout(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("too late", delay=8.0))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace, idle_timeout=1.0))
        started = time.monotonic()
        events = [event async for event in handle.events()]
        took = time.monotonic() - started
    terminal = events[-1]
    assert isinstance(terminal, Error) and terminal.code == "timeout", terminal
    assert terminal.data["idle_timeout"] == 1.0 and not terminal.retryable
    assert 0.9 <= took < 4.0


async def test_a_long_command_is_not_idle(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply(items=[exec_command("sleep 2.5")]))
    scripted_model.enqueue(Reply.text("slept"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace, idle_timeout=1.0))
        events = [event async for event in handle.events()]
    assert isinstance(events[-1], Result) and events[-1].text == "slept", events[-1]


async def test_a_long_reasoning_item_is_not_idle(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    # codex announces the reasoning item, then (reasoning deltas opted out) sends nothing until it ends.
    scripted_model.enqueue(Reply(items=[ReasoningItem(summary="thinking hard", duration=2.5)]))
    scripted_model.enqueue(Reply.text("thought"))
    async with CodexProvider(codex_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace, idle_timeout=1.0))
        events = [event async for event in handle.events()]
    assert isinstance(events[-1], Result), events[-1]
