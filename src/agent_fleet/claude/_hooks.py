"""Callers' own Claude Code hooks (``ClaudeOptions.hooks``), merged after agent-fleet's.

agent-fleet's ``PreToolUse`` hook comes first and answers "ask" for every tool, so that the CLI asks
``can_use_tool`` (the approval policy) about every call. A caller's hooks run after it, and whatever
they answer can add a refusal or context, never an accept:

- ``PreToolUse``: ``permissionDecision`` ``deny`` and ``ask`` are kept, ``allow`` and ``defer`` are
  dropped (the policy decides); an ``updatedInput`` is kept, since the CLI then asks ``can_use_tool``
  about the updated input (tested against the bundled CLI, 2.1.330);
- ``PermissionRequest``: a ``decision`` with ``behavior: "deny"`` is kept, any other dropped. The CLI
  runs these hooks alongside ``can_use_tool`` and takes the first answer: a caller's "allow" landing
  before the policy's answer (a person still deciding) would run a call the policy then declines --
  shown end to end before this guard existed;
- the deprecated top-level ``decision: "approve"`` is dropped (``"block"`` kept);
- anything else that can grant (``updatedPermissions``: permission rules for the session) and every
  field not known here to be harmless is dropped: a newer CLI's new fields are not guessed at.

What a caller's hook may still do: refuse (``deny``, ``block``, ``continue: false``), add context and
messages, rewrite a tool's input before it is judged, answer MCP elicitations, observe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from claude_agent_sdk import HookContext, HookInput, HookJSONOutput, HookMatcher

from agent_fleet.errors import UsageError

__all__ = ["guard", "merged", "sanitize"]

#: Top-level fields of a hook's answer that cannot accept anything.
_TOP: Final = frozenset(
    {"continue_", "continue", "suppressOutput", "stopReason", "systemMessage", "reason", "async_", "async"}
    | {"asyncTimeout"}
)
#: ``hookSpecificOutput`` fields that cannot accept anything (context, display, titles, watches, an
#: elicitation's answer, a denied call's retry, which is judged again).
_SPECIFIC: Final = frozenset(
    {"hookEventName", "permissionDecisionReason", "additionalContext", "updatedMCPToolOutput"}
    | {"suppressOriginalPrompt", "initialUserMessage", "sessionTitle", "watchPaths", "reloadSkills"}
    | {"retry", "action", "content", "displayContent"}
)
#: The permission answers a caller's hook may give about a tool call: refusals and "ask".
_TOOL_DECISIONS: Final = frozenset({"deny", "ask"})


def sanitize(event: str, output: Any) -> Any:
    """A caller's hook ``output`` for ``event`` without anything that could accept (module docstring).
    Something that is not an answer object goes through as it is: the SDK reports it as the hook's
    failure."""
    if not isinstance(output, Mapping):
        return output
    kept: dict[str, Any] = {k: v for k, v in output.items() if k in _TOP}
    if output.get("decision") == "block":
        kept["decision"] = "block"
    specific = output.get("hookSpecificOutput")
    if isinstance(specific, Mapping):
        inner: dict[str, Any] = {k: v for k, v in specific.items() if k in _SPECIFIC}
        decision = specific.get("permissionDecision")
        if event == "PreToolUse":
            if decision in _TOOL_DECISIONS:
                inner["permissionDecision"] = decision
            if "updatedInput" in specific:
                inner["updatedInput"] = specific["updatedInput"]
        elif decision is not None and event != "PermissionRequest":
            inner["permissionDecision"] = decision  # e.g. a model switch: not a tool call
        verdict = specific.get("decision")
        if isinstance(verdict, Mapping) and verdict.get("behavior") == "deny":
            inner["decision"] = {
                k: v for k, v in verdict.items() if k in ("behavior", "message", "interrupt")
            }
        kept["hookSpecificOutput"] = inner
    return kept


def guard(event: str, callback: Any) -> Any:
    """``callback`` (a caller's hook) with its answers passed through ``sanitize``."""

    async def guarded(hook_input: HookInput, tool_use_id: str | None, context: HookContext) -> HookJSONOutput:
        output: HookJSONOutput = sanitize(event, await callback(hook_input, tool_use_id, context))
        return output

    return guarded


def merged(ours: Sequence[HookMatcher], theirs: Mapping[str, Sequence[Any]]) -> dict[Any, list[HookMatcher]]:
    """agent-fleet's ``PreToolUse`` matchers, then the caller's matchers per event, each callback
    guarded. Raises ``UsageError`` for something that is not a ``claude_agent_sdk.HookMatcher``."""
    hooks: dict[Any, list[HookMatcher]] = {"PreToolUse": list(ours)}
    for event, matchers in theirs.items():
        if (
            not isinstance(event, str)
            or isinstance(matchers, str | bytes)
            or not isinstance(matchers, Sequence)
        ):
            raise UsageError("ClaudeOptions.hooks maps hook event names to lists of HookMatcher")
        for matcher in matchers:
            if not isinstance(matcher, HookMatcher):
                raise UsageError(
                    f"ClaudeOptions.hooks[{event!r}]: expected claude_agent_sdk.HookMatcher, "
                    f"not {type(matcher).__name__}"
                )
            wrapped = [guard(event, callback) for callback in matcher.hooks]
            hooks.setdefault(event, []).append(dataclasses.replace(matcher, hooks=wrapped))
    return hooks
