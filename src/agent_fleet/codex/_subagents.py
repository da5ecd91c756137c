"""What a ``CodexHandle`` does with its sub-agents: their events, their tokens, their questions.

A sub-agent's thread has no handle; the provider maps its notifications (``_subthreads``) and gives the
events to the session it works for (``subagent_events``). They go into the session's stream with
``agent`` set to the sub-agent's thread id: the same event types as the session's own, except that
text deltas are left out (the whole message follows as ``AssistantMessage``), token counts are added to
the session's own (``TokenUsage`` and the turn's ``Result.usage`` count both), and the sub-agent's
turn end becomes ``System(subtype="subagent_turn")`` (it never ends the session's turn).

Its server requests other than approvals (``item/tool/call`` for the session's ``Spec.tools``,
questions, MCP elicitations) are answered as the session's own would be (``on_subthread_request``),
their notices tagged with the sub-agent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

from agent_fleet._provider.sessions import HandleHost
from agent_fleet.codex import _server_requests as _requests
from agent_fleet.codex._subthreads import SubThread
from agent_fleet.codex._turn import AppServerTurn
from agent_fleet.events import Error, Event, Result, System, TextDelta, TokenUsage
from agent_fleet.jsonrpc import Request

__all__ = ["SubAgents", "add_usage", "tagged"]

_COUNTS: Final = (
    "input_tokens",
    "cached_input_tokens",
    "output_tokens",
    "reasoning_output_tokens",
    "total_tokens",
    "cache_write_input_tokens",
)


def add_usage(a: TokenUsage, b: TokenUsage, *, sign: int = 1) -> TokenUsage:
    """``a + b`` (``sign=-1``: ``a - b``), counts only."""
    return TokenUsage(**{k: getattr(a, k) + sign * getattr(b, k) for k in _COUNTS})


def tagged(event: Event, agent: str) -> Event:
    """``event`` with ``agent`` set (events without the field are returned as they are)."""
    if not hasattr(event, "agent"):
        return event
    changed: Event = dataclasses.replace(event, agent=agent)  # type: ignore[arg-type]
    return changed


def _turn_end(event: Result | Error, agent: str) -> System:
    if isinstance(event, Result):
        data: dict[str, Any] = {"status": "completed", "text": event.text, "turn_id": event.turn_id}
    else:
        data = {"status": event.code, "message": event.message, **event.data}
    return System(subtype="subagent_turn", data=data, agent=agent)


class SubAgents:
    """Mixed into ``CodexHandle``, which sets ``_turn``, ``_host`` and ``_sub_usage`` and defines
    ``notice``, ``_tool_call`` and ``_user_input``."""

    _turn: AppServerTurn | None
    _host: HandleHost
    _sub_usage: dict[str, TokenUsage]

    def notice(self, event: Event) -> None:
        raise NotImplementedError

    async def _tool_call(
        self, msg: Request, params: dict[str, Any], emit: Callable[[Event], None] | None = None
    ) -> None:
        raise NotImplementedError

    async def _user_input(
        self, msg: Request, params: dict[str, Any], emit: Callable[[Event], None] | None = None
    ) -> None:
        raise NotImplementedError

    # -- events ----------------------------------------------------------------------------------------

    def subagent_events(self, agent: str, events: list[Event]) -> None:
        """Events of sub-agent ``agent``'s thread, into this session's stream (see the module doc)."""
        for event in events:
            kind = type(event)
            if kind is TextDelta:
                continue
            if kind is TokenUsage:
                self._sub_usage[agent] = event  # type: ignore[assignment]
                turn = self._turn
                combined = self.combined_usage(turn.mapper.usage, turn) if turn is not None else None
                if turn is not None and combined is not None and not turn.stream.done:
                    turn.stream.push(combined)
                continue
            if kind is Result or kind is Error:
                self.notice(_turn_end(event, agent))  # type: ignore[arg-type]
                continue
            self.notice(tagged(event, agent))

    def subagents_total(self) -> TokenUsage | None:
        """The latest token totals of every sub-agent of this session, added up."""
        if not self._sub_usage:
            return None
        total = TokenUsage()
        for usage in self._sub_usage.values():
            total = add_usage(total, usage)
        return total

    def combined_usage(self, own: TokenUsage | None, turn: AppServerTurn) -> TokenUsage | None:
        """``own`` (the session's thread's usage) plus its sub-agents'. ``turn``: the share since the
        turn began, where the session's own share is known."""
        subs = self.subagents_total()
        if subs is None:
            return own
        since = add_usage(subs, turn.sub_baseline, sign=-1) if turn.sub_baseline is not None else subs
        total = add_usage(own, subs) if own is not None else subs
        share: TokenUsage | None
        if own is None:
            share = since
        elif own.turn is not None:
            share = add_usage(own.turn, since)
        else:
            share = None
        return dataclasses.replace(
            total, turn=share, context_window=own.context_window if own is not None else None
        )

    # -- server requests ---------------------------------------------------------------------------------

    async def on_subthread_request(self, msg: Request, sub: SubThread) -> None:
        """A sub-agent's tool call, question or elicitation: answered as this session's own would be
        (its ``Spec.tools``, the ``input_handler`` or canned answers), notices tagged with the agent."""
        params = msg.params if isinstance(msg.params, dict) else {}
        agent = sub.thread_id

        def emit(event: Event) -> None:
            self.notice(tagged(event, agent))

        if msg.method == _requests.TOOL_CALL:
            self._host.spawn_task(self._tool_call(msg, params, emit), f"tool:{agent}:{msg.id}")
        else:
            self._host.spawn_task(self._user_input(msg, params, emit), f"input:{agent}:{msg.id}")
