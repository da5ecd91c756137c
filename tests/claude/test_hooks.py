"""Callers' hooks may refuse, add context or rewrite input, never accept (pure; ``claude._hooks``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from claude_agent_sdk import HookMatcher

from agent_fleet.claude import ClaudeOptions
from agent_fleet.claude._hooks import merged, sanitize
from agent_fleet.errors import UsageError


def _specific(event: str, **fields: Any) -> dict[str, Any]:
    return {"hookSpecificOutput": {"hookEventName": event, **fields}}


@pytest.mark.parametrize(
    ("event", "answer", "kept"),
    [
        # a tool call: refusals and "ask" stay, an accept goes
        ("PreToolUse", _specific("PreToolUse", permissionDecision="allow"), _specific("PreToolUse")),
        ("PreToolUse", _specific("PreToolUse", permissionDecision="defer"), _specific("PreToolUse")),
        (
            "PreToolUse",
            _specific("PreToolUse", permissionDecision="deny", permissionDecisionReason="no"),
            _specific("PreToolUse", permissionDecision="deny", permissionDecisionReason="no"),
        ),
        (
            "PreToolUse",
            _specific("PreToolUse", permissionDecision="allow", updatedInput={"command": "ls"}),
            _specific("PreToolUse", updatedInput={"command": "ls"}),  # judged by the policy as updated
        ),
        # the permission request the CLI races against can_use_tool: only a refusal stays
        (
            "PermissionRequest",
            _specific(
                "PermissionRequest",
                decision={
                    "behavior": "allow",
                    "updatedInput": {},
                    "updatedPermissions": [{"type": "addRules"}],
                },
            ),
            _specific("PermissionRequest"),
        ),
        (
            "PermissionRequest",
            _specific("PermissionRequest", decision={"behavior": "deny", "message": "no", "x": 1}),
            _specific("PermissionRequest", decision={"behavior": "deny", "message": "no"}),
        ),
        # the deprecated top-level approve goes, block stays; context, messages and stops stay
        ("PreToolUse", {"decision": "approve", "reason": "r"}, {"reason": "r"}),
        (
            "Stop",
            {"decision": "block", "continue_": False, "stopReason": "s"},
            {"decision": "block", "continue_": False, "stopReason": "s"},
        ),
        (
            "PostToolUse",
            _specific("PostToolUse", additionalContext="c", updatedMCPToolOutput={"x": 1}),
            _specific("PostToolUse", additionalContext="c", updatedMCPToolOutput={"x": 1}),
        ),
        # fields not known to be harmless go (a newer CLI's are not guessed at)
        ("PreToolUse", {"newGrant": True, "systemMessage": "m"}, {"systemMessage": "m"}),
        ("PreToolUse", None, None),  # not an answer: the SDK reports the hook as failed
    ],
)
def test_answers_that_could_accept_are_dropped(event: str, answer: Any, kept: Any) -> None:
    assert sanitize(event, answer) == kept


def test_callers_matchers_come_after_ours_with_their_callbacks_guarded() -> None:
    calls: list[str] = []

    async def ours(*_: Any) -> Any:
        return {}

    async def theirs(hook_input: Any, tool_use_id: str | None, context: Any) -> Any:
        calls.append(tool_use_id or "")
        return _specific("PreToolUse", permissionDecision="allow")

    hooks = merged(
        [HookMatcher(matcher=None, hooks=[ours])],
        {"PreToolUse": [HookMatcher(matcher="Bash", hooks=[theirs], timeout=5)], "Stop": []},
    )
    assert list(hooks) == ["PreToolUse"]  # an event without matchers adds nothing
    first, second = hooks["PreToolUse"]
    assert first.hooks == [ours] and second.matcher == "Bash" and second.timeout == 5
    answer = asyncio.run(second.hooks[0]({}, "t1", {"signal": None}))  # type: ignore[arg-type]
    assert answer == _specific("PreToolUse") and calls == ["t1"]


def test_hooks_that_are_not_matchers_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="HookMatcher"):
        merged([], {"PreToolUse": [lambda *a: {}]})
    with pytest.raises(UsageError, match="lists of HookMatcher"):
        merged([], {"PreToolUse": "Bash"})
    with pytest.raises(UsageError, match="lists of HookMatcher"):
        ClaudeOptions(hooks=[HookMatcher()])  # type: ignore[arg-type]
