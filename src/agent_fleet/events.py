"""The provider-neutral event model.

Every provider maps its wire format onto these frozen dataclasses. A turn's stream is a sequence of
non-terminal events ending with exactly one terminal event: ``Result`` (success) or ``Error``.
Anything a provider does not map becomes ``UnknownEvent(raw=...)`` so newer wire versions never crash
a consumer.

A session's sub-agents (threads its agent spawned, e.g. codex ``spawn_agent``) report in the session's
own stream: their events carry ``agent``, the sub-agent's session id (None: the session's own). Events
that can carry it: ``AssistantMessage``, ``Reasoning``, ``ToolUse``, ``ToolResult``, ``ToolProgress``,
``Plan``, ``Diff``, ``Compaction``, ``WebSearch``, ``ImageView``, ``SubAgent``, ``System`` and
``UnknownEvent`` (a sub-agent's text arrives whole, as ``AssistantMessage``; its tokens are counted in
the session's ``TokenUsage``; its turn's end is a ``System(subtype="subagent_turn")``, never the
session's terminal event).

``Error.code`` is one of the closed set in ``ERROR_CODES``:

- ``app_server_crashed`` - the shared codex app-server child died while the turn ran
- ``cancelled``          - the turn was stopped by ``Handle.stop()`` or task cancellation
- ``turn_failed``        - the agent reported the turn failed for a reason not classified below
- ``auth_failed``        - the model provider rejected the credential: unauthorized (never retryable)
- ``rate_limited``       - the model API answered 429 / rate limit exceeded (retryable)
- ``server_error``       - the model API answered 5xx or said it is overloaded (retryable)
- ``connection_failed``  - the model API could not be reached or its stream dropped (retryable)
- ``bad_request``        - the model API refused the request as malformed, HTTP 400 (never retryable)
- ``context_window_exceeded`` - the conversation no longer fits the model's context (never retryable)
- ``usage_limit_exceeded``    - the account's quota or plan usage limit is spent (never retryable)
- ``model_not_found``    - the model does not exist or is not available to this account (never)
- ``timeout``            - ``Spec.timeout`` or ``Spec.idle_timeout`` expired; the turn was interrupted
- ``process_exited``     - a per-turn process exited non-zero (codex exec)
- ``protocol_error``     - the peer violated the protocol or the stream ended without a terminal event
- ``approval_failed``    - an approval could not be decided (handler raised and the turn cannot go on)

``Error.retryable`` says whether running the same turn again may succeed; ``data["retry_after"]``
(seconds) or ``data["retry_at"]`` (epoch seconds), when present, is the provider's hint of how long to
wait first (the Claude provider gives ``retry_at`` when a rate limit refused the turn; codex gives none).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "ERROR_CODES",
    "AssistantMessage",
    "Compaction",
    "Diff",
    "Error",
    "ErrorCode",
    "Event",
    "Goal",
    "ImageView",
    "McpServerStatus",
    "Plan",
    "PlanStep",
    "RateLimits",
    "Reasoning",
    "ReasoningDelta",
    "Result",
    "ReviewMode",
    "SubAgent",
    "System",
    "TerminalEvent",
    "TextDelta",
    "TokenUsage",
    "ToolProgress",
    "ToolResult",
    "ToolUse",
    "UnknownEvent",
    "WebSearch",
    "is_terminal",
]

ErrorCode = Literal[
    "app_server_crashed",
    "cancelled",
    "turn_failed",
    "auth_failed",
    "rate_limited",
    "server_error",
    "connection_failed",
    "bad_request",
    "context_window_exceeded",
    "usage_limit_exceeded",
    "model_not_found",
    "timeout",
    "process_exited",
    "protocol_error",
    "approval_failed",
]
ERROR_CODES: Final[frozenset[str]] = frozenset(ErrorCode.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A streamed fragment of assistant text; ``item_id`` groups fragments of one message."""

    text: str
    item_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """A complete assistant message (authoritative over the deltas that preceded it)."""

    text: str
    item_id: str | None = None
    phase: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning:
    """Reasoning summary or content text."""

    text: str
    item_id: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta:
    """A streamed fragment of reasoning (thinking) text; the full text follows as ``Reasoning``."""

    text: str
    item_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUse:
    """The agent invokes a tool. ``name`` is ``shell``, ``apply_patch``, ``mcp:<server>/<tool>``, ..."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    synthetic: bool = False
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of a ``ToolUse`` with the same ``id``."""

    id: str
    output: str = ""
    exit_code: int | None = None
    is_error: bool = False
    status: str | None = None
    synthetic: bool = False
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStep:
    step: str
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The agent's current plan (todo list)."""

    steps: tuple[PlanStep, ...]
    explanation: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    """Token counts; cumulative for the session where the provider reports it.

    ``turn`` is the current turn's share (the same counts, this turn only) where the provider can
    tell; ``context_window`` is the model's context window in tokens where reported."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0
    cache_write_input_tokens: int = 0
    turn: TokenUsage | None = None
    context_window: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class System:
    """Provider lifecycle and policy notices (``subtype`` names which, ``data`` carries details)."""

    subtype: str
    data: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    """The turn's aggregated diff so far (a unified diff of every file it changed); each new one replaces
    the previous for that turn."""

    diff: str
    turn_id: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Compaction:
    """The session's context was compacted (history summarised to free the context window)."""

    item_id: str | None = None
    turn_id: str | None = None
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WebSearch:
    """A web search the agent ran: the ``query``, what it did (``action``: search, open page, ...)
    and the ``results`` where the provider reports them."""

    item_id: str
    query: str
    action: dict[str, Any] | None = None
    results: tuple[Any, ...] = ()
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImageView:
    """The agent looked at an image file."""

    item_id: str
    path: str
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class SubAgent:
    """Sub-agent / collaboration activity: ``tool`` is what was done (spawn, send input, wait, ...),
    ``agents`` the session ids it concerns with their state (``status``, ``message``)."""

    item_id: str
    tool: str
    status: str | None = None
    prompt: str | None = None
    model: str | None = None
    agents: dict[str, Any] = field(default_factory=dict)
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewMode:
    """The session entered (``entered``) or left review mode; ``review`` is the target label on entry
    and the review text on exit."""

    entered: bool
    review: str = ""
    item_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolProgress:
    """A progress message from a running tool (the ``ToolUse`` with the same ``id``)."""

    id: str
    message: str
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RateLimits:
    """The account's rate-limit state: ``used_percent`` of the fullest window, when it resets
    (``resets_at``, epoch seconds) and whether a limit was reached. ``raw`` is the provider's record."""

    used_percent: float | None = None
    resets_at: float | None = None
    reached: bool = False
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class McpServerStatus:
    """An MCP server's start-up state (``starting``, ``ready``, ``failed``, ...) for a session."""

    name: str
    status: str
    error: str | None = None
    session_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Goal:
    """The session's goal was set or changed (``cleared`` False) or cleared: its ``objective``,
    ``status`` (``active``, ``paused``, ``blocked``, ``usageLimited``, ``budgetLimited``, ``complete``),
    the ``token_budget`` it may spend, the tokens and seconds spent on it so far."""

    objective: str | None = None
    status: str | None = None
    token_budget: int | None = None
    tokens_used: int | None = None
    time_used_seconds: int | None = None
    cleared: bool = False
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownEvent:
    """A wire message this version does not map, passed through untouched."""

    raw: dict[str, Any]
    agent: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """Terminal: the turn completed. ``structured`` is the parsed output when an output schema was set;
    ``cost_usd``, ``duration_ms`` and ``permission_denials`` (the tool uses the policy refused) are
    set where the provider reports them."""

    session_id: str
    turn_id: str | None = None
    text: str = ""
    usage: TokenUsage | None = None
    structured: Any = None
    cost_usd: float | None = None
    duration_ms: int | None = None
    permission_denials: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    """Terminal: the turn did not complete. ``code`` is one of ``ERROR_CODES``."""

    code: ErrorCode
    message: str
    retryable: bool = False
    data: dict[str, Any] = field(default_factory=dict)


TerminalEvent = Result | Error
Event = (
    TextDelta
    | AssistantMessage
    | Reasoning
    | ReasoningDelta
    | ToolUse
    | ToolResult
    | Plan
    | TokenUsage
    | System
    | Diff
    | Compaction
    | WebSearch
    | ImageView
    | SubAgent
    | ReviewMode
    | ToolProgress
    | RateLimits
    | McpServerStatus
    | Goal
    | UnknownEvent
    | Result
    | Error
)


def is_terminal(event: Event) -> bool:
    """True for ``Result`` and ``Error``: the last event of a turn's stream."""
    return isinstance(event, Result | Error)
