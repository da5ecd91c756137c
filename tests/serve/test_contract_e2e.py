"""The shared contract suite: the same tests against the local CodexProvider and a RemoteProvider on a
daemon whose codex provider talks to the same scripted model (real codex binary)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Error, Result, Spec, TextDelta, ToolResult, ToolUse
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.contract import Provider
from agent_fleet.errors import TurnFailed, Unsupported, UsageError
from agent_fleet.events import Event
from agent_fleet.remote import RemoteProvider
from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer

from .conftest import TOKEN, MakeDaemon

pytestmark = pytest.mark.e2e  # runs the real binary

NewProvider = Callable[[], Awaitable[Provider]]


@pytest.fixture(params=["local", "remote"])
async def new_provider(
    request: pytest.FixtureRequest, codex_env: CodexTestEnv, make_daemon: MakeDaemon
) -> AsyncIterator[NewProvider]:
    """Makes providers of one kind (each entered; shut down at the end). Remote ones share one daemon."""
    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
    made: list[Provider] = []
    daemon: list[Any] = []

    async def make() -> Provider:
        provider: Provider
        if request.param == "local":
            provider = CodexProvider(options)
        else:
            if not daemon:
                daemon.append(await make_daemon(options={"codex": options}))
            provider = RemoteProvider(daemon[0].url, TOKEN)
        await provider.start()
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.shutdown()


async def _collect(handle: Any) -> list[Event]:
    return [event async for event in handle.events()]


async def test_a_text_turn_ends_with_exactly_one_result(
    new_provider: NewProvider, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("hello from the scripted model"))
    provider = await new_provider()
    handle = await provider.spawn(Spec(prompt="say hello", cwd=workspace))
    events = await _collect(handle)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello from the scripted model"
    assert sum(isinstance(e, Result | Error) for e in events) == 1
    result = events[-1]
    assert isinstance(result, Result)
    assert result.session_id == handle.session_id
    assert result.text == "hello from the scripted model"
    assert result.usage is not None  # carried across the wire as a TokenUsage
    assert await handle.wait() == result  # wait() after events() returns the same terminal


async def test_a_command_and_a_follow_up_turn(
    new_provider: NewProvider, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.exec("echo contract-ok"), Reply.text("ran it"), Reply.text("second turn"))
    provider = await new_provider()
    handle = await provider.spawn(Spec(prompt="run echo", cwd=workspace))
    events = await _collect(handle)
    uses = [e for e in events if isinstance(e, ToolUse) and not e.synthetic]
    results = [e for e in events if isinstance(e, ToolResult) and not e.synthetic]
    assert uses and results and "contract-ok" in results[-1].output
    assert isinstance(events[-1], Result) and events[-1].text == "ran it"
    await handle.send("and again")
    assert (await handle.wait()).text == "second turn"


async def test_stop_mid_turn_ends_with_cancelled_and_the_provider_goes_on(
    new_provider: NewProvider, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("never seen", delay=10), Reply.text("after stop"))
    provider = await new_provider()
    handle = await provider.spawn(Spec(prompt="slow", cwd=workspace))
    await scripted_model.wait_for_request()
    await handle.stop()
    await handle.stop()  # idempotent
    events = await _collect(handle)
    assert isinstance(events[-1], Error) and events[-1].code == "cancelled"
    with pytest.raises(TurnFailed):
        await handle.wait()
    with pytest.raises(UsageError):
        await handle.send("on a stopped handle")
    other = await provider.spawn(Spec(prompt="still alive?", cwd=workspace))
    assert (await other.wait()).text == "after stop"


async def test_cancelling_the_consumer_stops_the_turn(
    new_provider: NewProvider, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("never", delay=10))
    provider = await new_provider()
    handle = await provider.spawn(Spec(prompt="slow", cwd=workspace))
    task = asyncio.create_task(_collect(handle))
    await scripted_model.wait_for_request()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    with pytest.raises(TurnFailed) as info:
        async with asyncio.timeout(8):
            await handle.wait()
    assert info.value.event.code == "cancelled"


async def test_send_while_running_is_a_usage_error(
    new_provider: NewProvider, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("slowly", delay=1.5))
    provider = await new_provider()
    handle = await provider.spawn(Spec(prompt="slow", cwd=workspace))
    with pytest.raises(UsageError):
        await handle.send("too early")
    assert (await handle.wait()).text == "slowly"


async def test_resume_continues_the_session(
    new_provider: NewProvider, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("noted"), Reply.text("it was token-4242"))
    first = await new_provider()
    handle = await first.spawn(Spec(prompt="remember token-4242", cwd=workspace))
    await handle.wait()
    await first.shutdown()
    second = await new_provider()
    resumed = await second.resume(handle.session_id, Spec(prompt="what was the token?", cwd=workspace))
    assert resumed.session_id == handle.session_id
    assert (await resumed.wait()).text == "it was token-4242"
    history = scripted_model.requests[-1].user_texts()
    assert "remember token-4242" in history and "what was the token?" in history


async def test_a_stopped_session_is_continued_by_resume(
    new_provider: NewProvider, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    """Issue 28 item 11: after stop() the daemon answered 400 to a resume, where a local provider's works."""
    scripted_model.enqueue(Reply.text("never seen", delay=10), Reply.text("continued"))
    provider = await new_provider()
    handle = await provider.spawn(Spec(prompt="remember token-5151", cwd=workspace))
    await scripted_model.wait_for_request()
    await handle.stop()
    with pytest.raises(TurnFailed):
        await handle.wait()
    resumed = await provider.resume(handle.session_id, Spec(prompt="go on", cwd=workspace))
    assert resumed.session_id == handle.session_id
    assert (await resumed.wait()).text == "continued"
    assert "remember token-5151" in scripted_model.requests[-1].user_texts()


async def test_interrupt_keeps_the_remote_session_on_its_handle(
    codex_env: CodexTestEnv, make_daemon: MakeDaemon, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("never seen", delay=10), Reply.text("same handle"))
    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
    daemon = await make_daemon(options={"codex": options})
    async with RemoteProvider(daemon.url, TOKEN) as provider:
        handle = await provider.spawn(Spec(prompt="slow", cwd=workspace))
        await scripted_model.wait_for_request()
        await handle.interrupt()
        events = await _collect(handle)
        assert isinstance(events[-1], Error) and events[-1].code == "cancelled"
        # the daemon takes no per-turn settings: refused by name, nothing sent (issue 32)
        for setting, value in (("sandbox", "danger-full-access"), ("model", "gpt-5.5"), ("cwd", "/")):
            with pytest.raises(Unsupported, match=setting):
                await handle.send("refused", **{setting: value})
        await handle.send("and now?")
        assert (await handle.wait()).text == "same handle"
    history = scripted_model.requests[-1].user_texts()
    assert "slow" in history and "and now?" in history and "refused" not in history
