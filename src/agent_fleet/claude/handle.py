"""``ClaudeHandle``: one Claude Code session, i.e. one CLI process driven by ``ClaudeSDKClient``.

Theory of operation
-------------------
``connect()`` starts the CLI (``--input-format stream-json``) and completes the SDK's initialize
handshake; a reader task then consumes ``receive_messages()`` for the whole session and feeds the
current turn's ``TurnMapper``. A turn starts by writing one user message; it ends with the CLI's
``ResultMessage``.

Session states::

    OPEN ──stop() / CLI exit / shutdown──> CLOSED

Turn states (one ``_ClaudeTurn`` at a time)::

    RUNNING ──ResultMessage | timeout | interrupt() | stop() | CLI exit──> FINISHED

Every way a turn can end calls ``EventStream.finish``: the first wins, the rest are no-ops, so the
reader, the turn timer, ``interrupt()``, ``stop()`` and CLI-exit handling can race in any order.

The CLI has no turn ids on its messages, so a turn that ends locally while the CLI still works on
it (timeout or ``interrupt()`` -> the CLI's interrupt) leaves a ``ResultMessage`` *owed*: until it
arrives every message is dropped, and ``send()`` waits for it before writing the next prompt. An
``inject()`` the CLI takes in after the turn's result (too late to steer it) makes the CLI run one
more turn of its own; that turn is owed and dropped too, and the running turn says so with
``System(subtype="inject_late")``.

Approvals: a ``PreToolUse`` hook answers "ask" for every tool, so the CLI consults ``can_use_tool``
for every call (without it Claude Code runs read-only commands such as ``echo`` unasked); the
``ApprovalPolicy`` decides there (a command asking to leave the sandbox as an escalation), an
``approval_handler`` refines what it may see, and the decision is reported with synthetic events
exactly like the codex provider's. A declined call is answered with a deny carrying the reason, so Claude sees
it as the tool's result and continues the turn (``cancel`` also interrupts the turn).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import uuid
from collections import deque
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from claude_agent_sdk import (
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ClaudeSDKError,
    CLIConnectionError,
    CLIJSONDecodeError,
    CLINotFoundError,
    HookContext,
    HookInput,
    HookJSONOutput,
    HookMatcher,
    PermissionResultAllow,
    PermissionResultDeny,
    ProcessError,
    ResultError,
    ResultMessage,
    SystemMessage,
    ToolPermissionContext,
)
from claude_agent_sdk.types import Message

from agent_fleet._provider.asking import answer_input
from agent_fleet._provider.audit import approval_events
from agent_fleet._provider.handle import StreamedHandle
from agent_fleet._provider.refine import refine
from agent_fleet._provider.sessions import HandleHost
from agent_fleet._provider.stream import EventStream  # the same one-reader, one-terminal stream
from agent_fleet._provider.watchdog import IdleWatchdog
from agent_fleet.claude import _approvals, _hooks, _questions, _sandbox, _tools
from agent_fleet.claude._sandbox import SessionTemp
from agent_fleet.claude.mapping import TurnMapper
from agent_fleet.claude.translate import ClaudePlan, user_content
from agent_fleet.contract import Spec, check_text, refuse_turn_settings
from agent_fleet.errors import ProviderUnavailable, TransportError, Unsupported, UsageError
from agent_fleet.events import Error, Event, RateLimits, Result, System, ToolResult, ToolUse
from agent_fleet.policy import ApprovalPolicy, Decision
from agent_fleet.tools import as_tools

if TYPE_CHECKING:
    from agent_fleet.claude.provider import ClaudeProvider

__all__ = ["ClaudeHandle"]

logger = logging.getLogger("agent_fleet.claude")

_CONTROL_TIMEOUT: Final = 5.0  # interrupt during stop/timeout: never let a wedged CLI hang us
_DISCONNECT_TIMEOUT: Final = 20.0  # the SDK bounds its own close to ~20 s (stdin EOF, TERM, KILL)
_DRAIN_TIMEOUT: Final = 30.0  # send() after a timeout waits this long for the interrupted turn's end
_STDERR_LINES: Final = 200
_ASK: Final[HookJSONOutput] = {
    "hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "ask",
        "permissionDecisionReason": "agent-fleet approval policy decides every tool call",
    }
}


async def _once(message: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield message


def _user_message(content: str | list[dict[str, Any]], message_uuid: str) -> dict[str, Any]:
    # A uuid per message: the CLI lists the uuids each turn took in (ResultMessage.user_message_uuids).
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "session_id": "default",
        "uuid": message_uuid,
    }


class _ClaudeTurn:
    __slots__ = ("injected", "mapper", "stream", "timer", "tools", "watchdog")

    def __init__(self, mapper: TurnMapper, bound: int | None) -> None:
        self.mapper = mapper
        self.stream = EventStream(bound)  # ClaudeOptions.event_buffer: an unread turn stays small
        self.timer: asyncio.TimerHandle | None = None
        self.watchdog: IdleWatchdog | None = None
        self.tools: set[str] = set()  # tool uses without a result yet: quiet is expected meanwhile
        self.injected: list[str] = []


class ClaudeHandle(StreamedHandle[_ClaudeTurn]):
    """A live Claude Code session. Created by ``ClaudeProvider.spawn`` / ``resume``; see ``Handle``."""

    _provider: ClaudeProvider

    def __init__(
        self,
        provider: ClaudeProvider,
        host: HandleHost,
        session_id: str,
        spec: Spec,
        policy: ApprovalPolicy,
        plan: ClaudePlan,
        temp: SessionTemp | None = None,
    ) -> None:
        self._provider = provider  # read for its options only
        self._host = host
        self._session_id = session_id
        self._spec = spec
        self._policy = policy
        self._plan = plan
        self._cwd = plan.cwd
        # The session's box besides its workspace: its temporary directories, removed with the session
        # when they were made for it.
        self._temp = temp
        self._roots: tuple[str, ...] = temp.roots if temp is not None else ()
        # The CLI's home directory (where its tools take "~"): the one its environment names.
        self._home = (provider.options.env or {}).get("HOME") or os.path.expanduser("~")
        self._turn: _ClaudeTurn | None = None
        self._turn_model: str | None = None  # send(model=...) for the next turn
        self._model_switched = False  # the last turn ran on a model of its own
        self._closed = False
        self._owed = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._declined: set[str] = set()
        self._pending: list[System] = []
        self._approvals = itertools.count(1)
        self._total_tokens = 0
        self._stderr: deque[str] = deque(maxlen=_STDERR_LINES)
        self._reader: asyncio.Task[None] | None = None
        sdk_options = dict(plan.options)
        if spec.tools:
            tools = as_tools(spec.tools)
            sdk_options["mcp_servers"] = {
                **sdk_options.get("mcp_servers", {}),
                _tools.SERVER: _tools.sdk_server(tools),
            }
        options = ClaudeAgentOptions(
            **sdk_options,
            can_use_tool=self._can_use_tool,
            hooks=_hooks.merged(
                [HookMatcher(matcher=None, hooks=[self._ask_hook])], provider.options.hooks or {}
            ),
            stderr=self._stderr.append,
        )
        self._client = ClaudeSDKClient(options)

    # -- public ------------------------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def closed(self) -> bool:
        return self._closed

    def stderr_tail(self) -> str:
        """The last lines the CLI wrote to stderr."""
        return "\n".join(self._stderr)

    def _turn_settings(self, *, model: str | None = None, **others: Any) -> None:
        """A turn's own ``model`` (Claude Code switches it in the running CLI, and back for the next
        turn); the other per-turn settings are ``Unsupported``: the CLI's sandbox, permission handling
        and working directory are fixed when it starts."""
        refuse_turn_settings("Claude", **others)
        if model is not None and (not isinstance(model, str) or not model.strip()):
            raise UsageError(f"model must be a non-empty string, not {model!r}")
        self._turn_model = model

    async def _follow_up(
        self, prompt: str, *, images: tuple[str | Path, ...], output_schema: Mapping[str, Any] | None
    ) -> None:
        model, self._turn_model = self._turn_model, None
        if output_schema is not None and dict(output_schema) != dict(self._spec.output_schema or {}):
            # the CLI takes its JSON schema once, at start (--json-schema)
            raise Unsupported("Claude takes an output schema per session (Spec.output_schema), not per turn")
        await self._switch_model(model)
        await self.start_turn(user_content(prompt, images) if images else prompt)

    async def _switch_model(self, model: str | None) -> None:
        """Run the next turn on ``model``, or on the session's own model after a turn that had another."""
        if model is None and not self._model_switched:
            return
        if self._closed:
            raise UsageError("this session is stopped; use provider.resume() to continue it")
        wanted = model if model is not None else self._plan.options.get("model")
        try:
            await self._client.set_model(wanted)
        except Exception as exc:  # claude-agent-sdk raises a bare Exception for a refused or lost request
            raise TransportError(
                f"the Claude Code CLI did not switch the model: {exc}", stderr_tail=self.stderr_tail()
            ) from exc
        self._model_switched = model is not None

    async def fork(self) -> ClaudeHandle:
        """A new session with a copy of this one's history (Claude Code's ``--fork-session``, in a CLI
        of its own); no turn runs until ``send()``. The fork has this session's ``Spec`` (settings,
        approval policy, sandbox) and its own temporary directory. Raises ``UsageError`` while a turn
        runs (the copy would miss its end) or after ``stop()``."""
        if self._closed:
            raise UsageError("fork(): this session is stopped")
        if self.running or self._owed:
            raise UsageError("fork(): wait for the current turn to end first")
        return await self._provider.fork(self._session_id, self._spec)

    async def inject(self, text: str) -> None:
        """Steer the running turn: the CLI shows ``text`` to Claude mid-turn (next model request).

        Raises ``UsageError`` when no turn is running, ``TransportError`` when the CLI is gone.
        """
        turn = self._turn
        if self._closed or turn is None or turn.stream.done:
            raise UsageError("inject(): no turn is running")
        check_text(text, "the injected text")
        message_uuid = str(uuid.uuid4())
        turn.injected.append(message_uuid)
        await self._write(_user_message(text, message_uuid))

    async def interrupt(self) -> None:
        """Stop the running turn but keep the session: its stream ends with ``Error(code="cancelled")``
        at once, the CLI is told to interrupt (its running command is killed), and the next ``send()``
        continues the same session in the same CLI, once the CLI has closed the interrupted turn. A
        no-op when no turn is running."""
        turn = self._turn
        if self._closed or turn is None or turn.stream.done or self._owed:
            return
        if self._finish(turn, Error(code="cancelled", message="interrupted by the caller")):
            self._owe()  # the interrupted turn's ResultMessage still comes: it is not the next turn's
            await self._interrupt()

    async def stop(self) -> None:
        """Interrupt the running turn, end its stream with ``Error(code="cancelled")``, end the CLI.

        Idempotent and safe to race with CLI-exit handling; never raises for a dead CLI. The session
        can be continued with ``provider.resume(session_id, spec)``.
        """
        if self._closed:
            return
        self._closed = True
        self._drained.set()
        turn = self._turn
        if turn is not None and self._finish(turn, Error(code="cancelled", message="stopped by the caller")):
            await self._interrupt()
        await self._disconnect()
        self._host.forget(self)

    # -- provider-facing -----------------------------------------------------------------------------

    async def connect(self) -> None:
        """Start the CLI and complete the handshake; then start reading its messages.

        Raises ``ProviderUnavailable`` (CLI missing or failing to start) or ``TransportError`` (the
        CLI started but refused, e.g. ``resume`` of an unknown session), with the stderr tail.
        """
        try:
            await self._client.connect()
        except CLINotFoundError as exc:
            raise ProviderUnavailable(
                f"Claude Code CLI not found: {exc}",
                tried=[
                    str(self._provider.options.cli_path or "bundled claude-agent-sdk CLI, claude on PATH")
                ],
            ) from exc
        except ResultError as exc:
            reason = _sandbox.refused(str(exc)) if self._plan.no_os_sandbox is None else None
            if reason is not None:
                raise _sandbox.SandboxRefused(reason, self.stderr_tail()) from exc
            raise TransportError(
                f"the Claude Code CLI refused the session: {exc}",
                exit_code=exc.exit_code,
                stderr_tail=self.stderr_tail(),
            ) from exc
        except (ClaudeSDKError, OSError) as exc:
            raise ProviderUnavailable(
                f"cannot start the Claude Code CLI: {exc}", stderr_tail=self.stderr_tail()[-4000:]
            ) from exc
        self._reader = self._host.spawn_task(self._read(), f"claude-reader:{self._session_id}")

    async def start_turn(self, content: str | list[dict[str, Any]]) -> None:
        """Write the next prompt; the new turn is live before the write, so no message is lost."""
        if self._closed:
            raise UsageError("this session is stopped; use provider.resume() to continue it")
        if self._owed:
            try:
                await asyncio.wait_for(self._drained.wait(), _DRAIN_TIMEOUT)
            except TimeoutError:
                await self.stop()
                raise TransportError(
                    "the interrupted turn did not end in time; the session was stopped "
                    "(continue it with provider.resume())",
                    stderr_tail=self.stderr_tail(),
                ) from None
            if self._closed:
                raise UsageError("this session is stopped; use provider.resume() to continue it")
        mapper = TurnMapper(
            self._session_id,
            structured=self._spec.output_schema is not None,
            declined=self._declined,
            prior_total=self._total_tokens,
        )
        turn = _ClaudeTurn(mapper, self._provider.options.event_buffer)
        self._turn = turn
        for notice in self._pending:
            turn.stream.push(notice)
        self._pending.clear()
        try:
            await self._write(_user_message(content, str(uuid.uuid4())))
        except TransportError as exc:
            self._finish(turn, Error(code="process_exited", message=exc.message, data=self._exit_data(None)))
            raise
        if self._spec.timeout is not None and not turn.stream.done:
            turn.timer = asyncio.get_running_loop().call_later(self._spec.timeout, self._on_timeout, turn)
        if self._spec.idle_timeout and not turn.stream.done:
            tools = turn.tools
            turn.watchdog = IdleWatchdog(
                self._spec.idle_timeout, lambda: self._on_idle(turn), busy=lambda: bool(tools)
            )

    def emit(self, event: Event) -> None:
        """Add a non-terminal event to the running turn (provider notices)."""
        turn = self._turn
        if turn is not None:
            turn.stream.push(event)

    def notice_next_turn(self, notices: list[System]) -> None:
        """Notices for the next turn's stream (a fork has no turn until ``send()``)."""
        self._pending.extend(notices)

    # -- internals ---------------------------------------------------------------------------------------

    def _live_turn(self) -> _ClaudeTurn | None:
        turn = self._turn
        return turn if turn is not None and not turn.stream.done and not self._owed else None

    def _finish(self, turn: _ClaudeTurn, event: Result | Error) -> bool:
        if not turn.stream.finish(event):
            return False
        if turn.timer is not None:
            turn.timer.cancel()
            turn.timer = None
        if turn.watchdog is not None:
            turn.watchdog.cancel()
        return True

    def _exit_data(self, exit_code: int | None) -> dict[str, Any]:
        return {"exit_code": exit_code, "stderr_tail": self.stderr_tail()[-4000:]}

    async def _write(self, message: dict[str, Any]) -> None:
        try:
            await self._client.query(_once(message))
        except ClaudeSDKError as exc:
            raise TransportError(
                f"cannot write to the Claude Code CLI: {exc}", stderr_tail=self.stderr_tail()
            ) from exc

    async def _interrupt(self) -> None:
        try:
            await asyncio.wait_for(self._client.interrupt(), _CONTROL_TIMEOUT)
        except Exception as exc:  # TimeoutError included; the turn already ended for the caller
            logger.debug("interrupt of Claude session %s failed: %s", self._session_id, exc)

    async def _disconnect(self) -> None:
        try:
            await asyncio.wait_for(self._client.disconnect(), _DISCONNECT_TIMEOUT)
        except Exception as exc:  # TimeoutError included
            logger.debug("disconnect of Claude session %s failed: %s", self._session_id, exc)
        reader = self._reader
        if reader is not None and reader is not asyncio.current_task() and not reader.done():
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await reader
        if self._temp is not None and self._closed:
            # The CLI is gone: nothing writes there any more. Off the loop: removing a tree can take
            # tens of milliseconds on a loaded machine, and every other session waits meanwhile.
            await asyncio.to_thread(self._temp.remove)

    def _on_timeout(self, turn: _ClaudeTurn) -> None:
        turn.timer = None
        message = f"turn exceeded its timeout of {self._spec.timeout:g}s and was interrupted"
        if self._finish(turn, Error(code="timeout", message=message, retryable=True)):
            self._owe()
            self._host.spawn_task(self._interrupt(), f"interrupt:{self._session_id}")

    def _on_idle(self, turn: _ClaudeTurn) -> None:
        limit = self._spec.idle_timeout
        message = f"no event from the agent for {limit:g}s (idle timeout); the turn was interrupted"
        if self._finish(turn, Error(code="timeout", message=message, data={"idle_timeout": limit})):
            self._owe()
            self._host.spawn_task(self._interrupt(), f"interrupt:{self._session_id}")

    def _owe(self) -> None:
        self._owed += 1
        self._drained.clear()

    # -- the reader ------------------------------------------------------------------------------------

    async def _read(self) -> None:
        error: Error
        try:
            async for message in self._client.receive_messages():
                self._on_message(message)
            error = Error(
                code="process_exited", message="the Claude Code CLI exited", data=self._exit_data(None)
            )
        except asyncio.CancelledError:
            raise
        except ProcessError as exc:  # also ResultError: the CLI reported an error and exited
            error = Error(
                code="process_exited",
                message=f"the Claude Code CLI exited with code {exc.exit_code}: {exc}",
                data=self._exit_data(exc.exit_code),
            )
        except CLIJSONDecodeError as exc:
            error = Error(
                code="protocol_error", message=f"unreadable CLI output: {exc}", data=self._exit_data(None)
            )
        except CLIConnectionError as exc:
            error = Error(code="process_exited", message=str(exc), data=self._exit_data(None))
        except Exception as exc:  # MessageParseError and anything newer: the stream is unusable
            error = Error(
                code="protocol_error",
                message=f"{type(exc).__name__}: {exc}",
                data=self._exit_data(None),
            )
        self._ended(error)

    def _ended(self, error: Error) -> None:
        """The CLI's message stream ended: fail the live turn and close. Sync, idempotent."""
        if self._closed:
            return
        self._closed = True
        self._drained.set()
        if self._turn is not None:
            self._finish(self._turn, error)
        self._host.spawn_task(self._disconnect(), f"claude-reap:{self._session_id}")
        self._host.forget(self)

    def _on_message(self, message: Message) -> None:
        if isinstance(message, SystemMessage) and message.subtype == "init":
            reported = message.data.get("session_id")
            if isinstance(reported, str) and reported != self._session_id:
                self._host.rekey(self, reported)
                self._session_id = reported
        if self._owed:
            # Everything up to the owed ResultMessage belongs to a turn the caller has already seen end.
            if isinstance(message, ResultMessage):
                self._owed -= 1
                if not self._owed:
                    self._drained.set()
            return
        turn = self._turn
        if turn is None or turn.stream.done:
            logger.debug("Claude message outside a turn dropped: %s", type(message).__name__)
            return
        if isinstance(message, ResultMessage):
            self._check_injected(turn, message)
        turn.mapper.session_id = self._session_id
        if turn.watchdog is not None:
            turn.watchdog.seen = True
        for event in turn.mapper.feed(message):
            if isinstance(event, Result | Error):
                self._total_tokens = turn.mapper.total
                self._finish(turn, event)
            else:
                if isinstance(event, ToolUse):
                    turn.tools.add(event.id)
                elif isinstance(event, ToolResult):
                    turn.tools.discard(event.id)
                elif type(event) is RateLimits:
                    self._provider.observe_rate_limits(event)
                turn.stream.push(event)

    def _check_injected(self, turn: _ClaudeTurn, message: ResultMessage) -> None:
        taken = message.user_message_uuids
        if not turn.injected or taken is None or len(taken) >= 64:  # the CLI lists at most 64
            return
        late = [u for u in turn.injected if u not in taken]
        if late:
            turn.stream.push(System(subtype="inject_late", data={"count": len(late)}))
            self._owe()

    # -- approvals -------------------------------------------------------------------------------------

    async def _ask_user(self, tool_input: dict[str, Any]) -> PermissionResultAllow | PermissionResultDeny:
        """Claude asks the user: the ``input_handler``, else canned answers or a decline Claude reads."""
        options = self._provider.options
        request = _questions.to_input_request(tool_input, self._session_id)
        canned = (self._spec.answers, options.canned_answers)  # the session's own answers first
        answer = await answer_input(request, options.input_handler, canned, self.emit)
        return _questions.to_permission(request, tool_input, answer)

    async def _ask_hook(
        self, hook_input: HookInput, tool_use_id: str | None, context: HookContext
    ) -> HookJSONOutput:
        return _ASK

    async def _can_use_tool(
        self, tool_name: str, tool_input: dict[str, Any], context: ToolPermissionContext
    ) -> PermissionResultAllow | PermissionResultDeny:
        if tool_name in _approvals.INTERNAL_TOOLS:
            return PermissionResultAllow()
        if tool_name == _questions.ASK_USER:
            return await self._ask_user(tool_input)
        request, decision = await _approvals.decide(
            self._policy,
            tool_name,
            tool_input,
            cwd=self._cwd,
            writable_roots=self._roots,
            home=self._home,
            sandboxed=self._plan.no_os_sandbox is None,
        )
        if self._plan.sandbox == "read-only" and request.kind == "file_change" and decision.accepted:
            # The file tools run in the CLI, outside the OS sandbox that keeps commands read-only.
            decision = Decision(
                action="decline",
                rule="path-escape",
                reason="the session is read-only (Spec.sandbox): its file tools may not write",
            )
        handler = self._provider.options.approval_handler
        if handler is not None and self._live_turn() is not None:
            decision = await refine(
                handler, request, decision, self.emit, lambda r: _approvals.describe(r, tool_name)
            )
        turn = self._live_turn()
        if turn is None:
            decision = Decision(action="decline", reason="the turn is no longer running", rule="turn-ended")
        about = _approvals.describe(request, tool_name)
        use_id = f"approval:{context.tool_use_id or next(self._approvals)}"
        if turn is not None:
            for event in approval_events(use_id, about, decision):
                turn.stream.push(event)
        if not decision.accepted and context.tool_use_id:
            self._declined.add(context.tool_use_id)
        return _approvals.to_permission(decision)
