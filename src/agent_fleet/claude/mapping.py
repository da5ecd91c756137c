"""Claude Agent SDK messages -> provider-neutral events, one ``TurnMapper`` per turn. Pure.

=============================================  ====================================================
SDK message                                    events
=============================================  ====================================================
``StreamEvent`` ``text_delta`` (main thread)   ``TextDelta(item_id=<message id>)``
``StreamEvent`` ``thinking_delta`` (main)      ``ReasoningDelta(item_id=<message id>)``
``AssistantMessage`` text / thinking blocks    ``AssistantMessage`` / ``Reasoning`` (main thread)
``AssistantMessage`` ``tool_use`` blocks        ``ToolUse`` (``Bash`` -> ``shell`` with
                                               ``{"command"}``; ``mcp__s__t`` -> ``mcp:s/t``;
                                               server tools -> ``server:<name>``)
``AssistantMessage`` with ``error``            nothing; the error classifies the ``Result``
``UserMessage`` ``tool_result`` blocks          ``ToolResult`` (``status``: completed / failed /
                                               declined by the policy)
``SystemMessage`` ``init``                      ``System(subtype="init")``
``SystemMessage`` ``compact_boundary``          ``Compaction``
other ``SystemMessage`` (progress noise        ``System(subtype="claude_system")``: its
excepted)                                      ``subtype`` and ``data``
``RateLimitEvent``                             ``RateLimits`` (``Provider.rate_limits``); a
                                               ``rejected`` one's reset becomes the turn error's
                                               ``data["retry_at"]`` (the runner's retry hint)
``ConversationResetMessage``                   ``System(subtype="conversation_reset")``
``ResultMessage`` success                       ``TokenUsage`` then ``Result`` (cost, duration,
                                               permission denials)
``ResultMessage`` error                         ``Error``: ``auth_failed`` (HTTP 401/403 or
                                               ``authentication_failed``), ``cancelled``
                                               (aborted), else by the SDK's error kind or the
                                               HTTP status: ``rate_limited`` / ``server_error``
                                               (retryable), ``bad_request``, ``model_not_found``,
                                               ``usage_limit_exceeded``, ``turn_failed``
anything else                                  ``UnknownEvent(raw=...)``
=============================================  ====================================================

Subagent messages (``parent_tool_use_id`` set) contribute their tool calls and results only.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Set
from typing import Any, Final

from claude_agent_sdk import (
    AssistantMessage as SDKAssistantMessage,
)
from claude_agent_sdk import (
    ConversationResetMessage,
    RateLimitEvent,
    ResultMessage,
    ServerToolResultBlock,
    ServerToolUseBlock,
    StreamEvent,
    SystemMessage,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    UserMessage,
)
from claude_agent_sdk.types import Message

from agent_fleet._provider.prompt import parse_structured
from agent_fleet.claude._approvals import tool_input, tool_name
from agent_fleet.events import (
    AssistantMessage,
    Compaction,
    Error,
    ErrorCode,
    Event,
    RateLimits,
    Reasoning,
    ReasoningDelta,
    Result,
    System,
    TextDelta,
    TokenUsage,
    ToolResult,
    ToolUse,
    UnknownEvent,
)

__all__ = ["QUIET_SYSTEM_SUBTYPES", "TurnMapper", "result_error", "token_usage"]

#: Progress-only system messages not worth an event (the turn's own events say the same).
QUIET_SYSTEM_SUBTYPES: Final = frozenset(
    {"status", "thinking_tokens", "session_state_changed", "hook_started", "hook_response"}
)
_INIT_KEYS: Final = ("session_id", "model", "cwd", "permissionMode", "claude_code_version", "tools")
# The SDK's structured error (``AssistantMessage.error``) first, then the HTTP status it reports.
_API_ERRORS: Final[dict[str, tuple[ErrorCode, bool]]] = {
    "rate_limit": ("rate_limited", True),
    "server_error": ("server_error", True),
    "billing_error": ("usage_limit_exceeded", False),
    "invalid_request": ("bad_request", False),
}


def _by_status(status: int | None) -> tuple[ErrorCode, bool]:
    if status == 429:
        return "rate_limited", True
    if status in (408, 409):
        return "connection_failed", True
    if status is not None and status >= 500:
        return "server_error", True  # 529: Anthropic's "overloaded"
    if status == 404:
        return "model_not_found", False
    if status in (402,):
        return "usage_limit_exceeded", False
    if status is not None and 400 <= status < 500:
        return "bad_request", False
    return "turn_failed", False


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def token_usage(
    usage: dict[str, Any] | None, prior_total: int = 0, model_usage: dict[str, Any] | None = None
) -> TokenUsage:
    """``TokenUsage`` from a Messages API usage dict (one turn's). ``input_tokens`` includes cache reads
    and writes (Anthropic counts them apart); ``total_tokens`` adds ``prior_total`` (the session so
    far); ``turn`` is this turn alone; ``context_window`` comes from the CLI's ``modelUsage``."""
    u = usage or {}
    cached = _int(u.get("cache_read_input_tokens"))
    written = _int(u.get("cache_creation_input_tokens"))
    inp = _int(u.get("input_tokens")) + cached + written
    out = _int(u.get("output_tokens"))
    details = u.get("output_tokens_details")
    thinking = _int(details.get("thinking_tokens")) if isinstance(details, dict) else 0
    turn = TokenUsage(
        input_tokens=inp,
        cached_input_tokens=cached,
        output_tokens=out,
        reasoning_output_tokens=thinking,
        total_tokens=inp + out,
        cache_write_input_tokens=written,
    )
    windows = [_int(m.get("contextWindow")) for m in (model_usage or {}).values() if isinstance(m, dict)]
    return dataclasses.replace(
        turn,
        total_tokens=prior_total + inp + out,
        turn=turn,
        context_window=max(windows) if any(windows) else None,
    )


def _result_text(msg: ResultMessage) -> str:
    errors = [e for e in msg.errors or [] if isinstance(e, str) and e.strip()]
    if isinstance(msg.result, str) and msg.result.strip():
        return msg.result.strip()
    if errors:
        return "; ".join(errors)
    if msg.subtype and msg.subtype != "success":
        return msg.subtype
    if msg.api_error_status is not None:
        return f"API error (HTTP {msg.api_error_status})"
    return "the turn failed"


def result_error(msg: ResultMessage, api_error: str | None = None, retry_at: float | None = None) -> Error:
    """The ``Error`` for a ``ResultMessage`` with ``is_error``; ``api_error`` is the turn's
    ``AssistantMessage.error`` (e.g. ``authentication_failed``) when one was seen; ``retry_at`` (epoch
    seconds) the reset of a rate limit the turn was refused by, the hint the runner's retry waits for
    (``data["retry_at"]``)."""
    status = msg.api_error_status
    code: ErrorCode
    retryable = False
    if api_error == "authentication_failed" or status in (401, 403):
        code = "auth_failed"
    elif (msg.terminal_reason or "").startswith("aborted"):
        code = "cancelled"
    elif api_error in _API_ERRORS:
        code, retryable = _API_ERRORS[api_error]
    else:
        code, retryable = _by_status(status)
    data: dict[str, Any] = {
        "subtype": msg.subtype,
        "api_error_status": status,
        "api_error": api_error,
        "terminal_reason": msg.terminal_reason,
        "stop_reason": msg.stop_reason,
        "errors": list(msg.errors or []),
        "num_turns": msg.num_turns,
    }
    if retry_at is not None and code in ("rate_limited", "usage_limit_exceeded"):
        data["retry_at"] = retry_at
    return Error(code=code, message=_result_text(msg), retryable=retryable, data=data)


def _result_output(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str))
    return ""


def _raw(msg: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(msg) and not isinstance(msg, type):
        try:
            return {"type": type(msg).__name__, **dataclasses.asdict(msg)}
        except (TypeError, ValueError):  # a field that does not deep-copy
            pass
    return {"type": type(msg).__name__, "repr": repr(msg)}


class TurnMapper:
    """Maps one turn's SDK messages to events; the last event fed for a ``ResultMessage`` is terminal.

    ``declined`` is the (live, shared) set of tool-use ids the approval policy declined, so their
    results are reported with ``status="declined"``. ``prior_total`` is the session's token total
    before this turn; ``total`` is updated when the turn's usage arrives.
    """

    def __init__(
        self, session_id: str, *, structured: bool, declined: Set[str] = frozenset(), prior_total: int = 0
    ) -> None:
        self.session_id = session_id
        self.structured = structured
        self.total = prior_total
        self._declined = declined
        self._message_id: str | None = None
        self._last_text = ""
        self._api_error: str | None = None
        self._refused_until: float | None = None  # a rate limit this turn hit: when it resets

    def feed(self, msg: Message) -> list[Event]:
        match msg:
            case StreamEvent():
                return self._stream_event(msg)
            case SDKAssistantMessage():
                return self._assistant(msg)
            case UserMessage():
                return self._user(msg)
            case ResultMessage():
                return self._result(msg)
            case SystemMessage(subtype="init"):
                data: dict[str, Any] = {k: msg.data[k] for k in _INIT_KEYS if k in msg.data}
                return [System(subtype="init", data=data)]
            case SystemMessage(subtype="compact_boundary"):
                return [Compaction()]
            case SystemMessage():
                if msg.subtype in QUIET_SYSTEM_SUBTYPES:
                    return []
                return [
                    System(subtype="claude_system", data={"subtype": msg.subtype, "data": dict(msg.data)})
                ]
            case RateLimitEvent():
                info = msg.rate_limit_info
                if info.status == "rejected" and info.resets_at is not None:
                    self._refused_until = float(info.resets_at)
                elif info.status != "rejected":
                    self._refused_until = None
                return [
                    RateLimits(
                        used_percent=info.utilization * 100 if info.utilization is not None else None,
                        resets_at=float(info.resets_at) if info.resets_at is not None else None,
                        reached=info.status == "rejected",
                        raw=dict(info.raw),
                    )
                ]
            case ConversationResetMessage():
                return [System(subtype="conversation_reset", data={"session_id": msg.session_id})]
            case _:
                return [UnknownEvent(raw=_raw(msg))]

    # -- per message type ----------------------------------------------------------------------------

    def _stream_event(self, msg: StreamEvent) -> list[Event]:
        if msg.parent_tool_use_id is not None:
            return []
        event = msg.event
        match event.get("type"):
            case "message_start":
                message = event.get("message")
                if isinstance(message, dict) and isinstance(message.get("id"), str):
                    self._message_id = message["id"]
            case "content_block_delta":
                delta = event.get("delta")
                if isinstance(delta, dict) and delta.get("type") == "text_delta":
                    text = delta.get("text")
                    if isinstance(text, str) and text:
                        return [TextDelta(text=text, item_id=self._message_id)]
                if isinstance(delta, dict) and delta.get("type") == "thinking_delta":
                    thinking = delta.get("thinking")
                    if isinstance(thinking, str) and thinking:
                        return [ReasoningDelta(text=thinking, item_id=self._message_id)]
        return []

    def _assistant(self, msg: SDKAssistantMessage) -> list[Event]:
        if msg.error is not None:
            self._api_error = msg.error  # reported by the ResultMessage that follows
            return []
        main = msg.parent_tool_use_id is None
        item_id = msg.message_id
        events: list[Event] = []
        for block in msg.content:
            match block:
                case TextBlock(text=text) if main:
                    self._last_text = text
                    events.append(AssistantMessage(text=text, item_id=item_id))
                case ThinkingBlock(thinking=thinking) if main:
                    if thinking:
                        events.append(Reasoning(text=thinking, item_id=item_id))
                case ToolUseBlock(id=use_id, name=name, input=value):
                    events.append(ToolUse(id=use_id, name=tool_name(name), input=tool_input(name, value)))
                case ServerToolUseBlock(id=use_id, name=name, input=value):
                    events.append(ToolUse(id=use_id, name=f"server:{name}", input=dict(value)))
                case ToolResultBlock():
                    events.append(self._tool_result(block))
                case ServerToolResultBlock(tool_use_id=use_id, content=content):
                    events.append(ToolResult(id=use_id, output=json.dumps(content), status="completed"))
        return events

    def _tool_result(self, block: ToolResultBlock) -> ToolResult:
        if block.tool_use_id in self._declined:
            status = "declined"
        else:
            status = "failed" if block.is_error else "completed"
        return ToolResult(
            id=block.tool_use_id,
            output=_result_output(block.content),
            is_error=bool(block.is_error),
            status=status,
        )

    def _user(self, msg: UserMessage) -> list[Event]:
        if isinstance(msg.content, str):
            return []  # an echo of a prompt
        return [self._tool_result(b) for b in msg.content if isinstance(b, ToolResultBlock)]

    def _result(self, msg: ResultMessage) -> list[Event]:
        if msg.is_error:
            return [result_error(msg, self._api_error, self._refused_until)]
        usage = token_usage(msg.usage, self.total, msg.model_usage)
        self.total = usage.total_tokens
        text = msg.result if isinstance(msg.result, str) else self._last_text
        structured: Any = None
        if self.structured:
            structured = (
                msg.structured_output if msg.structured_output is not None else parse_structured(text)
            )
        return [
            usage,
            Result(
                session_id=self.session_id,
                turn_id=None,
                text=text,
                usage=usage,
                structured=structured,
                cost_usd=msg.total_cost_usd,
                duration_ms=msg.duration_ms,
                permission_denials=tuple(d for d in msg.permission_denials or () if isinstance(d, dict)),
            ),
        ]
