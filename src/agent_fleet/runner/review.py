"""Codex code review of a task's changes, on the shared app-server.

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

The model receives the review as a request whose ``client_metadata`` has ``x-openai-subagent: review``
and whose developer message is codex's review prompt with the JSON output schema
(``findings[{title, body, confidence_score, priority, code_location}], overall_correctness,
overall_explanation, overall_confidence_score``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from agent_fleet.codex.mapping import TurnMapper
from agent_fleet.errors import ConnectionClosed, RemoteProtocolError, TurnFailed, UsageError
from agent_fleet.events import Error, Event, Result, System, TokenUsage
from agent_fleet.jsonrpc import Notification, Request
from agent_fleet.runner import _git

if TYPE_CHECKING:
    from agent_fleet.codex import CodexProvider

__all__ = [
    "PRIORITY_NAMES",
    "Finding",
    "ReviewResult",
    "ReviewSession",
    "parse_priority",
    "parse_review",
    "review_target",
]

logger = logging.getLogger("agent_fleet.runner")

PRIORITY_NAMES: Final = ("P0", "P1", "P2", "P3")
_CONTROL_TIMEOUT = 5.0
_FINDING = re.compile(r"^- (?P<title>.+?)(?: \u2014 (?P<location>\S.*?:\d+-\d+))?$")
_TAG = re.compile(r"^\[P([0-3])\]")
_HEADERS = ("Review comment:", "Full review comments:")


def parse_priority(text: str) -> int:
    """``"P1"`` / ``"p1"`` / ``"1"`` -> 1. Raises ``UsageError`` for anything else."""
    value = text.strip().upper().removeprefix("P")
    if value in ("0", "1", "2", "3"):
        return int(value)
    raise UsageError(f"review threshold must be one of {', '.join(PRIORITY_NAMES)}, not {text!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One review finding. ``priority`` is 0 (P0, most severe) to 3, or None when untagged."""

    title: str
    priority: int | None
    location: str = ""
    body: str = ""

    @property
    def rank(self) -> int:
        """The priority used for thresholds (an untagged finding ranks as P3)."""
        return 3 if self.priority is None else self.priority

    def render(self) -> str:
        where = f" ({self.location})" if self.location else ""
        body = f"\n  {self.body.replace(chr(10), chr(10) + '  ')}" if self.body else ""
        return f"- {self.title}{where}{body}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ReviewResult:
    """A finished review: codex's rendered ``text``, the parsed ``findings`` and the ``explanation``."""

    text: str
    findings: tuple[Finding, ...]
    explanation: str
    thread_id: str
    target: dict[str, Any]
    usage: TokenUsage | None = None

    def blocking(self, threshold: int) -> list[Finding]:
        """Findings at or above ``threshold`` (0 = P0 ... 3 = P3)."""
        return [f for f in self.findings if f.rank <= threshold]

    def followup_prompt(self, threshold: int) -> str:
        findings = self.blocking(threshold)
        lines = [
            f"A code review of your changes found {len(findings)} issue(s) at or above "
            f"{PRIORITY_NAMES[threshold]}. Fix each of them, then finish:",
            *(f.render() for f in findings),
        ]
        return "\n".join(lines)


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


async def review_target(cwd: str | os.PathLike[str], start_head: str | None) -> dict[str, Any] | None:
    """The ``review/start`` target for the changes in ``cwd`` since ``start_head``; None when unchanged."""
    commits = await _git.commits_since(cwd, start_head)
    dirty = await _git.is_dirty(cwd)
    current = await _git.head(cwd)
    if commits == 1 and not dirty and current is not None:
        subject = await _git.git(cwd, "log", "-1", "--format=%s", current)
        return {"type": "commit", "sha": current, "title": subject or None}
    if commits and start_head is not None:
        return {"type": "baseBranch", "branch": start_head}
    if commits or dirty:
        # No starting commit to diff against (a fresh repository): review what is uncommitted, or the
        # last commit when the tree is clean.
        if dirty:
            return {"type": "uncommittedChanges"}
        assert current is not None
        return {"type": "commit", "sha": current}
    return None


class ReviewSession:
    """One review on ``provider``'s app-server (see the module docstring).

    ``run(target)`` returns a ``ReviewResult``; it raises ``TurnFailed`` when the review turn fails,
    ``ConnectionClosed`` when the app-server goes away, ``RPCError`` when codex refuses the request.
    Cancelling ``run`` interrupts the review turn. ``on_event`` receives every mapped event of the review
    thread plus ``System(subtype="review.entered"|"review.exited")`` for the review-mode items.
    """

    def __init__(
        self,
        provider: CodexProvider,
        *,
        cwd: str | os.PathLike[str],
        model: str | None = None,
        on_event: Callable[[Event], None] | None = None,
        timeout: float | None = None,
    ) -> None:
        self._provider = provider
        self._cwd = os.fspath(cwd)
        self._model = model
        self._on_event = on_event
        self._timeout = timeout
        self.thread_id: str | None = None

    def _emit(self, event: Event) -> None:
        if self._on_event is not None:
            self._on_event(event)

    async def run(self, target: dict[str, Any]) -> ReviewResult:
        provider = self._provider
        conn = provider.connection
        rpc_timeout = provider.options.rpc_timeout
        params: dict[str, Any] = {"cwd": self._cwd, "approvalPolicy": "never", "sandbox": "read-only"}
        if self._model is not None:
            params["model"] = self._model
        started = await conn.request("thread/start", params, timeout=rpc_timeout)
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
            response = await conn.request(
                "review/start",
                {"threadId": thread_id, "target": target, "delivery": "inline"},
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
                    await conn.request(
                        "turn/interrupt", {"threadId": thread_id, "turnId": turn_id}, timeout=_CONTROL_TIMEOUT
                    )
            sub.close()
            if not conn.closed:
                with contextlib.suppress(Exception):
                    await conn.request(
                        "thread/unsubscribe", {"threadId": thread_id}, timeout=_CONTROL_TIMEOUT
                    )

    async def _consume(
        self, queue: asyncio.Queue[Notification | None], thread_id: str, target: dict[str, Any]
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
                        thread_id=thread_id,
                        target=target,
                        usage=mapper.usage,
                    )
