"""ClaudeProvider against the Claude Code CLI bundled in claude-agent-sdk and the scripted Anthropic server.

Fully offline: the CLI talks to a loopback Messages API server with a dummy key and a private HOME.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import struct
import time
import zlib
from pathlib import Path

import pytest

from agent_fleet import (
    AssistantMessage,
    Error,
    Event,
    PermissionConfig,
    Reasoning,
    ReasoningDelta,
    Result,
    Spec,
    System,
    TextDelta,
    TokenUsage,
    ToolResult,
    ToolUse,
)
from agent_fleet.claude import ClaudeOptions, ClaudeProvider
from agent_fleet.contract import Handle
from agent_fleet.errors import TransportError, TurnFailed, Unsupported, UsageError
from agent_fleet.testing._anthropic import (
    AnthropicReply,
    AnthropicRequest,
    AnthropicText,
    AnthropicThinking,
    AnthropicToolUse,
    ScriptedAnthropicServer,
    scripted_claude_env,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

TOKEN = re.compile(r"token-(\d+)")


async def _collect(handle: Handle) -> list[Event]:
    return [event async for event in handle.events()]


def _one_terminal(events: list[Event]) -> Result | Error:
    terminals = [e for e in events if isinstance(e, Result | Error)]
    assert len(terminals) == 1 and terminals[0] is events[-1], events
    return terminals[0]


def _running(needle: str) -> list[int]:
    """Pids of processes whose command line mentions ``needle``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _cli_children() -> list[int]:
    """Pids of this process's children running the Claude Code CLI."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = stat.rsplit(")", 1)[1].split()[1]
        if ppid == me and b"stream-json" in cmdline:
            found.append(int(entry.name))
    return found


async def test_text_turn_maps_to_events(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(
        AnthropicReply(
            blocks=(
                AnthropicThinking(thinking="pondering"),
                AnthropicText(text="hello from scripted claude"),
            ),
            usage={"input_tokens": 30, "output_tokens": 7, "cache_read_input_tokens": 5},
        )
    )
    async with ClaudeProvider(claude_options) as provider:
        assert provider.name == "claude"
        handle = await provider.spawn(Spec(prompt="say hello", cwd=workspace, sandbox="workspace-write"))
        events = await _collect(handle)
    result = _one_terminal(events)
    assert isinstance(result, Result)
    assert result.text == "hello from scripted claude"
    assert result.session_id == handle.session_id
    assert result.turn_id is None
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello from scripted claude"
    assert [e.text for e in events if isinstance(e, AssistantMessage)] == ["hello from scripted claude"]
    assert [e.text for e in events if isinstance(e, Reasoning)] == ["pondering"]
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "pondering"
    assert result.duration_ms is not None and result.duration_ms >= 0 and result.cost_usd is not None
    usage = [e for e in events if isinstance(e, TokenUsage)]
    assert usage and usage[-1] == result.usage
    assert result.usage is not None and result.usage.input_tokens == 35 and result.usage.output_tokens == 7
    init = [e for e in events if isinstance(e, System) and e.subtype == "init"]
    assert init and init[0].data["session_id"] == handle.session_id
    # Spec.sandbox is carried (Claude Code's own sandbox), so nothing is reported as unsupported
    notices = [
        e for e in events if isinstance(e, System) and e.subtype in ("spec_unsupported", "no_os_sandbox")
    ]
    assert notices == []
    request = anthropic_server.agent_requests[0]
    assert request.stream and "say hello" in request.user_texts()
    assert "Bash" in request.tool_names


async def test_bash_accepted_runs_and_reports_output(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.bash("echo agent-fleet-ran"), AnthropicReply.text("it ran"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="run echo", cwd=workspace))
        events = await _collect(handle)
    result = _one_terminal(events)
    assert isinstance(result, Result) and result.text == "it ran"

    approvals = [e for e in events if isinstance(e, ToolUse) and e.name == "approval"]
    assert len(approvals) == 1 and approvals[0].synthetic
    assert approvals[0].input == {"kind": "command", "command": "echo agent-fleet-ran"}
    verdict = next(e for e in events if isinstance(e, ToolResult) and e.id == approvals[0].id)
    assert verdict.synthetic and verdict.status == "allow_for_session" and not verdict.is_error

    shell = [e for e in events if isinstance(e, ToolUse) and e.name == "shell"]
    assert len(shell) == 1 and shell[0].input == {"command": "echo agent-fleet-ran"}
    assert approvals[0].id == f"approval:{shell[0].id}"
    output = next(e for e in events if isinstance(e, ToolResult) and e.id == shell[0].id)
    assert "agent-fleet-ran" in output.output and not output.is_error and output.status == "completed"
    assert not any(isinstance(e, System) and e.subtype == "approval_denied" for e in events)

    follow_up = anthropic_server.agent_requests[1]
    assert follow_up.ends_with_tool_result
    assert "agent-fleet-ran" in follow_up.tool_result_text(follow_up.tool_results()[-1])


async def test_bash_declined_by_policy_is_not_run(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    command = "git reset --hard && touch ran.txt"
    anthropic_server.enqueue(AnthropicReply.bash(command), AnthropicReply.text("understood, not running it"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="reset the repo", cwd=workspace))
        events = await _collect(handle)
    result = _one_terminal(events)
    assert isinstance(result, Result) and result.text == "understood, not running it"
    assert not (workspace / "ran.txt").exists()

    denied = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert len(denied) == 1
    assert denied[0].data["rule"] == "git-reset-hard" and denied[0].data["command"] == command
    assert denied[0].data["reason"]
    verdict = next(e for e in events if isinstance(e, ToolResult) and e.synthetic)
    assert verdict.status == "decline" and verdict.is_error

    shell = next(e for e in events if isinstance(e, ToolUse) and e.name == "shell")
    outcome = next(e for e in events if isinstance(e, ToolResult) and e.id == shell.id)
    assert outcome.is_error and outcome.status == "declined"

    follow_up = anthropic_server.agent_requests[1]
    block = follow_up.tool_results()[-1]
    assert block.get("is_error") is True
    assert "git-reset-hard" in follow_up.tool_result_text(block)


async def test_file_tools_go_through_path_containment(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    inside = workspace / "inside.txt"
    anthropic_server.enqueue(
        AnthropicReply.tool_use("Write", {"file_path": str(outside), "content": "nope\n"}),
        AnthropicReply.tool_use("Write", {"file_path": str(inside), "content": "yes\n"}),
        AnthropicReply.text("wrote one file"),
    )
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="write files", cwd=workspace))
        events = await _collect(handle)
    assert isinstance(_one_terminal(events), Result)
    assert not outside.exists()
    assert inside.read_text() == "yes\n"
    approvals = [e for e in events if isinstance(e, ToolUse) and e.name == "approval"]
    assert [a.input["paths"] for a in approvals] == [[str(outside)], [str(inside)]]
    assert all(a.input["kind"] == "file_change" and a.input["tool"] == "Write" for a in approvals)
    denied = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [d.data["rule"] for d in denied] == ["path-escape"]


async def test_concurrent_sessions_each_get_their_own_answer(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    def responder(request: AnthropicRequest) -> AnthropicReply | None:
        match = TOKEN.search(request.last_user_text)
        return AnthropicReply.text(f"answer-{match.group(1)}", delay=0.3) if match else None

    anthropic_server.responder = responder
    async with ClaudeProvider(claude_options) as provider:
        handles = await asyncio.gather(
            *(provider.spawn(Spec(prompt=f"token-{i}", cwd=workspace)) for i in range(3))
        )
        results = await asyncio.gather(*(h.wait() for h in handles))
    assert [r.text for r in results] == ["answer-0", "answer-1", "answer-2"]
    assert len({h.session_id for h in handles}) == 3
    assert [r.session_id for r in results] == [h.session_id for h in handles]


async def test_follow_up_turn_with_send(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.text("first answer"), AnthropicReply.text("second answer"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="first question", cwd=workspace))
        first = await handle.wait()
        assert not handle.running
        with pytest.raises(UsageError):
            await handle.inject("too late")
        await handle.send("second question")
        events = await _collect(handle)
        assert not handle.running
    assert first.text == "first answer"
    result = _one_terminal(events)
    assert isinstance(result, Result) and result.text == "second answer"
    assert result.session_id == first.session_id == handle.session_id
    assert result.usage is not None and first.usage is not None
    assert result.usage.total_tokens > first.usage.total_tokens  # cumulative for the session
    second = anthropic_server.agent_requests[-1]
    assert second.contains("first question") and second.contains("first answer")
    assert second.last_user_text.startswith("second question")


async def test_follow_up_with_an_image(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    image = workspace / "shot.png"
    ihdr = b"IHDR" + struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    idat = b"IDAT" + zlib.compress(b"\x00\xff\x00\x00")
    chunks = b"".join(
        struct.pack(">I", len(c) - 4) + c + struct.pack(">I", zlib.crc32(c)) for c in (ihdr, idat, b"IEND")
    )
    image.write_bytes(b"\x89PNG\r\n\x1a\n" + chunks)
    anthropic_server.enqueue(AnthropicReply.text("first"), AnthropicReply.text("a red dot"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace))
        await handle.wait()
        with pytest.raises(Unsupported):  # the CLI takes its schema once, at start
            await handle.send("as JSON", output_schema={"type": "object"})
        await handle.send("what is in it?", images=[image])
        result = await handle.wait()
    assert result.text == "a red dot"
    last = anthropic_server.agent_requests[-1].messages[-1]
    assert [b.get("type") for b in last["content"] if isinstance(b, dict)][:2] == ["text", "image"]


async def test_resume_continues_the_session_in_a_new_provider(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(
        AnthropicReply.text("the code word is PINEAPPLE"), AnthropicReply.text("you asked about the word")
    )
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="remember a code word", cwd=workspace))
        first = await handle.wait()
    session_id = first.session_id

    async with ClaudeProvider(claude_options) as provider:
        resumed = await provider.resume(session_id, Spec(prompt="what was the code word?", cwd=workspace))
        result = await resumed.wait()
    assert resumed.session_id == session_id
    assert result.session_id == session_id and result.text == "you asked about the word"
    request = anthropic_server.agent_requests[-1]
    assert request.contains("remember a code word") and request.contains("PINEAPPLE")
    assert request.last_user_text.startswith("what was the code word?")


async def test_resume_of_unknown_session_is_a_transport_error(
    claude_options: ClaudeOptions, workspace: Path
) -> None:
    async with ClaudeProvider(claude_options) as provider:
        with pytest.raises(TransportError) as info:
            await provider.resume("00000000-0000-4000-8000-000000000000", Spec(prompt="hi", cwd=workspace))
    assert info.value.exit_code not in (None, 0)


async def test_timeout_ends_the_turn_and_the_session_goes_on(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.text("too slow", delay=4.0), AnthropicReply.text("on time"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="slow", cwd=workspace, timeout=1.0))
        started = time.monotonic()
        events = await _collect(handle)
        elapsed = time.monotonic() - started
        error = _one_terminal(events)
        assert isinstance(error, Error) and error.code == "timeout" and error.retryable
        assert elapsed < 3.5
        await handle.send("again")
        result = await handle.wait()
    assert result.text == "on time"


async def test_idle_timeout_ends_a_stalled_turn_and_the_session_goes_on(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.text("too slow", delay=6.0), AnthropicReply.text("on time"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="slow", cwd=workspace, idle_timeout=1.0))
        started = time.monotonic()
        events = await _collect(handle)
        elapsed = time.monotonic() - started
        error = _one_terminal(events)
        assert isinstance(error, Error) and error.code == "timeout" and not error.retryable
        assert error.data["idle_timeout"] == 1.0
        assert elapsed < 4.0
        await handle.send("again")
        result = await handle.wait()
    assert result.text == "on time"


async def test_stop_cancels_the_running_turn(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.text("never seen", delay=5.0))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="slow", cwd=workspace))
        await anthropic_server.wait_for_request(lambda r: r.is_agent)  # mid-turn
        await handle.stop()
        await handle.stop()  # idempotent
        events = await _collect(handle)
        with pytest.raises(UsageError):
            await handle.send("more")
    error = _one_terminal(events)
    assert isinstance(error, Error) and error.code == "cancelled"
    assert not _cli_children()


async def test_auth_failure_is_auth_failed(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.http_error(401, "invalid x-api-key"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="hi", cwd=workspace))
        with pytest.raises(TurnFailed) as info:
            await handle.wait()
    event = info.value.event
    assert event.code == "auth_failed" and not event.retryable
    assert event.data["api_error_status"] == 401


async def test_cli_exit_is_process_exited(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.text("never seen", delay=5.0))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="slow", cwd=workspace))
        children = _cli_children()
        assert len(children) == 1
        await anthropic_server.wait_for_request(lambda r: r.is_agent)  # mid-turn
        os.kill(children[0], signal.SIGKILL)
        events = await _collect(handle)
        with pytest.raises(UsageError):
            await handle.send("more")
    error = _one_terminal(events)
    assert isinstance(error, Error) and error.code == "process_exited"
    assert error.data["exit_code"] == -signal.SIGKILL


async def test_inject_reaches_the_running_turn(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.bash("sleep 1.5 && echo slow"), AnthropicReply.text("noted"))
    async with ClaudeProvider(claude_options) as provider:
        assert provider.capabilities.supports_injection
        handle = await provider.spawn(Spec(prompt="work", cwd=workspace))
        events: list[Event] = []
        async for event in handle.events():
            events.append(event)
            if isinstance(event, ToolUse) and event.name == "shell":
                await handle.inject("EXTRA-NOTE from the operator")
    result = _one_terminal(events)
    assert isinstance(result, Result) and result.text == "noted"
    assert anthropic_server.agent_requests[-1].contains("EXTRA-NOTE from the operator")
    assert not any(isinstance(e, System) and e.subtype == "inject_late" for e in events)


async def test_output_schema_gives_structured_result(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(
        AnthropicReply(blocks=(AnthropicToolUse(name="StructuredOutput", input={"answer": 42}),))
    )
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="answer", cwd=workspace, output_schema=schema))
        events = await _collect(handle)
    result = _one_terminal(events)
    assert isinstance(result, Result) and result.structured == {"answer": 42}
    assert not any(isinstance(e, ToolUse) and e.name == "approval" for e in events)


async def test_default_deny_declines_other_tools(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    # Reads inside the workspace are judged on their own (issue 16); a subagent tool is left to the default.
    anthropic_server.enqueue(
        AnthropicReply.tool_use("Agent", {"description": "helper", "prompt": "look around"}),
        AnthropicReply.text("could not delegate"),
    )
    spec = Spec(prompt="delegate", cwd=workspace, permission=PermissionConfig(default="deny"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(spec)
        events = await _collect(handle)
    assert isinstance(_one_terminal(events), Result)
    denied = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert [d.data["rule"] for d in denied] == ["default-deny"]
    assert denied[0].data["kind"] == "tool" and denied[0].data["tool"] == "builtin:Agent"
    block = anthropic_server.agent_requests[-1].tool_results()[-1]
    assert "default-deny" in anthropic_server.agent_requests[-1].tool_result_text(block)


async def test_spec_env_is_in_the_environment_of_bash_commands(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(AnthropicReply.bash('echo "seen=$AF_TASK_VAR."'), AnthropicReply.text("ok"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="run echo", cwd=workspace, env={"AF_TASK_VAR": "1 2"}))
        events = await _collect(handle)
    assert isinstance(_one_terminal(events), Result)
    outputs = [e.output for e in events if isinstance(e, ToolResult) and not e.synthetic]
    assert any("seen=1 2." in out for out in outputs), outputs


async def test_an_unread_handle_coalesces_its_deltas_and_a_read_one_is_not_held_up(
    anthropic_server: ScriptedAnthropicServer, claude_home: Path, workspace: Path
) -> None:
    flood = 3000  # one-character text deltas, into a handle nobody reads while its turn runs

    def responder(request: AnthropicRequest) -> AnthropicReply | None:
        if "flood" in " ".join(request.user_texts()):
            return AnthropicReply(blocks=(AnthropicText(text="x" * flood, chunks=["x"] * flood),))
        return AnthropicReply(blocks=(AnthropicText(text="probe reply", chunks=["probe ", "reply"]),))

    anthropic_server.responder = responder
    options = ClaudeOptions(env=scripted_claude_env(anthropic_server, claude_home), event_buffer=50)
    async with ClaudeProvider(options) as provider:
        unread = await provider.spawn(Spec(prompt="flood", cwd=workspace))
        probe = await provider.spawn(Spec(prompt="probe", cwd=workspace))
        probed = await asyncio.wait_for(_collect(probe), 30)
        # Its end arrives although nobody reads (polled: any event to await would be a read).
        for _ in range(600):
            if not unread.running:
                break
            await asyncio.sleep(0.05)
        assert not unread.running
        events = await _collect(unread)
    assert isinstance(_one_terminal(events), Result)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "x" * flood, "no text lost"
    markers = [e for e in events if isinstance(e, System) and e.subtype == "events_coalesced"]
    assert len(markers) == 1 and markers[0].data == {"bound": 50}
    assert len(events) < 50 + 20, "the queue stayed near its bound"
    assert isinstance(_one_terminal(probed), Result) and _one_terminal(probed).text == "probe reply"
    assert not [e for e in probed if isinstance(e, System) and e.subtype == "events_coalesced"]


async def test_interrupt_stops_the_turn_and_send_continues_the_session(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    marker = workspace / "finished.txt"
    # a script (Claude Code refuses a bare long `sleep` itself), interrupted while it runs
    started = workspace / "started"
    os.mkfifo(started)  # the script says it runs by writing to it; the test waits for that
    script = workspace / "slow.sh"
    script.write_text(f"#!/bin/sh\necho started > '{started}'\nsleep 60\ntouch '{marker}'\n")
    anthropic_server.enqueue(AnthropicReply.bash(f"sh {script}"), AnthropicReply.text("after the interrupt"))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="first question", cwd=workspace))
        seen: list[Event] = []
        async for event in handle.events():
            seen.append(event)
            if isinstance(event, ToolUse) and event.name == "shell":
                await asyncio.wait_for(asyncio.to_thread(started.read_text), 30)  # the command runs
                await handle.interrupt()
        error = _one_terminal(seen)
        assert isinstance(error, Error) and error.code == "cancelled" and not error.retryable
        await handle.interrupt()  # no turn running: a no-op
        await handle.send("second question")
        result = await handle.wait()
        assert result.session_id == handle.session_id
        assert len(_cli_children()) == 1  # the same CLI process goes on
        assert not _running(str(script))  # the command was killed with the turn
    assert result.text == "after the interrupt"
    _, second = anthropic_server.agent_requests  # the interrupted turn asked the model nothing more
    assert second.contains("first question") and second.last_user_text.startswith("second question")
    assert not marker.exists()


async def test_max_turns_bounds_each_turn_s_model_round_trips(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    anthropic_server.enqueue(
        AnthropicReply.bash("echo one"),
        AnthropicReply.bash("echo two"),
        AnthropicReply.bash("echo never"),  # a third round trip: over the limit, never asked for
    )
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="go", cwd=workspace, max_turns=2))
        events = await _collect(handle)
        error = _one_terminal(events)
        assert isinstance(error, Error) and error.code == "turn_failed" and not error.retryable
        assert error.data["subtype"] == "error_max_turns"
        assert len(anthropic_server.agent_requests) == 2
        assert [e.output.strip() for e in events if isinstance(e, ToolResult) and not e.synthetic] == [
            "one",
            "two",
        ]
        # the limit is per turn: the next one has its own two round trips
        anthropic_server.enqueue(AnthropicReply.text("fresh count"))
        await handle.send("again")
        result = await handle.wait()
    assert result.text == "fresh count"


async def test_max_cost_usd_bounds_what_the_session_spends(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    # Each scripted request costs about $0.0003; Claude Code checks the budget between requests.
    anthropic_server.enqueue(*[AnthropicReply.bash(f"echo step-{i}") for i in range(8)])
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="go", cwd=workspace, max_cost_usd=0.0005))
        events = await _collect(handle)
        error = _one_terminal(events)
        assert isinstance(error, Error) and error.code == "turn_failed" and not error.retryable
        assert error.data["subtype"] == "error_max_budget_usd"
        ran = [e for e in events if isinstance(e, ToolResult) and not e.synthetic]
        assert 1 <= len(ran) < 8
        # the budget is the session's (its CLI's): a follow-up turn finds it spent
        requests = len(anthropic_server.agent_requests)
        await handle.send("more")
        follow_up = _one_terminal(await _collect(handle))
    assert isinstance(follow_up, Error) and follow_up.data["subtype"] == "error_max_budget_usd"
    assert len(anthropic_server.agent_requests) == requests


async def test_a_turn_s_own_model_then_the_session_s_again(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    """``send(model=...)`` switches the model for that turn only (issue 32); settings the CLI fixes at
    start are ``Unsupported``, naming the setting, and nothing is sent."""
    anthropic_server.enqueue(*(AnthropicReply.text(f"answer {n}") for n in range(3)))
    async with ClaudeProvider(claude_options) as provider:
        handle = await provider.spawn(Spec(prompt="first", cwd=workspace, model="claude-sonnet-4-5"))
        await handle.wait()
        for setting, value in (("sandbox", "read-only"), ("approval_policy", "untrusted"), ("cwd", ".")):
            with pytest.raises(Unsupported, match=setting):
                await handle.send("refused", **{setting: value})
        with pytest.raises(UsageError):
            await handle.send("refused", model=" ")
        await handle.send("second", model="claude-haiku-4-5")
        assert (await handle.wait()).text == "answer 1"
        await handle.send("third")
        assert (await handle.wait()).text == "answer 2"
    models = [r.body["model"] for r in anthropic_server.agent_requests]
    assert models == ["claude-sonnet-4-5", "claude-haiku-4-5", "claude-sonnet-4-5"]
    assert not any("refused" in t for r in anthropic_server.agent_requests for t in r.user_texts())
