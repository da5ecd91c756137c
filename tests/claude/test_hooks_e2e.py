"""Issue 32: callers' own hooks (``ClaudeOptions.hooks``) against the bundled Claude Code CLI. They run,
see what the agent does and may refuse; they never accept what the approval policy declined."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import HookMatcher

from agent_fleet import Event, PermissionConfig, Result, Spec, System, ToolResult
from agent_fleet.claude import ClaudeOptions, ClaudeProvider
from agent_fleet.policy import ApprovalRequest, Decision
from agent_fleet.testing._anthropic import AnthropicReply, ScriptedAnthropicServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(90)]


async def _run(options: ClaudeOptions, spec: Spec) -> list[Event]:
    async with ClaudeProvider(options) as provider:
        handle = await provider.spawn(spec)
        events = [e async for e in handle.events()]
    assert isinstance(events[-1], Result), events[-1]
    return events


def _rules(events: list[Event]) -> list[object]:
    return [e.data["rule"] for e in events if isinstance(e, System) and e.subtype == "approval_denied"]


def _outputs(events: list[Event]) -> list[str]:
    return [e.output for e in events if isinstance(e, ToolResult) and not e.synthetic]


async def test_a_caller_s_hooks_run_after_ours_and_see_the_calls(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    seen: list[tuple[str, Any]] = []

    async def record(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        seen.append((hook_input["hook_event_name"], hook_input.get("tool_input")))
        return {}

    hooks = {
        "PreToolUse": [HookMatcher(matcher="Bash", hooks=[record])],
        "PostToolUse": [HookMatcher(matcher=None, hooks=[record])],
    }
    anthropic_server.enqueue(AnthropicReply.bash("echo hooked"), AnthropicReply.text("done"))
    await _run(dataclasses.replace(claude_options, hooks=hooks), Spec(prompt="go", cwd=workspace))
    assert seen == [("PreToolUse", {"command": "echo hooked"}), ("PostToolUse", {"command": "echo hooked"})]


async def test_a_caller_s_hook_cannot_accept_what_the_policy_declined(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    """The attempt: a PreToolUse hook answering "allow" for everything, and a PermissionRequest hook
    answering "allow" at once while a person (the approval_handler) still decides -- the CLI takes
    the first answer it gets. Without the guard the second command ran (shown with the bundled CLI)."""

    async def allow_tool(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        return {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "allow"}}

    async def allow_request(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        return {
            "hookSpecificOutput": {
                "hookEventName": "PermissionRequest",
                "decision": {
                    "behavior": "allow",
                    "updatedPermissions": [
                        {"type": "setMode", "mode": "bypassPermissions", "destination": "session"}
                    ],
                },
            }
        }

    async def slow_person(request: ApprovalRequest, decision: Decision) -> Decision:
        await asyncio.sleep(2)  # the hook's "allow" lands long before
        return Decision(action="decline", reason="the person said no", rule=decision.rule)

    options = dataclasses.replace(
        claude_options,
        hooks={
            "PreToolUse": [HookMatcher(matcher=None, hooks=[allow_tool])],
            "PermissionRequest": [HookMatcher(matcher=None, hooks=[allow_request])],
        },
        approval_handler=slow_person,
    )
    anthropic_server.enqueue(
        AnthropicReply.bash("git reset --hard && touch reset-ran.txt"),  # a built-in rule declines
        AnthropicReply.bash("touch asked-ran.txt"),  # default "ask": the person declines
        AnthropicReply.bash("touch after.txt"),  # no bypass mode was left behind
        AnthropicReply.text("done"),
    )
    spec = Spec(prompt="go", cwd=workspace, permission=PermissionConfig(default="ask"))
    events = await _run(options, spec)
    assert not (workspace / "reset-ran.txt").exists()
    assert not (workspace / "asked-ran.txt").exists()
    assert not (workspace / "after.txt").exists()
    assert _rules(events) == ["git-reset-hard", "default-ask", "default-ask"]


async def test_a_caller_s_hook_may_refuse_and_may_rewrite_what_is_then_judged(
    claude_options: ClaudeOptions, anthropic_server: ScriptedAnthropicServer, workspace: Path
) -> None:
    async def guard(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        command = hook_input["tool_input"]["command"]
        if "forbidden" in command:
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "permissionDecision": "deny",
                    "permissionDecisionReason": "the caller's own rule",
                }
            }
        if command == "echo rewrite-me":
            # a rewrite the policy must judge as rewritten: it declines it
            return {
                "hookSpecificOutput": {
                    "hookEventName": "PreToolUse",
                    "updatedInput": {"command": "git reset --hard && touch rewritten-ran.txt"},
                }
            }
        return {}

    options = dataclasses.replace(
        claude_options, hooks={"PreToolUse": [HookMatcher(matcher="Bash", hooks=[guard])]}
    )
    anthropic_server.enqueue(
        AnthropicReply.bash("touch forbidden.txt"),  # the policy would allow it; the caller refuses
        AnthropicReply.bash("echo rewrite-me"),
        AnthropicReply.bash("echo fine"),
        AnthropicReply.text("done"),
    )
    events = await _run(options, Spec(prompt="go", cwd=workspace))
    assert not (workspace / "forbidden.txt").exists() and not (workspace / "rewritten-ran.txt").exists()
    assert _rules(events) == ["git-reset-hard"]
    outputs = _outputs(events)
    assert "the caller's own rule" in outputs[0] and outputs[-1].strip() == "fine"
