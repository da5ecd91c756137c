"""Sans-I/O parser for ``codex exec --json`` output: bytes in, provider-neutral events out.

The wire format (``codex-rs/exec/src/exec_events.rs``) is one JSON object per line, discriminated by
``type``: ``thread.started`` (the thread id), ``turn.started``, ``item.started`` / ``item.updated`` /
``item.completed`` (each carrying an ``item`` with ``id`` and an item ``type``), ``turn.completed``
(usage), ``turn.failed`` (error message) and ``error``. Despite its name ``error`` is not fatal: codex
reports retries (``Reconnecting... 2/5``) that way and goes on; only ``turn.failed``, or the process
ending, ends a turn.

One ``ExecEventParser`` per turn (one process). ``feed(bytes)`` splits lines itself and enforces the
line-size limit without ever buffering more than the limit; ``close()`` flushes a final unterminated
line at EOF. Non-JSON lines (and JSON that is not an object) are skipped; unknown event or item types
become ``UnknownEvent``; malformed known events too. Nothing here raises on input.

Exactly one terminal event per turn: the first ``Result`` / ``Error`` produced is kept in ``terminal``;
any later one is dropped. When the stream ends without one, ``finish(exit_code, stderr_tail)`` decides
the outcome from the exit code and stderr. This module never imports asyncio.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from agent_fleet._provider.prompt import parse_structured
from agent_fleet.events import (
    AssistantMessage,
    Error,
    ErrorCode,
    Event,
    Plan,
    PlanStep,
    Reasoning,
    Result,
    System,
    TokenUsage,
    ToolResult,
    ToolUse,
    UnknownEvent,
)

__all__ = [
    "DEFAULT_MAX_LINE_BYTES",
    "ExecEventParser",
    "classify_failure",
    "is_auth_failure",
]

DEFAULT_MAX_LINE_BYTES: Final = 64 * 1024 * 1024

# codex exec gives no structured error field (unlike the app-server's codexErrorInfo): the message
# text is all there is, so these patterns are the classification of last resort.
_AUTH: Final = re.compile(
    r"\b40[13]\b|unauthori[sz]ed|forbidden|missing environment variable|invalid[_ ]api[_ ]key"
    r"|incorrect api key|not logged in|log ?in again|authenticat|refresh token|access token",
    re.IGNORECASE,
)
# First match wins: codex's own wording for each failure (error.rs), then the HTTP status it quotes.
_FAILURE_TABLE: Final[tuple[tuple[str, ErrorCode, bool], ...]] = (
    (r"context window|context_length", "context_window_exceeded", False),
    (r"quota|usage limit|billing|usage_not_included", "usage_limit_exceeded", False),
    (r"model_not_found|\b404\b", "model_not_found", False),
    (r"\b429\b|too many requests|rate[_ ]?limit", "rate_limited", True),
    (
        r"\b5\d\d\b|overloaded|high demand|internal server error|bad gateway|unavailable"
        r"|gateway time-?out",
        "server_error",
        True,
    ),
    (
        r"stream disconnected|connection (?:reset|refused|closed)|timed out|temporar"
        r"|error sending request",
        "connection_failed",
        True,
    ),
    (r"\b400\b|invalid_request_error|bad request", "bad_request", False),
)
_FAILURES: Final = tuple((re.compile(p, re.IGNORECASE), code, retry) for p, code, retry in _FAILURE_TABLE)

_TOOL_ITEMS: Final = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


def is_auth_failure(text: str) -> bool:
    """True when ``text`` reads like a rejected or missing credential (401/403, missing key, ...)."""
    return bool(_AUTH.search(text))


def classify_failure(message: str) -> tuple[ErrorCode, bool]:
    """``(code, retryable)`` for a failure message (the same codes as the app-server's
    ``codexErrorInfo``): auth, context window, usage limit, model not found and bad request never
    retry; 429, 5xx / overload and dropped connections do; anything else is ``turn_failed``."""
    if is_auth_failure(message):
        return "auth_failed", False
    for pattern, code, retryable in _FAILURES:
        if pattern.search(message):
            return code, retryable
    return "turn_failed", False


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _usage(raw: Any) -> TokenUsage:
    u = raw if isinstance(raw, dict) else {}
    inp, out = _int(u.get("input_tokens")), _int(u.get("output_tokens"))
    return TokenUsage(
        input_tokens=inp,
        cached_input_tokens=_int(u.get("cached_input_tokens")),
        output_tokens=out,
        reasoning_output_tokens=_int(u.get("reasoning_output_tokens")),
        total_tokens=_int(u.get("total_tokens")) or inp + out,
    )


def _changes(item: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for change in item.get("changes") or []:
        if isinstance(change, dict):
            kind = change.get("kind")
            out.append(
                {"path": change.get("path"), "kind": kind.get("type") if isinstance(kind, dict) else kind}
            )
    return out


class ExecEventParser:
    """Maps one ``codex exec --json`` turn onto events. See the module docstring.

    ``session_id`` is the thread id known beforehand (resume); ``thread.started`` sets it otherwise.
    ``structured`` parses the final message as JSON into ``Result.structured`` (output schema set).
    ``max_line_bytes`` (``None``: unlimited) turns a longer line into ``Error(code="protocol_error")``.
    """

    def __init__(
        self,
        *,
        session_id: str | None = None,
        structured: bool = False,
        max_line_bytes: int | None = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        if max_line_bytes is not None and max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be >= 1 or None, not {max_line_bytes!r}")
        self.thread_id = session_id
        self.structured = structured
        self.max_line_bytes = max_line_bytes
        self.final_text = ""
        self.usage: TokenUsage | None = None
        self.terminal: Result | Error | None = None
        self.auth_message: str | None = None
        self._buffer = bytearray()
        self._skipping = False  # discarding the rest of an over-size line
        self._started: set[str] = set()
        self._plans: dict[str, tuple[PlanStep, ...]] = {}

    # --- bytes -> lines ---------------------------------------------------------------------------
    def feed(self, data: bytes) -> list[Event]:
        """Events for a chunk of stdout. Partial lines are kept until their newline arrives."""
        events: list[Event] = []
        limit = self.max_line_bytes
        start = 0
        while (newline := data.find(b"\n", start)) >= 0:
            piece = data[start:newline]
            start = newline + 1
            if self._skipping:
                self._skipping = False
                continue
            if limit is not None and len(self._buffer) + len(piece) > limit:
                self._buffer.clear()
                events += self._oversize()
                continue
            if self._buffer:
                self._buffer += piece
                piece = bytes(self._buffer)
                self._buffer.clear()
            events += self.feed_line(piece)
        rest = data[start:]
        if rest and not self._skipping:
            if limit is not None and len(self._buffer) + len(rest) > limit:
                self._buffer.clear()
                self._skipping = True
                events += self._oversize()
            else:
                self._buffer += rest
        return events

    def close(self) -> list[Event]:
        """End of stream: parse a final line that had no newline."""
        line, self._buffer = bytes(self._buffer), bytearray()
        skipping, self._skipping = self._skipping, False
        return [] if skipping or not line else self.feed_line(line)

    def _oversize(self) -> list[Event]:
        error = Error(
            code="protocol_error",
            message=f"codex exec emitted a line longer than {self.max_line_bytes} bytes",
            data={"max_line_bytes": self.max_line_bytes},
        )
        return self._gate([error])

    # --- lines -> events --------------------------------------------------------------------------
    def feed_line(self, line: bytes | str) -> list[Event]:
        """Events for one complete line (no size limit here: ``feed`` enforces it)."""
        text = line.decode("utf-8", "replace") if isinstance(line, bytes) else line
        text = text.strip()
        if not text.startswith("{"):
            return []
        try:
            obj = json.loads(text)
        except (ValueError, RecursionError):
            return []
        if not isinstance(obj, dict):
            return []
        try:
            events = self._map(obj)
        except (KeyError, TypeError, ValueError, AttributeError):
            events = [UnknownEvent(raw=obj)]
        return self._gate(events)

    def _gate(self, events: list[Event]) -> list[Event]:
        # Exactly one terminal per turn: keep the first, drop any later one.
        out: list[Event] = []
        for event in events:
            if isinstance(event, Result | Error):
                if self.terminal is not None:
                    continue
                self.terminal = event
            out.append(event)
        return out

    def _map(self, obj: dict[str, Any]) -> list[Event]:
        match obj.get("type"):
            case "thread.started":
                self.thread_id = _str(obj["thread_id"])
                return []
            case "turn.started" | "item.plan.delta":
                return []
            case "item.started" | "item.updated" | "item.completed" as kind:
                item = obj["item"]
                if not isinstance(item, dict):
                    raise TypeError("item is not an object")
                return self._item(kind, item, obj)
            case "turn.completed":
                self.usage = _usage(obj.get("usage"))
                structured = parse_structured(self.final_text) if self.structured else None
                result = Result(
                    session_id=self.thread_id or "",
                    text=self.final_text,
                    usage=self.usage,
                    structured=structured,
                )
                return [self.usage, result]
            case "turn.failed":
                error = obj.get("error")
                message = _opt_str(error.get("message")) if isinstance(error, dict) else None
                return [self._failure(message or "turn failed")]
            case "error":
                message = _str(obj["message"])
                if self.auth_message is None and is_auth_failure(message):
                    self.auth_message = message
                return [System(subtype="stream_error", data={"message": message})]
            case _:
                return [UnknownEvent(raw=obj)]

    def _failure(self, message: str) -> Error:
        code, retryable = classify_failure(message)
        if code != "auth_failed" and self.auth_message is not None:
            code, retryable = "auth_failed", False
        return Error(code=code, message=message, retryable=retryable, data={"session_id": self.thread_id})

    def _item(self, kind: str, item: dict[str, Any], obj: dict[str, Any]) -> list[Event]:
        item_id = _str(item["id"])
        item_type = item.get("type")
        completed = kind == "item.completed"
        match item_type:
            case "agent_message":
                if not completed:
                    return []
                self.final_text = _str(item["text"])
                return [AssistantMessage(text=self.final_text, item_id=item_id)]
            case "reasoning":
                text = _opt_str(item.get("text"))
                return [Reasoning(text=text, item_id=item_id)] if completed and text else []
            case "plan":
                return [Plan(steps=(), explanation=_str(item["text"]))] if completed else []
            case "todo_list":
                steps = tuple(
                    PlanStep(step=_str(t["text"]), status="completed" if t.get("completed") else "pending")
                    for t in item.get("items") or []
                )
                if self._plans.get(item_id) == steps:
                    return []
                self._plans[item_id] = steps
                return [Plan(steps=steps)]
            case "error":
                message = _str(item["message"])
                return [System(subtype="error_item", data={"message": message})] if completed else []
            case str() if item_type in _TOOL_ITEMS:
                events: list[Event] = []
                if item_id not in self._started:
                    self._started.add(item_id)
                    events.append(self._tool_use(item_id, item_type, item))
                if completed:
                    events.append(self._tool_result(item_id, item_type, item))
                return events
            case _:
                return [UnknownEvent(raw=obj)]

    @staticmethod
    def _tool_use(item_id: str, item_type: str, item: dict[str, Any]) -> ToolUse:
        match item_type:
            case "command_execution":
                command = _str(item["command"])
                return ToolUse(
                    id=item_id, name="shell", input={"command": command, "cwd": _opt_str(item.get("cwd"))}
                )
            case "file_change":
                return ToolUse(id=item_id, name="apply_patch", input={"changes": _changes(item)})
            case "mcp_tool_call":
                name = f"mcp:{item.get('server')}/{item.get('tool')}"
                return ToolUse(id=item_id, name=name, input={"arguments": item.get("arguments")})
            case _:  # web_search
                return ToolUse(id=item_id, name="web_search", input={"query": item.get("query")})

    @staticmethod
    def _tool_result(item_id: str, item_type: str, item: dict[str, Any]) -> ToolResult:
        status = _opt_str(item.get("status"))
        match item_type:
            case "command_execution":
                exit_code = item.get("exit_code")
                exit_code = (
                    exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
                )
                return ToolResult(
                    id=item_id,
                    output=_opt_str(item.get("aggregated_output")) or "",
                    exit_code=exit_code,
                    is_error=exit_code not in (0, None) or status in ("failed", "declined"),
                    status=status,
                )
            case "file_change":
                return ToolResult(id=item_id, status=status, is_error=status != "completed")
            case "mcp_tool_call":
                error = item.get("error")
                if isinstance(error, dict):
                    output = str(error.get("message", ""))
                else:
                    output = json.dumps(item.get("result"))
                is_error = error is not None or status == "failed"
                return ToolResult(id=item_id, output=output, is_error=is_error, status=status)
            case _:  # web_search
                return ToolResult(id=item_id, status="completed")

    # --- outcome ----------------------------------------------------------------------------------
    def finish(self, exit_code: int | None, stderr_tail: str = "") -> Result | Error:
        """The turn's terminal event once stdout hit EOF and the process exited.

        The stream's own terminal wins (a generic ``turn_failed`` becomes ``auth_failed`` when stderr
        shows a credential problem). Without one: non-zero exit is ``process_exited`` (or
        ``auth_failed``), a clean exit is a ``protocol_error``. Sets ``terminal``.
        """
        terminal = self.terminal
        if isinstance(terminal, Error) and terminal.code == "turn_failed" and is_auth_failure(stderr_tail):
            terminal = Error(code="auth_failed", message=terminal.message, data=terminal.data)
        if terminal is None:
            data: dict[str, Any] = {"exit_code": exit_code, "stderr_tail": stderr_tail}
            if exit_code not in (0, None):
                if self.auth_message is not None or is_auth_failure(stderr_tail):
                    message = self.auth_message or _summary_line(stderr_tail) or "authentication failed"
                    terminal = Error(code="auth_failed", message=message, data=data)
                else:
                    message = f"codex exec exited with code {exit_code}"
                    if last := _summary_line(stderr_tail):
                        message += f": {last}"
                    terminal = Error(code="process_exited", message=message, data=data)
            else:
                terminal = Error(
                    code="protocol_error", message="codex exec ended without a terminal event", data=data
                )
        self.terminal = terminal
        return terminal


def _summary_line(text: str) -> str:
    # The first line that looks like an error, else the last non-blank one (skipping backtraces).
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("Error", "error")):
            return line
    return lines[-1] if lines else ""
