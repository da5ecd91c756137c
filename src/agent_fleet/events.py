"""The provider-neutral event model.

Every provider maps its wire format onto these frozen dataclasses. A turn's stream is a sequence of
non-terminal events ending with exactly one terminal event: ``Result`` (success) or ``Error``.
Anything a provider does not map becomes ``UnknownEvent(raw=...)`` so newer wire versions never crash
a consumer.

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
(seconds), when present, is the provider's hint of how long to wait first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "ERROR_CODES",
    "AssistantMessage",
    "Diff",
    "Error",
    "ErrorCode",
    "Event",
    "Plan",
    "PlanStep",
    "Reasoning",
    "Result",
    "System",
    "TerminalEvent",
    "TextDelta",
    "TokenUsage",
    "ToolResult",
    "ToolUse",
    "UnknownEvent",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class Reasoning:
    """Reasoning summary or content text."""

    text: str
    item_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolUse:
    """The agent invokes a tool. ``name`` is ``shell``, ``apply_patch``, ``mcp:<server>/<tool>``, ..."""

    id: str
    name: str
    input: dict[str, Any] = field(default_factory=dict)
    synthetic: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResult:
    """The outcome of a ``ToolUse`` with the same ``id``."""

    id: str
    output: str = ""
    exit_code: int | None = None
    is_error: bool = False
    status: str | None = None
    synthetic: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanStep:
    step: str
    status: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """The agent's current plan (todo list)."""

    steps: tuple[PlanStep, ...]
    explanation: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    """Token counts; ``total`` is cumulative for the session where the provider reports it."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_output_tokens: int = 0
    total_tokens: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class System:
    """Provider lifecycle and policy notices (``subtype`` names which, ``data`` carries details)."""

    subtype: str
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class Diff:
    """The turn's aggregated diff so far (a unified diff of every file it changed); each new one replaces
    the previous for that turn."""

    diff: str
    turn_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class UnknownEvent:
    """A wire message this version does not map, passed through untouched."""

    raw: dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """Terminal: the turn completed. ``structured`` is the parsed output when an output schema was set."""

    session_id: str
    turn_id: str | None = None
    text: str = ""
    usage: TokenUsage | None = None
    structured: Any = None


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
    | ToolUse
    | ToolResult
    | Plan
    | TokenUsage
    | System
    | Diff
    | UnknownEvent
    | Result
    | Error
)


def is_terminal(event: Event) -> bool:
    """True for ``Result`` and ``Error``: the last event of a turn's stream."""
    return isinstance(event, Result | Error)
