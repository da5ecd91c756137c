"""What codex did for a request agent-fleet stopped waiting for is undone when its answer comes late
(issue 29): a new thread is archived, a resumed one nobody holds unsubscribed, a turn nobody reads
interrupted; what a live session holds is left alone."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from agent_fleet.codex._late import LateUndo
from agent_fleet.errors import RequestTimeout, RPCError
from agent_fleet.jsonrpc import ErrorResponse, Response


@dataclass
class _Conn:
    sent: list[tuple[str, Any]] = field(default_factory=list)
    fail: bool = False
    overloaded: int = 0  # refusals (-32001) before the first answer

    async def request(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:  # noqa: ASYNC109
        self.sent.append((method, params))
        if self.fail:
            raise RequestTimeout(method, timeout or 0)
        if self.overloaded:
            self.overloaded -= 1
            raise RPCError(-32001, "Server overloaded; retry later.")
        return {}


@dataclass
class _Handle:
    session_id: str
    turns: tuple[str, ...] = ()

    def owns_turn(self, turn_id: str) -> bool:
        return turn_id in self.turns


def _undo(conn: _Conn, *handles: _Handle) -> LateUndo:
    return LateUndo(conn, lambda: handles)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("method", "undo"), [("thread/start", "thread/archive"), ("thread/fork", "thread/archive")]
)
async def test_a_new_thread_answered_late_is_archived(method: str, undo: str) -> None:
    conn = _Conn()
    await _undo(conn)(method, {"cwd": "/w"}, Response(3, {"thread": {"id": "th-late"}}, method))
    assert conn.sent == [(undo, {"threadId": "th-late"})]


async def test_a_late_resume_is_unsubscribed_unless_a_live_session_holds_the_thread() -> None:
    conn = _Conn()
    answer = Response(4, {"thread": {"id": "th"}}, "thread/resume")
    await _undo(conn, _Handle("th"))("thread/resume", {"threadId": "th"}, answer)
    assert conn.sent == []  # a retry of the resume holds it now
    await _undo(conn)("thread/resume", {"threadId": "th"}, answer)
    assert conn.sent == [("thread/unsubscribe", {"threadId": "th"})]


async def test_a_late_turn_is_interrupted_unless_its_session_reads_it() -> None:
    conn = _Conn()
    answer = Response(5, {"turn": {"id": "turn-late"}}, "turn/start")
    await _undo(conn, _Handle("th", turns=("turn-late",)))("turn/start", {"threadId": "th"}, answer)
    assert conn.sent == []
    await _undo(conn, _Handle("th", turns=("turn-1",)))("turn/start", {"threadId": "th"}, answer)
    await _undo(conn)("review/start", {"threadId": "rv"}, Response(6, {"turn": {"id": "r1"}}, "review/start"))
    assert conn.sent == [
        ("turn/interrupt", {"threadId": "th", "turnId": "turn-late"}),
        ("turn/interrupt", {"threadId": "rv", "turnId": "r1"}),
    ]


async def test_errors_and_unknown_answers_need_nothing_and_a_failed_undo_is_quiet() -> None:
    conn = _Conn(fail=True)
    undo = _undo(conn)
    await undo("turn/start", {"threadId": "th"}, ErrorResponse(7, -32600, "no", None, "turn/start"))
    await undo("model/list", None, Response(8, {"data": []}, "model/list"))
    assert conn.sent == []
    await undo(
        "thread/start", {}, Response(9, {"thread": {"id": "x"}}, "thread/start")
    )  # raises inside: logged
    assert conn.sent == [("thread/archive", {"threadId": "x"})]


async def test_an_undo_codex_refuses_as_overloaded_is_sent_again() -> None:
    conn = _Conn(overloaded=2)
    await _undo(conn)("thread/start", {}, Response(10, {"thread": {"id": "x"}}, "thread/start"))
    assert conn.sent == [("thread/archive", {"threadId": "x"})] * 3
