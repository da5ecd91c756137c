"""``run_task``: implement -> gate -> (review) -> follow-up, on one provider session.

Theory of operation
-------------------
::

    validate (UsageError before any work) -> [own provider: check_provider, start]
        -> HEAD recorded -> spawn(spec) -> turn
    turn ends with a retryable Error, retries left
                                   -> ``runner.retry`` notice, backoff, the same prompt again (on the
                                      same session; after an app-server crash, ``provider.resume``)
    turn ends with Error           -> done: failed / timeout / cancelled / error (fatal)
    turn ends with Result -> gate
        gate fails                 -> follow-up turn carrying the gate's output, or failed when the
                                      follow-up budget (``max_followups``) is spent
        gate passes -> review (when configured and anything changed since the start)
            findings >= threshold  -> follow-up turn carrying the findings (same budget); the gate
                                      runs again after it, then the review
            none                   -> succeeded

Every event of the implementing session (source ``agent``), of review sessions (``review``) and the
runner's own notices (``runner``: ``System(subtype="runner.<what>")``) goes to the transcript and to
``on_event``, in order.

Stopping: setting ``stop`` (or the task's ``timeout`` expiring) interrupts the running turn, gate or
review and returns a result with status ``cancelled`` (``timeout``). Cancelling the task that awaits
``run_task`` does the same cleanup, then lets ``CancelledError`` propagate. The session is always
stopped (``Handle.stop()``) before ``run_task`` returns, and a provider ``run_task`` created is shut down.
On a provider it was given (shared: a batch's, a Ray node's), a session that ended other than by a stop
is archived (``Provider.archive_session``: its memory is given back; ``resume`` brings it back), and so
is each review's session.

Retries: see ``runner/_retry.py``; each is a ``runner.retry`` notice, counted in ``TaskResult.retries``.

Fatal outcomes (``TaskResult.fatal``): the provider is unavailable, the credential is missing or
refused (status ``error``; the CLI exits 3), or the app-server died (status ``cancelled``: the task
was interrupted and its session can be resumed). A batch stops on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from agent_fleet._provider.fastnew import positional_new
from agent_fleet._scripted import served_by_scripted_model
from agent_fleet.contract import Handle, Provider
from agent_fleet.errors import (
    AgentFleetError,
    AuthenticationError,
    ProviderUnavailable,
    StorageError,
    TransportError,
    TurnFailed,
    UsageError,
)
from agent_fleet.events import Error, Result, TextDelta
from agent_fleet.policy import ApprovalPolicy
from agent_fleet.runner import _git
from agent_fleet.runner._counters import TaskCounters
from agent_fleet.runner._outage import ModelOutage, ProgressWatch
from agent_fleet.runner._record import tail
from agent_fleet.runner._resume import INTERRUPTED_FOLLOWUP, open_session
from agent_fleet.runner._retry import should_retry
from agent_fleet.runner._task_retry import TaskRetries
from agent_fleet.runner._task_types import ReviewConfig, Task, TaskResult, TaskStatus
from agent_fleet.runner._types import EventSink, Source, TaskEvent, notice
from agent_fleet.runner.gate import GateConfig, GateResult, run_gate
from agent_fleet.runner.providers import (
    approvals_enforced,
    check_permission_enforced,
    check_provider,
    make_provider,
    os_sandbox,
    provider_entry,
)
from agent_fleet.runner.review import (
    PRIORITY_NAMES,
    ReviewResult,
    ReviewTarget,
    followup_prompt,
    review_target,
)
from agent_fleet.runner.transcript import TranscriptWriter

__all__ = ["ReviewConfig", "Task", "TaskResult", "TaskStatus", "run_task", "validate_task"]

#: How much of a failed gate's output its ``runner.gate`` notice carries (the live view's last lines).
_GATE_TAIL = 2000

# One TaskEvent per streamed event: built without the frozen __init__ (see _fastnew).
_new_task_event = positional_new(TaskEvent)


def _resolve_cwd(cwd: str | os.PathLike[str] | None) -> Path:
    path = Path(cwd if cwd is not None else os.getcwd()).expanduser()
    if not path.is_dir():
        raise UsageError(f"working directory {str(path)!r} does not exist or is not a directory")
    return path.resolve()


async def validate_task(task: Task, *, provider_name: str | None = None) -> Task:
    """Check ``task`` before any work; return it with ``spec.cwd`` resolved. Raises ``UsageError``."""
    cwd = _resolve_cwd(task.spec.cwd)
    ApprovalPolicy(task.spec.permission)  # a bad --allow/--deny regex is a UsageError naming it
    if provider_name is not None:
        check_permission_enforced(task.spec, provider_name)
    if task.review is not None and provider_name is not None and _reviewer(provider_name) is None:
        raise UsageError(
            f"review needs a provider that can review; {provider_name} cannot (use codex or codex-exec)"
        )
    if (task.gate.require_commit or task.review is not None) and await _git.toplevel(cwd) is None:
        what = "--require-commit" if task.gate.require_commit else "review"
        raise UsageError(f"{what} needs a git repository, and {str(cwd)!r} is not inside one")
    return replace(task, spec=replace(task.spec, cwd=str(cwd)))


async def run_task(
    task: Task,
    *,
    provider: Provider | None = None,
    provider_name: str = "codex",
    options: Any = None,
    on_event: EventSink | None = None,
    transcript: str | os.PathLike[str] | TranscriptWriter | None = None,
    stop: asyncio.Event | None = None,
    resume_session: str | None = None,
    start_head: str | None = None,
    outage: ModelOutage | None = None,
) -> TaskResult:
    """Run ``task`` to a ``TaskResult`` (see the module docstring).

    ``resume_session``: continue that interrupted session instead (see ``runner._resume.open_session``).
    ``start_head``: the commit the task's work is measured from (``require_commit``, the review, the
    diff) when it continues an earlier run: HEAD when the task first started. Default: HEAD now.
    ``outage``: the batch's ``ModelOutage`` the task reports to (see ``runner._outage``).

    With ``provider`` (started or not) the session runs on it and it is left running; otherwise a
    provider called ``provider_name`` is made from ``options`` (the registry entry's options type, e.g.
    ``ClaudeOptions`` for ``claude``; checked first, see ``check_provider``) and shut down at the end.
    Raises ``UsageError`` (bad task, before any work); every other failure is a result.
    """
    name = provider.name if provider is not None else provider_name
    reviews_itself = provider is not None and provider.capabilities.supports_review
    task = await validate_task(task, provider_name=None if reviews_itself else name)
    if provider is not None:
        check_permission_enforced(task.spec, name, provider.capabilities)
    writer: TranscriptWriter | None
    own_writer = False
    if transcript is None or isinstance(transcript, TranscriptWriter):
        writer = transcript
    else:
        writer = TranscriptWriter(transcript)
        own_writer = True
    run = _TaskRun(task, provider, name, options, on_event, writer)
    run.resume_session = resume_session
    run.base_head = start_head
    run.outage = outage
    try:
        return await run.run(stop)
    finally:
        if own_writer and writer is not None:
            writer.close()


def _relative(path: str, cwd: str | None) -> str:
    """``path`` relative to ``cwd`` when it lies inside it."""
    if cwd is None or not os.path.isabs(path):
        return path
    rel = os.path.relpath(path, cwd)
    return path if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


class _TaskRun(TaskRetries):
    def __init__(
        self,
        task: Task,
        provider: Provider | None,
        provider_name: str,
        options: Any,
        on_event: EventSink | None,
        writer: TranscriptWriter | None,
    ) -> None:
        self.task = task
        self.provider = provider
        self.provider_name = provider_name
        self.options = options
        self.on_event = on_event
        self.writer = writer
        self.cwd = str(task.spec.cwd)
        # outcome
        self.status: TaskStatus = "failed"
        self.reason = "the task did not finish"
        self.error_code: str | None = None
        self.fatal = False
        self.followups = 0
        self.session_id: str | None = None
        self.gate: GateResult | None = None
        self.review: ReviewResult | None = None
        self.reviews = 0
        self.final_text = ""
        self.start_head: str | None = None
        self.counters = TaskCounters()
        self._end_head: str | None = None
        self.resume_session: str | None = None
        self.base_head: str | None = None  # an earlier run's start (a resumed task's work began there)
        self.deadline: float | None = None  # monotonic: when the task's timeout expires
        self.core: asyncio.Task[None] | None = None
        self.outage: ModelOutage | None = None
        self.stopped_for_outage = False  # the silent turn's session was stopped: the retry resumes it
        self._ending: set[asyncio.Task[bool]] = set()

    # -- events ------------------------------------------------------------------------------------

    def emit(self, task_event: TaskEvent) -> None:
        self.counters.feed(task_event)
        try:
            if self.writer is not None:
                self.writer.write(task_event)
            if self.on_event is not None:
                self.on_event(task_event)
        except StorageError as exc:
            self.storage_failed(exc)

    def storage_failed(self, exc: StorageError) -> None:
        """The task's record cannot be written (a full disk): stop the task, interrupted (resumable)."""
        if self.error_code == "storage_error":
            return
        self.finish("cancelled", f"stopped: {exc}", code="storage_error")
        self.writer = None  # (it writes nothing more anyway)
        if self.core is not None and not self.core.done():
            self.core.cancel()

    def event(self, source: Source, event: Any) -> None:
        self.emit(_new_task_event(self.task.id, source, event, time.time()))

    def note(self, subtype: str, /, **data: Any) -> None:
        self.emit(notice(self.task.id, subtype, **data))

    def finish(
        self, status: TaskStatus, reason: str, *, code: str | None = None, fatal: bool = False
    ) -> None:
        self.status, self.reason, self.error_code, self.fatal = status, reason, code, fatal

    # -- outer: stop / timeout / cancellation ------------------------------------------------------

    async def run(self, stop: asyncio.Event | None) -> TaskResult:
        started = time.monotonic()
        if self.task.timeout is not None:
            self.deadline = started + self.task.timeout
        spec = self.task.spec
        self.note(
            "started",
            prompt=spec.prompt,
            cwd=self.cwd,
            provider=self.provider_name,
            model=spec.model,
            max_followups=self.task.max_followups,
            approvals_enforced=approvals_enforced(self.provider_name, self.provider),
            scripted=served_by_scripted_model(
                self.options if self.provider is None else getattr(self.provider, "options", None)
            ),
            sandbox=spec.sandbox or "workspace-write",
            **os_sandbox(self.provider_name, self.provider),
        )
        if self.outage is not None:
            self.outage.enter(self.task.id)
        core = self.core = asyncio.get_running_loop().create_task(self._core(), name=f"task:{self.task.id}")
        stopper = asyncio.get_running_loop().create_task(stop.wait()) if stop is not None else None
        try:
            waiting = {core} | ({stopper} if stopper is not None else set())
            await asyncio.wait(waiting, timeout=self.task.timeout, return_when=asyncio.FIRST_COMPLETED)
            if not core.done():
                if stop is not None and stop.is_set():
                    self.finish("cancelled", "stopped before it finished", code="cancelled")
                else:
                    self.finish(
                        "timeout",
                        f"the task exceeded its timeout of {self.task.timeout:g}s",
                        code="timeout",
                    )
                core.cancel()
                await asyncio.wait([core])
            elif not core.cancelled() and (error := core.exception()) is not None:
                raise error  # a bug, not an outcome: the core turns every expected failure into a status
        except asyncio.CancelledError:
            self.finish("cancelled", "cancelled before it finished", code="cancelled")
            core.cancel()
            await asyncio.wait([core])
            self._finished(started)
            raise
        finally:
            if stopper is not None:
                stopper.cancel()
            if self.outage is not None:
                self.outage.leave(self.task.id)
        return self._finished(started)

    def _finished(self, started: float) -> TaskResult:
        result = TaskResult(
            task_id=self.task.id,
            status=self.status,
            reason=self.reason,
            followups=self.followups,
            retries=self.counters.retries,
            duration=time.monotonic() - started,
            usage=self.counters.usage,
            session_id=self.session_id,
            cwd=self.cwd,
            gate=self.gate,
            review=self.review,
            reviews=self.reviews,
            final_text=self.final_text,
            start_head=self.start_head,
            end_head=self._end_head,
            commands=self.counters.commands,
            declined=self.counters.declined,
            error_code=self.error_code,
            fatal=self.fatal,
            transcript=self.writer.path if self.writer is not None else None,
            files_changed=tuple(dict.fromkeys(_relative(p, self.cwd) for p in self.counters.files)),
        )
        self.note("finished", **{k: v for k, v in result.to_dict().items() if k != "final_text"})
        return result

    # -- core --------------------------------------------------------------------------------------

    async def _core(self) -> None:
        owned: Provider | None = None
        review_provider: Provider | None = None
        try:
            provider = self.provider
            if provider is None:
                check_provider(self.provider_name, self.options)
                provider = owned = make_provider(self.provider_name, self.options)
                await provider.start()
            if self.task.review is not None:
                if provider.capabilities.supports_review:
                    review_provider = provider
                else:
                    reviewer = _reviewer(provider.name)
                    if reviewer is None:
                        raise UsageError(f"the {provider.name} provider has no review")
                    review_provider = make_provider(reviewer, provider.options)
                    await review_provider.start()
            self.start_head = self.base_head or await _git.head(self.cwd)
            await self._session(provider, review_provider)
        except AuthenticationError as exc:
            self.finish("error", f"authentication failed: {exc.message}", code="auth_failed", fatal=True)
        except ProviderUnavailable as exc:
            self.finish(
                "error", f"provider unavailable: {exc.message}", code="provider_unavailable", fatal=True
            )
        except TransportError as exc:  # interrupted, not failed: its session lives on in the record
            self.finish("cancelled", _crashed(f"the provider process failed: {exc.message}"), **_CRASH)
        except TurnFailed as exc:  # a review turn failed
            self._turn_error(exc.event, "the review")
        except AgentFleetError as exc:
            self.finish("failed", f"{type(exc).__name__}: {exc}", code="error")
        except TimeoutError:  # the review's own time limit
            self.finish("failed", "the review did not finish in time", code="review_timeout")
        finally:
            with contextlib.suppress(Exception):
                self._end_head = await _git.head(self.cwd)
            for p in {id(x): x for x in (review_provider, owned) if x is not None}.values():
                if p is not self.provider:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(p.shutdown())

    def _turn_error(self, error: Error, what: str) -> None:
        message = f"{what} failed ({error.code}): {error.message}"
        match error.code:
            case "auth_failed":
                self.finish(
                    "error",
                    f"authentication failed: {error.message}. Check the API key or run `codex login`",
                    code=error.code,
                    fatal=True,
                )
            case "app_server_crashed":  # interrupted: resuming continues its session
                self.finish("cancelled", _crashed(message), **_CRASH)
            case "timeout":
                self.finish("timeout", message, code=error.code)
            case "cancelled":
                self.finish("cancelled", message, code=error.code)
            case _:
                self.finish("failed", message, code=error.code)

    async def _session(self, provider: Provider, review_provider: Provider | None) -> None:
        await self._pace(provider)
        handle, self.resume_session = await open_session(
            provider, self.task.spec, self.resume_session, self.note
        )
        prompt = INTERRUPTED_FOLLOWUP if self.resume_session is not None else self.task.spec.prompt  # retried
        attempt = 1
        try:
            with contextlib.suppress(AgentFleetError):
                self.session_id = handle.session_id
                resumed = self.resume_session is not None
                self.note("session", session_id=self.session_id, resumed=resumed, start_head=self.start_head)
            while True:
                terminal = await self._turn(handle)
                if isinstance(terminal, Error):
                    if await self._outage_retry(terminal):  # the batch waits the model out: not counted
                        handle = await self._retry(provider, handle, terminal, prompt, 0, 0.0, None)
                        continue
                    if not should_retry(terminal, attempt, self.task.retries, session_id=self.session_id):
                        self._turn_error(terminal, "the turn")
                        return
                    delay, hint = self._retry_delay(provider, terminal, attempt)
                    if self.deadline is not None and time.monotonic() + delay > self.deadline:
                        # The wait would end past the task's timeout: no retry can run, so the turn's
                        # error (not "timeout") is the outcome, and no time is spent waiting for it.
                        self._turn_error(terminal, "the turn")
                        self.reason += (
                            f"; not retried: the wait of {delay:.0f}s would pass the task's timeout"
                        )
                        return
                    handle = await self._retry(provider, handle, terminal, prompt, attempt, delay, hint)
                    attempt += 1
                    continue
                attempt = 1
                self.final_text = terminal.text
                if self.session_id is None:
                    self.session_id = terminal.session_id
                next_prompt = await self._check(review_provider)
                if next_prompt is None:
                    return
                prompt = next_prompt
                self.followups += 1
                self.note("followup", number=self.followups, limit=self.task.max_followups, prompt=prompt)
                await self._pace(provider)
                await handle.send(prompt)
        finally:
            with contextlib.suppress(Exception):
                await asyncio.shield(handle.stop())
            if self.error_code != "app_server_crashed":
                await self._release(provider, self.session_id)

    async def _turn(self, handle: Handle) -> Result | Error:
        task_id, writer, on_event, clock = self.task.id, self.writer, self.on_event, time.time
        outage = self.outage
        watch = ProgressWatch(
            self.task.model_timeout,
            lambda: self._end_silent_turn(handle),
            (lambda: outage.progress(task_id)) if outage is not None else None,
        )
        dog = watch.dog
        try:
            async for event in handle.events():
                if type(event) is TextDelta:  # most events of a turn: straight to the sinks (emit's work)
                    if dog is not None:
                        dog.seen = True
                    task_event = _new_task_event(task_id, "agent", event, clock())
                    try:
                        if writer is not None:
                            writer.write(task_event)
                        if on_event is not None:
                            on_event(task_event)
                    except StorageError as exc:
                        self.storage_failed(exc)
                    continue
                watch.feed(event)
                if isinstance(event, Result | Error):
                    event = watch.outcome(event)
                    self.event("agent", event)
                    return event
                self.event("agent", event)
        finally:
            watch.cancel()
        return Error(code="protocol_error", message="the event stream ended without a terminal event")

    async def _check(self, review_provider: Provider | None) -> str | None:
        """Gate, then review. None when the task is done (status set); else the follow-up prompt."""
        task = self.task
        budget_left = self.followups < task.max_followups
        if task.gate.enabled:
            self.note("gate_started", require_commit=task.gate.require_commit, command=task.gate.command)
            self.gate = await run_gate(self._gate_config(), self.cwd, self.start_head)
            checks = [
                {"name": c.name, "passed": c.passed, "detail": c.detail, "exit_code": c.exit_code}
                for c in self.gate.checks
            ]
            failed_output = "\n".join(c.output for c in self.gate.checks if not c.passed and c.output)
            self.note(
                "gate",
                passed=self.gate.passed,
                summary=self.gate.summary,
                checks=checks,
                output_tail=tail(failed_output.rstrip(), _GATE_TAIL),
            )
            if not self.gate.passed:
                if budget_left:
                    return self.gate.followup_prompt()
                self.finish("failed", f"the gate never passed: {self.gate.summary}", code="gate_failed")
                return None
        if task.review is not None and review_provider is not None:
            target = await review_target(self.cwd, self.start_head)
            if target is None:
                self.note("review_skipped", reason="nothing changed since the task started")
            else:
                review = await self._review(review_provider, task.review, target)
                threshold = task.review.threshold
                blocking = review.blocking(threshold)
                if blocking:
                    if budget_left:
                        return followup_prompt(review, threshold)
                    self.finish(
                        "failed",
                        f"the review still reports {len(blocking)} finding(s) at or above "
                        f"{PRIORITY_NAMES[threshold]}: {blocking[0].title}",
                        code="review_failed",
                    )
                    return None
        self.finish("succeeded", self._success_reason())
        return None

    def _gate_config(self) -> GateConfig:
        """The gate's settings for this run: its command bounded by ``command_timeout`` and by what is
        left of the task's timeout (each run: the gate runs again after every follow-up)."""
        gate = self.task.gate
        if self.deadline is None:
            return gate
        left = max(self.deadline - time.monotonic(), 0.001)
        if gate.command_timeout is not None and gate.command_timeout <= left:
            return gate
        return replace(gate, command_timeout=left)

    def _success_reason(self) -> str:
        parts = []
        if self.gate is not None:
            parts.append(f"gate {self.gate.summary}")
        if self.review is not None:
            parts.append(f"review: {len(self.review.findings)} finding(s), none blocking")
        return "; ".join(parts) if parts else "the agent finished its turn"

    async def _review(self, provider: Provider, config: ReviewConfig, target: ReviewTarget) -> ReviewResult:
        self.reviews += 1
        self.note("review_started", number=self.reviews, target=target.to_dict())
        async with asyncio.timeout(config.timeout):
            review = await provider.review(
                target,
                cwd=self.cwd,
                model=config.model or self.task.spec.model,
                on_event=lambda event: self.event("review", event),
            )
        self.review = review
        await self._release(provider, review.session_id)
        self.note(
            "review",
            number=self.reviews,
            session_id=review.session_id,
            explanation=review.explanation,
            findings=[
                {"title": f.title, "priority": f.priority, "location": f.location, "body": f.body}
                for f in review.findings
            ],
            blocking=len(review.blocking(config.threshold)),
        )
        return review


_CRASH: dict[str, Any] = {"code": "app_server_crashed", "fatal": True}


def _crashed(message: str) -> str:
    return f"{message}; interrupted (`agent-fleet batch --resume` continues its session)"


def _reviewer(provider_name: str) -> str | None:
    """The registry entry that reviews ``provider_name``'s work (None: no review; unknown: UsageError)."""
    return provider_entry(provider_name).reviewer
