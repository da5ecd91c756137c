"""Codex code review of a task's changes, on the shared app-server (``CodexProvider.review``).

Theory of operation (codex 0.163)
---------------------------------
``review/start`` with ``"delivery": "detached"`` on a thread opened by ``CodexProvider`` fails
(``-32600 paginated threads do not support detached review``) and detached delivery is deprecated, so a
``ReviewSession`` does what codex recommends instead: ``thread/start`` a fresh thread in the task's
directory (sandbox ``read-only``, approval policy ``never``: the reviewer can read and run read-only
commands, never write, and never asks for an approval), subscribe to its id, then ``review/start``
*inline* on it with one of the targets::

    {"type": "commit", "sha": ...}              # exactly one new commit and a clean work tree
    {"type": "baseBranch", "branch": <sha>}    # several commits and/or uncommitted changes
    {"type": "uncommittedChanges"}             # no commit, only work-tree changes

The review turn emits ``item/started`` ``enteredReviewMode`` (``review``: a label such as
``commit 1a2b3c4``), the usual items, and ``exitedReviewMode`` whose ``review`` field is codex's
*rendered* text of the model's JSON verdict, not the JSON itself::

    <overall_explanation>

    Review comment:                      (or "Full review comments:" for several)

    - [P0] <title> — /abs/path.py:1-3
      <body, indented two spaces>

The numeric ``priority`` of the model's JSON is not carried through; the priority is the ``[Pn]`` tag
the review prompt tells the model to put at the start of every title. ``parse_review`` reads that text;
a finding without a tag has priority ``None`` and counts as P3 (lowest) for thresholds.

The provider-neutral ``ReviewTarget`` becomes the wire target in ``wire_target``; the result is the
contract's ``ReviewResult`` with ``Finding``s.

The model receives the review as a request whose ``client_metadata`` has ``x-openai-subagent: review``
and whose developer message is codex's review prompt with the JSON output schema
(``findings[{title, body, confidence_score, priority, code_location}], overall_correctness,
overall_explanation, overall_confidence_score``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Callable
from typing import Any

from agent_fleet.codex import _overload
from agent_fleet.codex.mapping import TurnMapper
from agent_fleet.contract import Finding, ReviewResult, ReviewTarget
from agent_fleet.errors import ConnectionClosed, RemoteProtocolError, TurnFailed
from agent_fleet.events import Error, Event, Result, System
from agent_fleet.jsonrpc import Connection, Notification, Request

__all__ = ["ReviewSession", "parse_review", "wire_target"]

_CONTROL_TIMEOUT = 5.0
_FINDING = re.compile(r"^- (?P<title>.+?)(?: \u2014 (?P<location>\S.*?:\d+-\d+))?$")
_TAG = re.compile(r"^\[P([0-3])\]")
_HEADERS = ("Review comment:", "Full review comments:")


def wire_target(target: ReviewTarget) -> dict[str, Any]:
    """The ``review/start`` target for ``target``."""
    match target.kind:
        case "commit":
            out: dict[str, Any] = {"type": "commit", "sha": target.sha}
            if target.title:
                out["title"] = target.title
            return out
        case "base":
            return {"type": "baseBranch", "branch": target.base}
        case _:
            return {"type": "uncommittedChanges"}


def parse_review(text: str) -> tuple[str, list[Finding]]:
    """Split codex's rendered review text into (overall explanation, findings)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() in _HEADERS), None)
    if start is None:
        return text.strip(), []
    explanation = "\n".join(lines[:start]).strip()
    findings: list[Finding] = []
    current: dict[str, Any] | None = None
    body: list[str] = []

    def flush() -> None:
        if current is not None:
            findings.append(Finding(**current, body="\n".join(body).strip()))

    for line in lines[start + 1 :]:
        match = _FINDING.match(line)
        if match:
            flush()
            title = match.group("title").strip()
            tag = _TAG.match(title)
            current = {
                "title": title,
                "priority": int(tag.group(1)) if tag else None,
                "location": match.group("location") or "",
            }
            body = []
        elif current is not None:
            body.append(line.removeprefix("  "))
    flush()
    return explanation, findings


class ReviewSession:
    """One review on ``provider``'s app-server (see the module docstring).

    ``run(target)`` returns a ``ReviewResult``; it raises ``TurnFailed`` when the review turn fails,
    ``ConnectionClosed`` when the app-server goes away, ``RPCError`` when codex refuses the request.
    Cancelling ``run`` interrupts the review turn. ``on_event`` receives every mapped event of the review
    thread plus ``System(subtype="review.entered"|"review.exited")`` for the review-mode items.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        rpc_timeout: float | None,
        cwd: str | os.PathLike[str],
        model: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        timeout: float | None = None,
    ) -> None:
        self._conn = conn
        self._rpc_timeout = rpc_timeout
        self._cwd = os.fspath(cwd)
        self._model = model
        self._on_event = on_event
        self._timeout = timeout
        self.thread_id: str | None = None

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    async def run(self, target: ReviewTarget) -> ReviewResult:
        conn = self._conn
        rpc_timeout = self._rpc_timeout
        params: dict[str, Any] = {"cwd": self._cwd, "approvalPolicy": "never", "sandbox": "read-only"}
        if self._model is not None:
            params["model"] = self._model
        started = await _overload.request(conn, "thread/start", params, timeout=rpc_timeout)
        thread = started.get("thread") if isinstance(started, dict) else None
        thread_id = thread.get("id") if isinstance(thread, dict) else None
        if not isinstance(thread_id, str):
            raise RemoteProtocolError(f"thread/start response without a thread id: {started!r}")
        self.thread_id = thread_id
        queue: asyncio.Queue[Notification | None] = asyncio.Queue()

        async def refuse(msg: Request) -> None:
            # approvalPolicy "never": codex should not ask; refuse anything it does ask.
            with contextlib.suppress(Exception):
                await conn.respond_error(msg.id, -32601, f"agent-fleet review does not handle {msg.method}")

        sub = conn.subscribe(thread_id, on_notification=queue.put_nowait, on_request=refuse)
        conn.on_close(lambda cause: queue.put_nowait(None))
        turn_id: str | None = None
        finished = False
        try:
            response = await _overload.request(
                conn,
                "review/start",
                {"threadId": thread_id, "target": wire_target(target), "delivery": "inline"},
                timeout=rpc_timeout,
            )
            turn = response.get("turn") if isinstance(response, dict) else None
            turn_id = turn.get("id") if isinstance(turn, dict) else None
            async with asyncio.timeout(self._timeout):
                result = await self._consume(queue, thread_id, target)
            finished = True
            return result
        finally:
            if not finished and turn_id is not None and not conn.closed:
                with contextlib.suppress(Exception):
                    await _overload.request(
                        conn,
                        "turn/interrupt",
                        {"threadId": thread_id, "turnId": turn_id},
                        timeout=_CONTROL_TIMEOUT,
                    )
            sub.close()
            if not conn.closed:
                with contextlib.suppress(Exception):
                    await _overload.request(
                        conn, "thread/unsubscribe", {"threadId": thread_id}, timeout=_CONTROL_TIMEOUT
                    )

    async def _consume(
        self, queue: asyncio.Queue[Notification | None], thread_id: str, target: ReviewTarget
    ) -> ReviewResult:
        mapper = TurnMapper(thread_id)
        review_text: str | None = None
        while True:
            msg = await queue.get()
            if msg is None:
                raise ConnectionClosed("the codex app-server closed the connection during the review")
            params = msg.params if isinstance(msg.params, dict) else {}
            item = params.get("item") if isinstance(params.get("item"), dict) else None
            kind = item.get("type") if item is not None else None
            if kind in ("enteredReviewMode", "exitedReviewMode"):
                assert item is not None
                if msg.method == "item/completed" and kind == "enteredReviewMode":
                    self._emit(System(subtype="review.entered", data={"target": item.get("review")}))
                elif msg.method == "item/completed" and kind == "exitedReviewMode":
                    review_text = str(item.get("review") or "")
                    self._emit(System(subtype="review.exited", data={"review": review_text}))
                continue
            for event in mapper.feed(msg.method, msg.params):
                if isinstance(event, Error):
                    self._emit(event)
                    raise TurnFailed(event)
                self._emit(event)
                if isinstance(event, Result):
                    text = review_text if review_text is not None else event.text
                    explanation, findings = parse_review(text)
                    return ReviewResult(
                        text=text,
                        findings=tuple(findings),
                        explanation=explanation,
                        session_id=thread_id,
                        target=target,
                        usage=mapper.usage,
                    )
