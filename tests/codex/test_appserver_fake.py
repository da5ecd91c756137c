"""CodexProvider over real pipes against a scripted fake app-server: server requests and approvals."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Error, PermissionConfig, Result, Spec, System, TextDelta, ToolResult, ToolUse
from agent_fleet._provider.stream import DEFAULT_EVENT_BUFFER
from agent_fleet.codex import CodexOptions, CodexProvider, SpawnPlan, Untranslated, plan_spawn
from agent_fleet.events import AssistantMessage, Diff, Event, McpServerStatus, RateLimits, UnknownEvent
from agent_fleet.policy import ApprovalRequest, Decision

FAKE = Path(__file__).with_name("fake_app_server.py")


def _options(tmp_path: Path, scenario: list[dict[str, Any]], **kw: Any) -> CodexOptions:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return CodexOptions(codex_bin=wrapper, env={"FAKE_SCENARIO": json.dumps(scenario)}, **kw)


async def _run(options: CodexOptions, spec: Spec) -> tuple[list[Event], list[dict[str, Any]]]:
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(spec)
        events = [e async for e in handle.events()]
    result = events[-1]
    assert isinstance(result, Result)
    return events, json.loads(result.text)


async def _drain(handle: Any) -> list[Event]:
    return [e async for e in handle.events()]


def _cmd(command: str) -> dict[str, Any]:
    return {"method": "item/commandExecution/requestApproval", "params": {"itemId": "c1", "command": command}}


async def test_command_approvals_accept_and_decline_with_audit(tmp_path: Path) -> None:
    scenario = [_cmd("/bin/bash -lc 'ls -la'"), _cmd("/bin/bash -lc 'git reset --hard'")]
    events, answers = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path))
    assert answers == [
        {"id": "srv-thr-1-0", "result": {"decision": "acceptForSession"}},
        {"id": 5001, "result": {"decision": "decline"}},
    ]
    denied = [e for e in events if isinstance(e, System) and e.subtype == "approval_denied"]
    assert len(denied) == 1
    assert denied[0].data["rule"] == "git-reset-hard" and "git reset --hard" in denied[0].data["command"]
    synthetic = [e for e in events if isinstance(e, ToolUse | ToolResult) and e.synthetic]
    assert [type(e).__name__ for e in synthetic] == ["ToolUse", "ToolResult", "ToolUse", "ToolResult"]


async def test_default_deny_and_allow_patterns(tmp_path: Path) -> None:
    scenario = [_cmd("/bin/bash -lc 'pytest -q'"), _cmd("/bin/bash -lc 'make deploy'")]
    permission = PermissionConfig(allow_patterns=(r"^pytest\b",), default="deny")
    _, answers = await _run(
        _options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path, permission=permission)
    )
    assert [a["result"]["decision"] for a in answers] == ["acceptForSession", "decline"]


async def test_file_change_paths_come_from_the_started_item(tmp_path: Path) -> None:
    # v2 file-change approvals carry only the item id; the paths were announced at item/started.
    item = {"type": "fileChange", "id": "fc1", "changes": [{"path": "src/a.py", "kind": {"type": "add"}}]}
    add = {"type": "add", "content": "x"}  # a legacy FileChange as codex writes it
    scenario = [
        {"method": "item/started", "params": {"item": item}, "notify": True},
        {"method": "item/fileChange/requestApproval", "params": {"itemId": "fc1"}},
        {"method": "applyPatchApproval", "params": {"callId": "p1", "fileChanges": {"../../etc/pw": add}}},
        {"method": "applyPatchApproval", "params": {"callId": "p2", "fileChanges": {"src/ok.py": add}}},
    ]
    _, answers = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path))
    assert answers[0]["result"] == {"decision": "acceptForSession"}
    assert "denied" in answers[1]["result"]["decision"]
    assert answers[2]["result"] == {"decision": "approved_for_session"}


async def test_legacy_exec_approval_routed_by_conversation_id(tmp_path: Path) -> None:
    scenario = [
        {"method": "execCommandApproval", "params": {"callId": "x", "command": ["sudo", "rm", "-rf", "/"]}},
        {"method": "execCommandApproval", "params": {"callId": "y", "command": ["/bin/bash", "-lc", "ls"]}},
    ]
    _, answers = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path))
    assert answers[0]["result"]["decision"]["denied"]["rejection"]
    assert answers[1]["result"] == {"decision": "approved_for_session"}


async def test_permissions_request_grants_or_withholds(tmp_path: Path) -> None:
    asked = {"network": {"enabled": True}, "fileSystem": {"write": ["build"]}}
    scenario = [
        {"method": "item/permissions/requestApproval", "params": {"itemId": "p", "permissions": asked}}
    ]
    _, allowed = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path))
    # network is not in the (empty) allow-list; the write root inside the workspace is, for the turn
    assert allowed[0]["result"] == {"permissions": {"fileSystem": {"write": ["build"]}}, "scope": "turn"}
    deny = PermissionConfig(default="deny")
    _, denied = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path, permission=deny))
    assert denied[0]["result"] == {"permissions": {}, "scope": "turn"}


async def test_unhandled_server_request_gets_method_not_found(tmp_path: Path) -> None:
    # (requestUserInput used to be the example; it is answered now: see test_server_requests_fake.py)
    scenario = [{"method": "attestation/generate", "params": {}}]
    events, answers = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path))
    assert answers[0]["error"]["code"] == -32601
    notices = [e for e in events if isinstance(e, System) and e.subtype == "unhandled_server_request"]
    assert notices and notices[0].data["method"] == "attestation/generate"


async def test_approval_handler_refines_but_cannot_override_builtin_declines(tmp_path: Path) -> None:
    seen: list[str] = []

    async def handler(request: ApprovalRequest, decision: Decision) -> Decision:
        seen.append(str(request.command))
        return Decision(action="allow_once")  # would accept anything, if asked

    scenario = [_cmd("npm test"), _cmd("rm -rf /")]
    options = _options(tmp_path, scenario, approval_handler=handler)
    _, answers = await _run(options, Spec(prompt="p", cwd=tmp_path))
    assert [a["result"]["decision"] for a in answers] == ["accept", "decline"]
    assert seen == ["npm test"]  # never consulted for a built-in decline


async def test_strict_profile_sends_unproven_commands_to_the_handler(tmp_path: Path) -> None:
    seen: list[tuple[str, str | None]] = []

    async def handler(request: ApprovalRequest, decision: Decision) -> Decision:
        seen.append((str(request.command), decision.rule))
        return Decision(action="allow_once")

    scenario = [_cmd("bash -lc 'git status'"), _cmd("bash -lc ./scripts/release.sh"), _cmd("rm -rf /")]
    strict = PermissionConfig(profile="strict")
    options = _options(tmp_path, scenario, approval_handler=handler)
    _, answers = await _run(options, Spec(prompt="p", cwd=tmp_path, permission=strict))
    assert [a["result"]["decision"] for a in answers] == ["accept", "accept", "decline"]
    assert seen == [("bash -lc 'git status'", None), ("bash -lc ./scripts/release.sh", "strict-unproven")]
    _, answers = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path, permission=strict))
    assert [a["result"]["decision"] for a in answers] == ["acceptForSession", "decline", "decline"]


async def test_approval_handler_that_raises_declines_and_reports(tmp_path: Path) -> None:
    async def handler(request: ApprovalRequest, decision: Decision) -> Decision:
        raise RuntimeError("reviewer offline")

    options = _options(tmp_path, [_cmd("make build")], approval_handler=handler)
    events, answers = await _run(options, Spec(prompt="p", cwd=tmp_path))
    assert answers[0]["result"] == {"decision": "decline"}
    failed = [e for e in events if isinstance(e, System) and e.subtype == "approval_handler_failed"]
    assert failed and "reviewer offline" in failed[0].data["error"]


async def test_slow_approval_handler_does_not_block_other_threads(tmp_path: Path) -> None:
    release = asyncio.Event()

    async def handler(request: ApprovalRequest, decision: Decision) -> Decision:
        if request.command == "bash -lc slow":
            await release.wait()  # a human parks this one
        return decision

    options = _options(tmp_path, [_cmd("bash -lc ${CMD}")], approval_handler=handler)
    async with CodexProvider(options) as provider:
        slow = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        fast = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        result = await asyncio.wait_for(fast.wait(), 5)
        assert json.loads(result.text)[0]["result"]["decision"] == "acceptForSession"
        release.set()
        await asyncio.wait_for(slow.wait(), 5)


async def test_list_models_follows_pages(tmp_path: Path) -> None:
    async with CodexProvider(_options(tmp_path, [])) as provider:
        assert [m.id for m in await provider.list_models()] == ["a", "b"]


async def test_every_notice_reaches_someone(tmp_path: Path) -> None:
    # Connection-wide notices reach the provider's stream and the live sessions; a thread's notices
    # that arrive between turns come with its next turn; rate limits are an event and a property.
    options = _options(tmp_path, [])
    options = dataclasses.replace(options, env={**options.env, "FAKE_NOTICES": "1"})
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        first = await asyncio.wait_for(_drain(handle), 10)
        await handle.send("again")
        second = await asyncio.wait_for(_drain(handle), 10)
        board: list[Event] = []
        async with asyncio.timeout(10):
            async for event in provider.notices():
                board.append(event)
                if isinstance(event, RateLimits):
                    break
    assert provider.rate_limits == RateLimits(
        used_percent=95.0,
        resets_at=1700000000.0,
        raw={"primary": {"usedPercent": 95, "resetsAt": 1700000000, "windowDurationMins": 300}},
    )
    [status] = [e for e in first if isinstance(e, McpServerStatus)]
    assert status == McpServerStatus(name="docs", status="ready", session_id=handle.session_id)
    # connection-wide: delivered to the live session (or kept for its next turn), once: each turn
    # repeats the same state, which is not news
    assert sum(isinstance(e, RateLimits) for e in first + second) == 1
    assert isinstance(first[-1], Result)
    # a late item of the finished turn is not news for the next one; usage has each turn's share
    assert [e.text for e in second if isinstance(e, AssistantMessage)] == ["[]"]
    for events in (first, second):
        result = events[-1]
        assert isinstance(result, Result) and result.usage is not None and result.usage.turn is not None
        assert result.usage.turn.total_tokens == 50
    [named] = [e for e in second if isinstance(e, System) and e.subtype == "notice"]
    assert named.data == {
        "method": "thread/name/updated",
        "threadId": handle.session_id,
        "threadName": "named",
    }
    warning = board[0]
    assert isinstance(warning, System) and warning.subtype == "warning"
    assert warning.data["method"] == "configWarning" and warning.data["summary"] == "no bubblewrap"


async def test_unsupported_spec_fields_are_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Today's app-server carries every Spec field; a field it cannot must still reach the caller.
    from agent_fleet.codex import appserver

    def plan_with_a_gap(
        spec: Spec, base_config: Mapping[str, Any] | None = None, box: Any = None
    ) -> SpawnPlan:
        plan = plan_spawn(spec, base_config, box)
        return dataclasses.replace(plan, untranslated=(Untranslated("future_field", "not supported"),))

    monkeypatch.setattr(appserver, "plan_spawn", plan_with_a_gap)
    events, _ = await _run(_options(tmp_path, []), Spec(prompt="p", cwd=tmp_path))
    notices = [e for e in events if isinstance(e, System) and e.subtype == "spec_unsupported"]
    assert [n.data for n in notices] == [{"field": "future_field", "reason": "not supported"}]


async def test_bad_user_regex_fails_before_any_wire_traffic(tmp_path: Path) -> None:
    async with CodexProvider(_options(tmp_path, [])) as provider:
        with pytest.raises(ValueError, match=r"\(unclosed"):
            await provider.spawn(Spec(prompt="p", permission=PermissionConfig(allow_patterns=("(unclosed",))))
        assert provider.connection.requests_sent["thread/start"] == 0


async def _parked(tmp_path: Path, turns: int) -> tuple[CodexOptions, asyncio.Event, asyncio.Event]:
    """Options whose approval handler holds every turn until ``gate`` is set; ``all_parked`` is set
    once ``turns`` turns are held there (mid-turn, for sure)."""
    gate, all_parked = asyncio.Event(), asyncio.Event()
    parked = 0

    async def handler(request: ApprovalRequest, decision: Decision) -> Decision:
        nonlocal parked
        parked += 1
        if parked == turns:
            all_parked.set()
        await gate.wait()  # keeps the turn running until the race is over
        return decision

    return _options(tmp_path, [_cmd("make")], approval_handler=handler), gate, all_parked


@pytest.mark.parametrize("order", ["stop-then-kill", "kill-then-stop", "together"])
async def test_stop_and_crash_race_in_any_order(tmp_path: Path, order: str) -> None:
    options, gate, all_parked = await _parked(tmp_path, turns=3)
    async with CodexProvider(options) as provider:
        handles = [await provider.spawn(Spec(prompt="p", cwd=tmp_path)) for _ in range(3)]
        await asyncio.wait_for(all_parked.wait(), 5)
        pid = provider.pid
        assert pid is not None

        async def kill() -> None:
            os.kill(pid, signal.SIGKILL)

        async def stop_all() -> None:
            await asyncio.gather(*(h.stop() for h in handles))

        if order == "stop-then-kill":
            await stop_all()
            await kill()
        elif order == "kill-then-stop":
            await kill()
            await asyncio.sleep(0.2)
            await stop_all()
        else:
            await asyncio.gather(stop_all(), kill())
        streams = await asyncio.wait_for(asyncio.gather(*(_drain(h) for h in handles)), 5)
        gate.set()
    for events in streams:
        terminals = [e for e in events if isinstance(e, Result | Error)]
        assert len(terminals) == 1 and events[-1] is terminals[0]
        assert terminals[0].code in ("cancelled", "app_server_crashed")  # type: ignore[union-attr]


async def _drain(handle: object) -> list[Event]:
    return [e async for e in handle.events()]  # type: ignore[attr-defined]


async def test_fifty_flooded_unread_handles_do_not_delay_a_spawn(tmp_path: Path) -> None:
    # Our dispatch alone (the fake peer costs nothing): 50 handles with 2,000 unread events each.
    options = _options(tmp_path, [])
    options = CodexOptions(codex_bin=options.codex_bin, env={**options.env, "FAKE_FLOOD": "2000"})
    async with CodexProvider(options) as provider:
        unread = await asyncio.gather(*(provider.spawn(Spec(prompt="p", cwd=tmp_path)) for _ in range(50)))
        await asyncio.sleep(0.5)
        started = time.monotonic()
        probe = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        elapsed = time.monotonic() - started
        await probe.wait()
        assert len(unread) == 50
    assert elapsed < 1.0


async def test_shell_snapshot_is_off_by_default_and_user_config_wins(tmp_path: Path) -> None:
    argv_file = tmp_path / "argv"
    wrapper = tmp_path / "recording-codex"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {argv_file}\nexec {sys.executable} {FAKE}\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    async with CodexProvider(CodexOptions(codex_bin=wrapper)):
        pass
    assert "features.shell_snapshot=false" in argv_file.read_text().splitlines()
    async with CodexProvider(CodexOptions(codex_bin=wrapper, config={"features.shell_snapshot": True})):
        pass
    args = argv_file.read_text().splitlines()
    assert "features.shell_snapshot=true" in args and "features.shell_snapshot=false" not in args


async def test_an_unread_bounded_handle_coalesces_instead_of_backing_up(tmp_path: Path) -> None:
    # 20,000 one-character deltas into a handle nobody reads, with event_buffer=100: the turn still
    # completes (nothing waits, so no backlog builds up in the connection), the queue stays small,
    # no text is lost, and another handle on the same connection is not held up.
    options = _options(tmp_path, [])
    options = CodexOptions(
        codex_bin=options.codex_bin, env={**options.env, "FAKE_FLOOD": "20000"}, event_buffer=100
    )
    async with CodexProvider(options) as provider:
        unread = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        probe = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        probed = await asyncio.wait_for(_drain(probe), 10)
        for _ in range(500):  # the unread turn's terminal arrives although nobody reads it
            if not unread.running:
                break
            await asyncio.sleep(0.01)
        assert not unread.running
        events = await _drain(unread)
    assert isinstance(events[-1], Result)
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "x" * 20000
    markers = [e for e in events if isinstance(e, System) and e.subtype == "events_coalesced"]
    assert len(markers) == 1 and markers[0].data == {"bound": 100}
    assert len(events) <= 100 + 20000 // 4096 + 10
    # the handle that was read got all of its own, whole (a bound of 100 is below one burst of the pipe:
    # its deltas may arrive merged too, see the next test for the default)
    assert isinstance(probed[-1], Result)
    assert "".join(e.text for e in probed if isinstance(e, TextDelta)) == "x" * 20000


async def test_with_the_default_bound_a_handle_that_is_read_gets_every_delta_as_sent(tmp_path: Path) -> None:
    options = _options(tmp_path, [])
    options = CodexOptions(codex_bin=options.codex_bin, env={**options.env, "FAKE_FLOOD": "20000"})
    assert options.event_buffer == DEFAULT_EVENT_BUFFER
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        events = await asyncio.wait_for(_drain(handle), 20)
    assert isinstance(events[-1], Result)
    assert not [e for e in events if isinstance(e, System) and e.subtype == "events_coalesced"]
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["x"] * 20000


async def test_a_human_deciding_an_approval_is_not_idle(tmp_path: Path) -> None:
    async def handler(request: ApprovalRequest, decision: Decision) -> Decision:
        await asyncio.sleep(1.2)  # four idle limits: someone thinking it over
        return decision

    options = _options(tmp_path, [_cmd("bash -lc 'make build'")], approval_handler=handler)
    _, answers = await _run(options, Spec(prompt="p", cwd=tmp_path, idle_timeout=0.3))
    assert answers[0]["result"] == {"decision": "acceptForSession"}


async def test_a_silent_peer_is_idle(tmp_path: Path) -> None:
    # The fake starts the turn and then sends nothing more: the watchdog ends it and interrupts it.
    options = _options(tmp_path, [])
    options = CodexOptions(codex_bin=options.codex_bin, env={**options.env, "FAKE_SILENT": "1"})
    async with CodexProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path, idle_timeout=0.3))
        events = await asyncio.wait_for(_drain(handle), 5)
    assert isinstance(events[-1], Error) and events[-1].code == "timeout"
    assert events[-1].data == {"idle_timeout": 0.3}


async def test_turn_diffs_and_unknown_items_keep_their_thread_and_turn(tmp_path: Path) -> None:
    # issue 16 (audit): turn/diff/updated -> Diff had no test; an unknown item type lost its ids
    diff = "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"
    scenario = [
        {"method": "turn/diff/updated", "params": {"diff": diff}, "notify": True},
        {"method": "item/completed", "params": {"item": {"type": "hologram", "id": "h1"}}, "notify": True},
    ]
    events, _ = await _run(_options(tmp_path, scenario), Spec(prompt="p", cwd=tmp_path))
    assert [e for e in events if isinstance(e, Diff)] == [Diff(diff=diff, turn_id="turn-thr-1")]
    [unknown] = [e for e in events if isinstance(e, UnknownEvent)]
    assert unknown.raw["method"] == "item/completed"
    params = unknown.raw["params"]
    assert (params["threadId"], params["turnId"], params["item"]["type"]) == (
        "thr-1",
        "turn-thr-1",
        "hologram",
    )
