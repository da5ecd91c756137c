"""Pure mapping of codex app-server notifications onto provider-neutral events.

One ``TurnMapper`` per turn: feed it each notification of its thread (``method``, ``params``) and it
returns the events to emit. It keeps what the terminal ``Result`` needs: the final assistant text,
the last token usage, and the error codex reported before a failed ``turn/completed``.

Methods that matter are mapped; the rest become ``UnknownEvent`` so newer codex versions never crash
a consumer; a few pure-UI notifications are dropped (``IGNORED``).
"""

from __future__ import annotations

import json
from typing import Any, Final

from agent_fleet._provider.fastnew import positional_new
from agent_fleet._provider.prompt import parse_structured
from agent_fleet.codex._errors import error_code_for, http_status, stream_retry_data
from agent_fleet.codex._shapes import change_drift
from agent_fleet.events import (
    AssistantMessage,
    Compaction,
    Diff,
    Error,
    Event,
    Goal,
    ImageView,
    McpServerStatus,
    Plan,
    PlanStep,
    RateLimits,
    Reasoning,
    Result,
    ReviewMode,
    SubAgent,
    System,
    TextDelta,
    TokenUsage,
    ToolProgress,
    ToolResult,
    ToolUse,
    UnknownEvent,
    WebSearch,
)

__all__ = [
    "IGNORED",
    "NOTICE_METHODS",
    "OPT_OUT_NOTIFICATIONS",
    "TurnMapper",
    "error_code_for",
    "goal_event",
    "http_status",
    "notice_events",
    "rate_limits",
]

# Notifications we never map: asked not to be sent at initialize (cheaper for a busy fleet).
OPT_OUT_NOTIFICATIONS: Final[tuple[str, ...]] = (
    "item/commandExecution/outputDelta",
    "item/fileChange/outputDelta",
    "item/reasoning/summaryPartAdded",
    "item/reasoning/summaryTextDelta",
    "item/reasoning/textDelta",
    "item/plan/delta",
    "remoteControl/status/changed",
    "thread/readState/changed",
)
# Thread-scoped notifications that carry nothing a consumer of events needs.
IGNORED: Final[frozenset[str]] = frozenset(
    {
        "turn/started",
        "thread/status/changed",
        "serverRequest/resolved",
        "thread/started",
        "thread/compacted",  # deprecated duplicate of the contextCompaction item (0.163 sends none)
        *OPT_OUT_NOTIFICATIONS,
    }
)

# Notices about the account, the configuration or the thread's metadata: a ``System(subtype="notice")``
# with the method and its params, on the provider's notice stream and the sessions they concern.
NOTICE_METHODS: Final[frozenset[str]] = frozenset(
    {
        "account/updated",
        "account/login/completed",
        "account/gatewayOAuth/changed",
        "skills/changed",
        "app/list/updated",
        "mcpServer/oauthLogin/completed",
        "modelProvider/authRecoveryStarted",
        "modelProvider/authRecoveryCompleted",
        "externalAgentConfig/import/completed",
        "thread/archived",
        "thread/unarchived",
        "thread/deleted",
        "thread/closed",
        "thread/name/updated",
        "thread/reverted",
        "windows/worldWritableWarning",
        "windowsSandbox/setupCompleted",
        "autoApprovalReview/strictReviewRequired",
    }
)
_WARNINGS: Final = frozenset({"warning", "configWarning", "deprecationNotice", "guardianWarning"})
_DELTA: Final = "item/agentMessage/delta"
_new_text_delta = positional_new(TextDelta)


def _usage(breakdown: dict[str, Any]) -> TokenUsage:
    return TokenUsage(
        input_tokens=int(breakdown.get("inputTokens") or 0),
        cached_input_tokens=int(breakdown.get("cachedInputTokens") or 0),
        output_tokens=int(breakdown.get("outputTokens") or 0),
        reasoning_output_tokens=int(breakdown.get("reasoningOutputTokens") or 0),
        total_tokens=int(breakdown.get("totalTokens") or 0),
        cache_write_input_tokens=int(breakdown.get("cacheWriteInputTokens") or 0),
    )


def _minus(total: TokenUsage, before: TokenUsage) -> TokenUsage:
    return TokenUsage(
        input_tokens=total.input_tokens - before.input_tokens,
        cached_input_tokens=total.cached_input_tokens - before.cached_input_tokens,
        output_tokens=total.output_tokens - before.output_tokens,
        reasoning_output_tokens=total.reasoning_output_tokens - before.reasoning_output_tokens,
        total_tokens=total.total_tokens - before.total_tokens,
        cache_write_input_tokens=total.cache_write_input_tokens - before.cache_write_input_tokens,
    )


def token_usage(usage: dict[str, Any], baseline: TokenUsage | None) -> TokenUsage:
    """``TokenUsage`` from a codex ``ThreadTokenUsage``; ``turn`` is the total minus ``baseline`` (the
    session's total before this turn) when that is known."""
    total = _usage(usage.get("total") or {})
    window = usage.get("modelContextWindow")
    return TokenUsage(
        input_tokens=total.input_tokens,
        cached_input_tokens=total.cached_input_tokens,
        output_tokens=total.output_tokens,
        reasoning_output_tokens=total.reasoning_output_tokens,
        total_tokens=total.total_tokens,
        cache_write_input_tokens=total.cache_write_input_tokens,
        turn=_minus(total, baseline) if baseline is not None else None,
        context_window=int(window) if isinstance(window, int) else None,
    )


def rate_limits(params: dict[str, Any]) -> RateLimits:
    """A ``RateLimits`` from ``account/rateLimits/updated`` params: the fullest of its windows."""
    snapshot = params.get("rateLimits")
    snapshot = snapshot if isinstance(snapshot, dict) else {}
    used: float | None = None
    resets: float | None = None
    for key in ("primary", "secondary"):
        window = snapshot.get(key)
        percent = window.get("usedPercent") if isinstance(window, dict) else None
        if isinstance(window, dict) and isinstance(percent, int | float) and (used is None or percent > used):
            used = float(percent)
            at = window.get("resetsAt")
            resets = float(at) if isinstance(at, int | float) else None
    reached = snapshot.get("rateLimitReachedType") is not None or bool(snapshot.get("spendControlReached"))
    return RateLimits(used_percent=used, resets_at=resets, reached=reached, raw=snapshot)


def notice_events(method: str, params: dict[str, Any]) -> list[Event] | None:
    """The events for a notice that may arrive outside a turn (connection-wide or between turns), or
    None when ``method`` is not one of those."""
    if method in _WARNINGS:
        return [System(subtype="warning", data={"method": method, **params})]
    if method in NOTICE_METHODS:
        return [System(subtype="notice", data={"method": method, **params})]
    if method == "account/rateLimits/updated":
        return [rate_limits(params)]
    if method == "mcpServer/startupStatus/updated":
        error = params.get("error")
        thread = params.get("threadId")
        return [
            McpServerStatus(
                name=str(params.get("name")),
                status=str(params.get("status")),
                error=error if isinstance(error, str) else None,
                session_id=thread if isinstance(thread, str) else None,
            )
        ]
    return None


def goal_event(goal: Any) -> Goal:
    """A ``Goal`` from codex's ``ThreadGoal`` record."""
    g = goal if isinstance(goal, dict) else {}

    def _int(key: str) -> int | None:
        value = g.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    objective, status = g.get("objective"), g.get("status")
    return Goal(
        objective=objective if isinstance(objective, str) else None,
        status=status if isinstance(status, str) else None,
        token_budget=_int("tokenBudget"),
        tokens_used=_int("tokensUsed"),
        time_used_seconds=_int("timeUsedSeconds"),
    )


def _changes(item: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for index, change in enumerate(item.get("changes") or []):
        if isinstance(change, dict):
            kind = change.get("kind")
            entry = {
                "path": change.get("path"),
                "kind": kind.get("type") if isinstance(kind, dict) else kind,
                "diff": change.get("diff"),
            }
            if isinstance(kind, dict) and kind.get("move_path"):  # a rename: where the file goes
                entry["move_path"] = kind["move_path"]
            drift = change_drift(change, f"changes[{index}]")
            if drift is not None:  # a field this version does not know: its approval is declined
                entry["unknown_field"] = drift
            out.append(entry)
    return out


class TurnMapper:
    """Maps one turn's notifications. ``structured`` turns on output-schema parsing of the final text."""

    def __init__(
        self,
        session_id: str,
        *,
        structured: bool = False,
        baseline: TokenUsage | None = None,
        spawned: set[str] | None = None,
    ) -> None:
        self.session_id = session_id
        # Threads of the sub-agents this thread spawned (collabAgentToolCall receivers): their
        # approvals are this session's to judge. A set the caller may share across turns.
        self.spawned: set[str] = spawned if spawned is not None else set()
        self.baseline = baseline
        self.turn_id: str | None = None
        self.structured = structured
        self.final_text = ""
        self.usage: TokenUsage | None = None
        self.last_error: dict[str, Any] | None = None
        self.file_changes: dict[str, list[dict[str, Any]]] = {}
        self.commands: dict[str, Any] = {}  # item id -> command, for approvals of writes to its stdin
        # item id -> (server, tool, arguments) of MCP tool calls in progress, for their approvals
        self.mcp_calls: dict[str, tuple[str, str, Any]] = {}
        self._started_items: set[str] = set()
        self._reasoning: set[str] = set()

    @property
    def tools_running(self) -> bool:
        """True while a tool item (command, file change, ...) or a reasoning item has started and not
        completed: codex sends nothing meanwhile (reasoning deltas are opted out), and a stalled model
        stream is codex's own ``stream_idle_timeout_ms`` to end."""
        return bool(self._started_items or self._reasoning)

    def feed(self, method: str, params: Any) -> list[Event]:
        """Events for one notification (possibly none). Never raises on malformed params."""
        if type(params) is dict:
            if method == _DELTA:  # nearly every notification of a turn: the fast path
                delta = params.get("delta")
                if type(delta) is str:
                    return [_new_text_delta(delta, params.get("itemId"))]
        elif not isinstance(params, dict):
            return [UnknownEvent(raw={"method": method, "params": params})]
        try:
            return self._map(method, params)
        except (KeyError, TypeError, ValueError, AttributeError):
            return [UnknownEvent(raw={"method": method, "params": params})]

    def _map(self, method: str, p: dict[str, Any]) -> list[Event]:
        match method:
            case "item/agentMessage/delta":
                return [_new_text_delta(p["delta"], p.get("itemId"))]
            case "item/started":
                return self._item_started(p["item"])
            case "item/completed":
                return self._item_completed(p["item"], p)
            case "turn/plan/updated":
                steps = tuple(PlanStep(step=s["step"], status=s["status"]) for s in p.get("plan") or [])
                return [Plan(steps=steps, explanation=p.get("explanation"))]
            case "thread/tokenUsage/updated":
                self.usage = token_usage(p["tokenUsage"], self.baseline)
                return [self.usage]
            case "error":
                error = p.get("error") or {}
                if p.get("willRetry"):
                    # codex retries the model stream and will stream this turn's text again.
                    return [System(subtype="stream_retry", data=stream_retry_data(error))]
                self.last_error = error
                return []
            case "turn/completed":
                return [self._terminal(p["turn"])]
            case "turn/diff/updated":
                diff = p.get("diff")
                return [Diff(diff=diff if isinstance(diff, str) else "", turn_id=p.get("turnId"))]
            case "model/rerouted":
                return [System(subtype="model_rerouted", data=p)]
            case "thread/goal/updated":
                return [goal_event(p.get("goal"))]
            case "thread/goal/cleared":
                return [Goal(cleared=True)]
            case "item/mcpToolCall/progress":
                return [ToolProgress(id=p["itemId"], message=str(p.get("message") or ""))]
            case _ if method in IGNORED:
                return []
            case _:
                notices = notice_events(method, p)
                return notices if notices is not None else [UnknownEvent(raw={"method": method, "params": p})]

    def _item_started(self, item: dict[str, Any]) -> list[Event]:
        item_id = item["id"]
        match item.get("type"):
            case "commandExecution":
                self._started_items.add(item_id)
                self.commands[item_id] = item["command"]
                return [
                    ToolUse(
                        id=item_id, name="shell", input={"command": item["command"], "cwd": item.get("cwd")}
                    )
                ]
            case "fileChange":
                self._started_items.add(item_id)
                changes = _changes(item)
                self.file_changes[item_id] = changes
                return [ToolUse(id=item_id, name="apply_patch", input={"changes": changes})]
            case "mcpToolCall":
                self._started_items.add(item_id)
                self.mcp_calls[item_id] = (
                    str(item.get("server")),
                    str(item.get("tool")),
                    item.get("arguments"),
                )
                name = f"mcp:{item.get('server')}/{item.get('tool')}"
                return [ToolUse(id=item_id, name=name, input={"arguments": item.get("arguments")})]
            case "webSearch":
                self._started_items.add(item_id)
                return [ToolUse(id=item_id, name="web_search", input={"query": item.get("query")})]
            case "dynamicToolCall":
                self._started_items.add(item_id)
                return [
                    ToolUse(
                        id=item_id, name=str(item.get("tool")), input={"arguments": item.get("arguments")}
                    )
                ]
            case "collabAgentToolCall":
                self._note_spawned(item)
                return [_collab(item)]
            case "reasoning":
                self._reasoning.add(item_id)
                return []
            case _:
                return []

    def _note_spawned(self, item: dict[str, Any]) -> None:
        for thread in item.get("receiverThreadIds") or ():
            if isinstance(thread, str):
                self.spawned.add(thread)

    def _item_completed(self, item: dict[str, Any], params: dict[str, Any]) -> list[Event]:
        item_id = item["id"]
        kind = item.get("type")
        events: list[Event] = []
        if kind in ("commandExecution", "fileChange", "mcpToolCall", "webSearch", "dynamicToolCall"):
            if item_id not in self._started_items:
                events += self._item_started(item)
            self._started_items.discard(item_id)
            self.mcp_calls.pop(item_id, None)
        elif kind == "reasoning":
            self._reasoning.discard(item_id)
        match kind:
            case "agentMessage":
                text = item.get("text") or ""
                self.final_text = text
                events.append(AssistantMessage(text=text, item_id=item_id, phase=item.get("phase")))
            case "reasoning":
                parts = [*(item.get("summary") or []), *(item.get("content") or [])]
                text = "\n".join(p for p in parts if isinstance(p, str))
                if text:
                    events.append(Reasoning(text=text, item_id=item_id))
            case "plan":
                events.append(Plan(steps=(), explanation=item.get("text")))
            case "commandExecution":
                status = item.get("status")
                exit_code = item.get("exitCode")
                events.append(
                    ToolResult(
                        id=item_id,
                        output=item.get("aggregatedOutput") or "",
                        exit_code=exit_code,
                        is_error=exit_code not in (0, None) or status in ("failed", "declined"),
                        status=status,
                    )
                )
            case "fileChange":
                status = item.get("status")
                events.append(ToolResult(id=item_id, status=status, is_error=status != "completed"))
            case "mcpToolCall":
                error = item.get("error")
                output = (
                    error.get("message", "") if isinstance(error, dict) else json.dumps(item.get("result"))
                )
                status = item.get("status")
                events.append(
                    ToolResult(id=item_id, output=output, is_error=error is not None, status=status)
                )
            case "webSearch":
                results = item.get("results")
                action = item.get("action")
                events.append(ToolResult(id=item_id, status="completed"))
                events.append(
                    WebSearch(
                        item_id=item_id,
                        query=str(item.get("query") or ""),
                        action=action if isinstance(action, dict) else None,
                        results=tuple(results) if isinstance(results, list) else (),
                    )
                )
            case "imageView":
                events.append(ImageView(item_id=item_id, path=str(item.get("path"))))
            case "collabAgentToolCall":
                self._note_spawned(item)
                events.append(_collab(item))
            case "subAgentActivity":
                thread = item.get("agentThreadId")
                events.append(
                    SubAgent(
                        item_id=item_id,
                        tool=str(item.get("kind")),
                        model=item.get("model"),
                        agents={str(thread): {"path": item.get("agentPath")}} if thread else {},
                    )
                )
            case "enteredReviewMode" | "exitedReviewMode":
                events.append(
                    ReviewMode(
                        entered=kind == "enteredReviewMode",
                        review=str(item.get("review") or ""),
                        item_id=item_id,
                    )
                )
            case "contextCompaction":
                events.append(Compaction(item_id=item_id, turn_id=self.turn_id))
            case "dynamicToolCall":
                ok = bool(item.get("success"))
                events.append(
                    ToolResult(
                        id=item_id,
                        output=json.dumps(item.get("contentItems")),
                        is_error=not ok,
                        status=item.get("status"),
                    )
                )
            case "userMessage" | "hookPrompt":
                pass
            case _:  # the whole notification: its threadId and turnId say where the item belongs
                events.append(UnknownEvent(raw={"method": "item/completed", "params": params}))
        return events

    def _terminal(self, turn: dict[str, Any]) -> Result | Error:
        status = turn.get("status")
        self.turn_id = turn.get("id") or self.turn_id
        if status == "completed":
            structured = parse_structured(self.final_text) if self.structured else None
            return Result(
                session_id=self.session_id,
                turn_id=self.turn_id,
                text=self.final_text,
                usage=self.usage,
                structured=structured,
            )
        if status == "interrupted":
            return Error(code="cancelled", message="turn interrupted", data={"turn_id": self.turn_id})
        error = turn.get("error") or self.last_error or {}
        code, retryable = error_code_for(error)
        message = error.get("message") or f"turn ended with status {status!r}"
        if error.get("additionalDetails"):
            message += f" ({error['additionalDetails']})"
        data = {"turn_id": self.turn_id, "codex_error_info": error.get("codexErrorInfo")}
        status = http_status(error)
        if status is not None:
            data["http_status"] = status
        return Error(code=code, message=message, retryable=retryable, data=data)


def _collab(item: dict[str, Any]) -> SubAgent:
    states = item.get("agentsStates")
    agents: dict[str, Any] = dict(states) if isinstance(states, dict) else {}
    for receiver in item.get("receiverThreadIds") or []:
        agents.setdefault(str(receiver), {})
    tool = item.get("tool")
    status = item.get("status")
    return SubAgent(
        item_id=item["id"],
        tool=str(tool),
        status=status if isinstance(status, str) else None,
        prompt=item.get("prompt"),
        model=item.get("model"),
        agents=agents,
    )
