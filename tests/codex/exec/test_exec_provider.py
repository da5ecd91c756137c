"""CodexExecProvider against the real codex binary and the scripted model server (and a fake codex
for the failure modes the real one will not produce on demand)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import struct
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.codex.exec import CodexExecHandle, CodexExecProvider
from agent_fleet.codex.options import CodexOptions
from agent_fleet.contract import Spec
from agent_fleet.errors import ProviderUnavailable, TurnFailed, Unsupported, UsageError
from agent_fleet.events import AssistantMessage, Error, Event, Result, System, TokenUsage, ToolResult, ToolUse
from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer

from ...procs import alive, descendants

FakeCodex = Callable[..., CodexOptions]
THREAD = '{"type":"thread.started","thread_id":"fake-thread-1"}'
MESSAGE = '{"type":"item.completed","item":{"id":"m1","type":"agent_message","text":"echo: $PROMPT"}}'
COMPLETED = '{"type":"turn.completed","usage":{"input_tokens":1,"cached_input_tokens":0,"output_tokens":2}}'


async def collect(handle: CodexExecHandle) -> list[Event]:
    return [event async for event in handle.events()]


# --- the real binary --------------------------------------------------------------------------------


def _png(path: Path) -> Path:
    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    body = chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + body)
    return path


@pytest.mark.e2e
async def test_text_reply(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("hello there"))
    spec = Spec(
        prompt="say hello",
        cwd=workspace,
        reasoning_effort="low",
        developer_instructions="DEVELOPER-MARK",
        base_instructions="BASE-MARK: you are terse.",
        images=[_png(workspace / "pixel.png")],
    )
    async with CodexExecProvider(exec_options) as provider:
        assert provider.version == "0.163.0"
        handle = await provider.spawn(spec)
        assert handle.session_id  # known as soon as spawn returns
        events = await collect(handle)
    messages = [e for e in events if isinstance(e, AssistantMessage)]
    assert [m.text for m in messages] == ["hello there"] and messages[0].item_id
    assert isinstance(events[-2], TokenUsage)
    result = events[-1]
    assert isinstance(result, Result)
    assert (result.text, result.session_id, result.structured) == ("hello there", handle.session_id, None)
    assert not any(isinstance(e, System) for e in events)  # every field was translated
    request = scripted_model.requests[0]
    assert request.last_user_text == "say hello"
    assert request.body["reasoning"]["effort"] == "low"
    assert request.contains("DEVELOPER-MARK") and request.contains("BASE-MARK")
    assert not request.contains("You are Codex")  # base instructions replace codex's own
    assert request.contains("input_image")


@pytest.mark.e2e
async def test_shell_command_runs_in_the_sandbox(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    # codex exec never asks for approval (policy 'never'); the sandbox is the only limit, so
    # workspace-write lets the command write into the workspace.
    scripted_model.enqueue(Reply.exec("echo hi | tee out.txt"), Reply.text("done"))
    async with CodexExecProvider(exec_options) as provider:
        handle = await provider.spawn(Spec(prompt="run it", cwd=workspace, sandbox="workspace-write"))
        events = await collect(handle)
    uses = [e for e in events if isinstance(e, ToolUse)]
    results = [e for e in events if isinstance(e, ToolResult)]
    assert len(uses) == 1 and uses[0].name == "shell" and "echo hi" in uses[0].input["command"]
    assert len(results) == 1 and results[0].id == uses[0].id
    assert results[0].exit_code == 0 and not results[0].is_error and "hi" in results[0].output
    assert (workspace / "out.txt").read_text() == "hi\n"
    assert isinstance(events[-1], Result) and events[-1].text == "done"
    assert "hi" in json.dumps(scripted_model.requests[-1].tool_outputs())


@pytest.mark.e2e
async def test_follow_up_resumes_the_thread(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(
        Reply.text("first answer"), Reply.text("second answer"), Reply.text("third answer")
    )
    async with CodexExecProvider(exec_options) as provider:
        handle = await provider.spawn(Spec(prompt="FIRST-PROMPT", cwd=workspace))
        first = await handle.wait()
        await handle.send("SECOND-PROMPT")
        with pytest.raises(UsageError):
            await handle.send("too early")
        second = await handle.wait()
        assert second.session_id == first.session_id == handle.session_id
        assert second.text == "second answer"
        request = scripted_model.requests[-1]
        assert "FIRST-PROMPT" in request.user_texts() and request.last_user_text == "SECOND-PROMPT"
        assert request.contains("first answer")  # the model sees the whole history

    # A new provider (same CODEX_HOME) continues the thread by id.
    async with CodexExecProvider(exec_options) as provider:
        resumed = await provider.resume(first.session_id, Spec(prompt="THIRD-PROMPT", cwd=workspace))
        third = await resumed.wait()
    assert (third.text, third.session_id) == ("third answer", first.session_id)
    assert "SECOND-PROMPT" in scripted_model.requests[-1].user_texts()


@pytest.mark.e2e
async def test_http_500_is_a_retryable_turn_failure(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.http_error(500, "boom"))
    async with CodexExecProvider(exec_options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace))
        events = await collect(handle)
        with pytest.raises(TurnFailed) as info:
            await handle.wait()  # after events(): the same terminal, raised
    error = events[-1]
    assert isinstance(error, Error) and error.code == "server_error" and error.retryable
    assert info.value.event is error
    # The `error` event before turn.failed is surfaced, not treated as the end.
    assert any(isinstance(e, System) and e.subtype == "stream_error" for e in events[:-1])


@pytest.mark.e2e
async def test_missing_key_is_auth_failed(
    scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("never sent"))
    options = CodexOptions(
        config=dict(codex_env.config),
        env={**codex_env.env, codex_env.env_key: ""},
        skip_git_repo_check=True,
    )
    async with CodexExecProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace))
        with pytest.raises(TurnFailed) as info:
            await handle.wait()
    error = info.value.event
    assert (error.code, error.retryable) == ("auth_failed", False)
    assert codex_env.env_key in error.message
    assert scripted_model.requests == []


@pytest.mark.e2e
async def test_timeout_kills_the_process(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("too late", delay=8))
    async with CodexExecProvider(exec_options, kill_grace=1.0) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace, timeout=1.5))
        pid = handle.pid
        assert pid is not None
        events = await collect(handle)
    error = events[-1]
    assert isinstance(error, Error) and error.code == "timeout"
    assert not alive(pid)


@pytest.mark.e2e
async def test_idle_timeout_kills_a_stalled_turn(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("too late", delay=8))
    async with CodexExecProvider(exec_options, kill_grace=1.0) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace, idle_timeout=1.5))
        pid = handle.pid
        assert pid is not None
        events = await collect(handle)
    error = events[-1]
    assert isinstance(error, Error) and error.code == "timeout" and "idle timeout" in error.message
    assert not alive(pid)


@pytest.mark.e2e
async def test_structured_output(
    scripted_model: ScriptedModelServer,
    exec_options: CodexOptions,
    workspace: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    scripted_model.enqueue(Reply.text('{"answer": 42}'))
    async with CodexExecProvider(exec_options) as provider:
        handle = await provider.spawn(Spec(prompt="answer", cwd=workspace, output_schema=schema))
        result = await handle.wait()
    assert result.structured == {"answer": 42}
    assert scripted_model.requests[0].contains('"answer"')  # the schema reached the model request
    assert list(private_tmp.iterdir()) == []  # the schema file is removed after the turn


@pytest.mark.e2e
async def test_stop_mid_turn_leaves_no_process(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.exec("sleep 30"), Reply.text("never"))
    async with CodexExecProvider(exec_options, kill_grace=1.0) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace))
        pid = handle.pid
        assert pid is not None
        events: list[Event] = []
        async for event in handle.events():
            events.append(event)
            if isinstance(event, ToolUse):
                children = descendants(pid)[1:]
                await handle.stop()
                await handle.stop()  # idempotent
        assert not alive(pid)
        assert children and not any(alive(c) for c in children)
    error = events[-1]
    assert isinstance(error, Error) and error.code == "cancelled"
    with pytest.raises(TurnFailed):
        await handle.wait()


@pytest.mark.e2e
async def test_cancelling_the_consumer_kills_the_process(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.exec("sleep 30"), Reply.text("never"))
    async with CodexExecProvider(exec_options, kill_grace=1.0) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace))
        pid = handle.pid
        assert pid is not None
        running = asyncio.Event()

        async def consume() -> None:
            async for event in handle.events():
                if isinstance(event, ToolUse):
                    running.set()

        task = asyncio.create_task(consume())
        async with asyncio.timeout(20):
            await running.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        with pytest.raises(TurnFailed) as info:
            await handle.wait()
        assert info.value.event.code == "cancelled"
        assert not alive(pid)


@pytest.mark.e2e
async def test_shutdown_stops_running_turns(
    scripted_model: ScriptedModelServer, exec_options: CodexOptions, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("slow", delay=8))
    provider = CodexExecProvider(exec_options, kill_grace=1.0)
    handle = await provider.spawn(Spec(prompt="p", cwd=workspace))
    pid = handle.pid
    assert pid is not None
    await provider.shutdown()
    await provider.shutdown()
    assert not alive(pid)
    with pytest.raises(TurnFailed) as info:
        await handle.wait()
    assert info.value.event.code == "cancelled"
    with pytest.raises(UsageError):
        await handle.send("more")
    with pytest.raises(Unsupported):
        await handle.inject("steer")


@pytest.mark.e2e
async def test_exit_before_thread_started(exec_options: CodexOptions, workspace: Path) -> None:
    async with CodexExecProvider(exec_options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace, config={"sandbox_mode": "bogus"}))
        with pytest.raises(UsageError):
            _ = handle.session_id
        events = await collect(handle)
        with pytest.raises(UsageError):  # no thread to continue
            await handle.send("again")
    error = events[-1]
    assert isinstance(error, Error) and error.code == "process_exited"
    assert error.data["exit_code"] == 1 and "bogus" in error.data["stderr_tail"]


async def test_missing_binary(tmp_path: Path) -> None:
    provider = CodexExecProvider(CodexOptions(codex_bin=tmp_path / "no-codex"))
    with pytest.raises(ProviderUnavailable):
        await provider.start()
    with pytest.raises(ProviderUnavailable):
        await provider.spawn(Spec(prompt="p"))


def test_capabilities() -> None:
    caps = CodexExecProvider().capabilities
    assert CodexExecProvider.name == "codex-exec"
    assert not caps.supports_injection and caps.supports_resume and caps.supports_output_schema
    assert caps.tool_permission_format == "codex-sandbox" and not caps.needs_permission_config


# --- a fake codex: failure modes on demand ------------------------------------------------------------


async def test_prompt_goes_on_stdin_and_late_output_is_kept(fake_codex: FakeCodex, tmp_path: Path) -> None:
    # The Result line comes after a pause and right before a non-zero exit: it must not be lost.
    options = fake_codex([THREAD, MESSAGE, "@sleep 0.3", COMPLETED], exit_code=3)
    async with CodexExecProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="PROMPT 'quoted' \"x\"", cwd=tmp_path))
        assert handle.session_id == "fake-thread-1"
        result = await handle.wait()
    assert result.text == "echo: PROMPT 'quoted' \"x\""
    record: dict[str, Any] = json.loads((tmp_path / "fake-codex-record.json").read_text())
    assert record["stdin"] == "PROMPT 'quoted' \"x\""
    assert record["argv"][:2] == ["exec", "--json"] and record["argv"][-1] == "-"
    assert not any("PROMPT" in a for a in record["argv"])
    assert record["cwd"] == str(tmp_path)


async def test_eof_without_terminal_is_a_protocol_error(fake_codex: FakeCodex) -> None:
    async with CodexExecProvider(fake_codex([THREAD, MESSAGE])) as provider:
        handle = await provider.spawn(Spec(prompt="p"))
        events = await collect(handle)
        with pytest.raises(UsageError):  # once per turn
            await collect(handle)
    assert isinstance(events[-2], AssistantMessage)
    assert isinstance(events[-1], Error) and events[-1].code == "protocol_error"


async def test_non_zero_exit_is_process_exited(fake_codex: FakeCodex) -> None:
    options = fake_codex([THREAD, "@stderr something broke"], exit_code=2)
    async with CodexExecProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p"))
        with pytest.raises(TurnFailed) as info:
            await handle.wait()
    error = info.value.event
    assert error.code == "process_exited"
    assert error.data["exit_code"] == 2 and "something broke" in error.data["stderr_tail"]


async def test_stderr_auth_failure_without_terminal(fake_codex: FakeCodex) -> None:
    options = fake_codex([THREAD, "@stderr Error: unexpected status 401 Unauthorized"], exit_code=1)
    async with CodexExecProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p"))
        with pytest.raises(TurnFailed) as info:
            await handle.wait()
    assert (info.value.event.code, info.value.event.retryable) == ("auth_failed", False)


async def test_oversize_line_is_a_protocol_error(fake_codex: FakeCodex) -> None:
    options = fake_codex([THREAD, "@big 300000", MESSAGE, "@sleep 20", COMPLETED])
    async with CodexExecProvider(options, max_line_bytes=100_000, kill_grace=1.0) as provider:
        handle = await provider.spawn(Spec(prompt="p"))
        pid = handle.pid
        assert pid is not None
        events = await collect(handle)
    assert isinstance(events[-1], Error) and events[-1].code == "protocol_error"
    assert "100000" in events[-1].message
    assert not alive(pid)


async def test_untranslated_fields_are_reported(fake_codex: FakeCodex) -> None:
    from agent_fleet.contract import PermissionConfig

    async with CodexExecProvider(fake_codex([THREAD, MESSAGE, COMPLETED])) as provider:
        handle = await provider.spawn(Spec(prompt="p", permission=PermissionConfig(default="deny")))
        events = await collect(handle)
    notices = [e for e in events if isinstance(e, System) and e.subtype == "spec_unsupported"]
    assert [n.data["field"] for n in notices] == ["permission"]
    assert isinstance(events[-1], Result)


async def test_follow_up_takes_images_and_an_output_schema(fake_codex: FakeCodex, tmp_path: Path) -> None:
    options = fake_codex([THREAD, MESSAGE, COMPLETED])
    image = _png(tmp_path / "shot.png")
    async with CodexExecProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="first", cwd=tmp_path))
        await handle.wait()
        await handle.send("second", images=[image], output_schema={"type": "object"})
        await handle.wait()
    argv = json.loads((tmp_path / "fake-codex-record.json").read_text())["argv"]
    flags = argv[argv.index(f"--image={image}") :]  # after the -c settings (the box's among them)
    assert argv[:3] == ["exec", "resume", "--json"] and "-c" not in flags
    assert flags[1] == "--output-schema" and flags[3:] == ["fake-thread-1", "-"]


async def test_an_unread_handle_is_bounded_like_every_other_and_loses_nothing(
    fake_codex: FakeCodex, tmp_path: Path
) -> None:
    # codex exec reports whole items (no deltas): past the bound only its cumulative usage is mergeable,
    # so every item still arrives, after the marker where the bound was passed; the handle read at the
    # same time is not held up by the one nobody reads.
    messages = [
        json.dumps(
            {"type": "item.completed", "item": {"id": f"m{n}", "type": "agent_message", "text": f"t{n}"}}
        )
        for n in range(30)
    ]
    options = dataclasses.replace(fake_codex([THREAD, *messages, COMPLETED]), event_buffer=5)
    async with CodexExecProvider(options) as provider:
        unread = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        read = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        read_events = await asyncio.wait_for(collect(read), 30)
        for _ in range(600):  # polled: any event to await would be a read
            if not unread.running:
                break
            await asyncio.sleep(0.05)
        assert not unread.running
        events = await collect(unread)
    for got in (events, read_events):
        assert [e.text for e in got if isinstance(e, AssistantMessage)] == [f"t{n}" for n in range(30)]
        assert isinstance(got[-1], Result) and isinstance(got[-2], TokenUsage)
    markers = [e for e in events if isinstance(e, System) and e.subtype == "events_coalesced"]
    assert len(markers) == 1 and markers[0].data == {"bound": 5}
    assert events.index(markers[0]) == len(events) - 3, (
        "right before the first mergeable event past the bound"
    )
