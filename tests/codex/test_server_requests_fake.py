"""Server requests other than approvals, over real pipes against the scripted fake app-server:
questions, MCP elicitations, tool calls, the current time and ChatGPT token refresh."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from agent_fleet import Error, PermissionConfig, Result, Spec, System
from agent_fleet.codex import CodexProvider
from agent_fleet.codex.options import AuthTokens
from agent_fleet.events import Event
from agent_fleet.policy import ApprovalRequest, Decision
from agent_fleet.tools import Tool
from agent_fleet.user_input import NO_ONE_TO_ASK, InputAnswer, InputRequest

from .test_appserver_fake import _options, _run

QUESTIONS = {
    "method": "item/tool/requestUserInput",
    "params": {
        "itemId": "q",
        "isBlocking": True,
        "questions": [
            {
                "id": "db",
                "header": "Database",
                "question": "Which database?",
                "options": [
                    {"label": "sqlite", "description": "small"},
                    {"label": "postgres", "description": "big"},
                ],
            },
            {"id": "name", "header": "Name", "question": "Project name?", "isSecret": True},
        ],
    },
}
ELICIT = {
    "method": "mcpServer/elicitation/request",
    "params": {
        "serverName": "docs",
        "mode": "form",
        "message": "Your API token?",
        "requestedSchema": {"type": "object", "properties": {"token": {"type": "string"}}},
    },
}


def _notices(events: list[Event], subtype: str) -> list[System]:
    return [e for e in events if isinstance(e, System) and e.subtype == subtype]


async def test_questions_without_a_handler_are_declined_with_a_message(tmp_path: Path) -> None:
    events, answers = await _run(_options(tmp_path, [QUESTIONS]), Spec(prompt="p", cwd=tmp_path))
    assert answers[0]["result"] == {
        "answers": {"db": {"answers": [NO_ONE_TO_ASK]}, "name": {"answers": [NO_ONE_TO_ASK]}}
    }
    [notice] = _notices(events, "user_input")
    assert notice.data == {
        "kind": "questions",
        "action": "decline",
        "source": "default",
        "questions": ["Which database?", "Project name?"],
    }


async def test_canned_answers_by_id_header_or_text(tmp_path: Path) -> None:
    canned = {"db": "sqlite", "Project name?": ["fleet"]}
    events, answers = await _run(
        _options(tmp_path, [QUESTIONS], canned_answers=canned), Spec(prompt="p", cwd=tmp_path)
    )
    assert answers[0]["result"] == {
        "answers": {"db": {"answers": ["sqlite"]}, "name": {"answers": ["fleet"]}}
    }
    [notice] = _notices(events, "user_input")
    assert notice.data["action"] == "accept" and "fleet" not in str(notice.data)  # answers never logged


async def test_the_input_handler_answers_questions_and_elicitations(tmp_path: Path) -> None:
    seen: list[InputRequest] = []

    async def handler(request: InputRequest) -> InputAnswer:
        seen.append(request)
        if request.kind == "questions":
            return InputAnswer(answers={"db": "postgres", "name": "x"})
        return InputAnswer(content={"token": "t0k"})

    events, answers = await _run(
        _options(tmp_path, [QUESTIONS, ELICIT], input_handler=handler), Spec(prompt="p", cwd=tmp_path)
    )
    assert answers[0]["result"]["answers"]["db"] == {"answers": ["postgres"]}
    assert answers[1]["result"] == {"action": "accept", "content": {"token": "t0k"}}
    questions, elicitation = seen
    assert [q.options for q in questions.questions] == [("sqlite", "postgres"), ()]
    assert questions.questions[1].secret and questions.session_id == "thr-1"
    assert elicitation.kind == "elicitation" and elicitation.server == "docs"
    assert elicitation.message == "Your API token?" and elicitation.schema is not None
    assert [n.data["source"] for n in _notices(events, "user_input")] == ["handler", "handler"]


async def test_elicitation_is_declined_by_default_and_a_failing_handler_falls_back(tmp_path: Path) -> None:
    async def broken(request: InputRequest) -> InputAnswer:
        raise RuntimeError("no terminal")

    events, answers = await _run(
        _options(tmp_path, [ELICIT], input_handler=broken), Spec(prompt="p", cwd=tmp_path)
    )
    assert answers[0]["result"] == {"action": "decline", "content": None}
    [failed] = _notices(events, "input_handler_failed")
    assert "RuntimeError: no terminal" in failed.data["error"]


async def test_a_slow_input_handler_never_blocks_another_session(tmp_path: Path) -> None:
    other_done = asyncio.Event()

    async def handler(request: InputRequest) -> InputAnswer:
        if request.session_id == "thr-1":
            await other_done.wait()  # a person thinking; thr-2 must finish meanwhile
        return InputAnswer(action="decline")

    async with CodexProvider(_options(tmp_path, [QUESTIONS], input_handler=handler)) as provider:
        first = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        second = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        assert second.session_id == "thr-2"
        await asyncio.wait_for(second.wait(), 10)
        other_done.set()
        await asyncio.wait_for(first.wait(), 10)


async def test_current_time_is_answered(tmp_path: Path) -> None:
    before = int(time.time())
    _, answers = await _run(
        _options(tmp_path, [{"method": "currentTime/read", "params": {}}]), Spec(prompt="p", cwd=tmp_path)
    )
    assert before <= answers[0]["result"]["currentTimeAt"] <= int(time.time())


def _tool_call(tool: str, arguments: Any) -> dict[str, Any]:
    return {
        "method": "item/tool/call",
        "params": {"callId": f"c-{tool}", "tool": tool, "arguments": arguments},
    }


async def test_tool_calls_unknown_tools_and_handler_refinement(tmp_path: Path) -> None:
    def double(n: int) -> int:
        """Twice n."""
        return 2 * n

    asked: list[ApprovalRequest] = []

    async def approve(request: ApprovalRequest, decision: Decision) -> Decision:
        asked.append(request)
        return Decision(action="decline", reason="not today") if request.tool == "veto" else decision

    scenario = [_tool_call("double", {"n": 21}), _tool_call("nope", {}), _tool_call("veto", {"n": 1})]
    tools = [double, Tool(double, name="veto", description="vetoed by the handler")]
    events, answers = await _run(
        _options(tmp_path, scenario, approval_handler=approve),
        Spec(prompt="p", cwd=tmp_path, tools=tools, permission=PermissionConfig(default="deny")),
    )
    assert answers[0]["result"] == {"contentItems": [{"type": "inputText", "text": "42"}], "success": True}
    assert answers[1]["result"]["success"] is False
    assert "unknown tool 'nope'" in answers[1]["result"]["contentItems"][0]["text"]
    assert "not today" in answers[2]["result"]["contentItems"][0]["text"]
    assert [r.tool for r in asked] == ["double", "veto"]  # unknown tools never reach the policy
    assert [n.data["tool"] for n in _notices(events, "approval_denied")] == ["veto"]


async def test_auth_refresh_uses_the_handler(tmp_path: Path) -> None:
    previous: list[str | None] = []

    async def refresh(account: str | None) -> AuthTokens:
        previous.append(account)
        return AuthTokens(access_token="new-token", account_id="acct-2", plan_type="pro")

    scenario = [
        {
            "method": "account/chatgptAuthTokens/refresh",
            "global": True,
            "params": {"reason": "unauthorized", "previousAccountId": "acct-1"},
        }
    ]
    _, answers = await _run(
        _options(tmp_path, scenario, auth_refresh_handler=refresh), Spec(prompt="p", cwd=tmp_path)
    )
    assert answers[0]["result"] == {
        "accessToken": "new-token",
        "chatgptAccountId": "acct-2",
        "chatgptPlanType": "pro",
    }
    assert previous == ["acct-1"]


async def test_auth_refresh_without_a_handler_fails_every_live_turn(tmp_path: Path) -> None:
    # thr-2 waits on a question nobody answers; thr-1 answers and then codex asks for new tokens:
    # that one refresh must end both live turns.
    first_asked = asyncio.Event()
    hold = {"method": "item/tool/requestUserInput", "params": {"itemId": "hold", "questions": []}}

    async def handler(request: InputRequest) -> InputAnswer:
        if request.session_id == "thr-2":
            await asyncio.Event().wait()  # never answers
        await first_asked.wait()
        return InputAnswer(action="decline")

    scenario = [
        hold,
        {"method": "account/chatgptAuthTokens/refresh", "global": True, "params": {"reason": "unauthorized"}},
    ]
    async with CodexProvider(_options(tmp_path, scenario, input_handler=handler)) as provider:
        handles = [await provider.spawn(Spec(prompt="p", cwd=tmp_path)) for _ in range(2)]
        first_asked.set()
        ends = [[e async for e in h.events()][-1] for h in handles]
    for end in ends:
        assert isinstance(end, Error) and end.code == "auth_failed" and not end.retryable
        assert "must be refreshed" in end.message and "auth_refresh_handler" in end.message


async def test_a_specs_answers_win_over_the_options_canned_answers(tmp_path: Path) -> None:
    options = _options(tmp_path, [QUESTIONS], canned_answers={"db": "sqlite", "name": "from-options"})
    _, answers = await _run(
        options, Spec(prompt="p", cwd=tmp_path, answers={"Which database?": ["postgres"]})
    )
    assert answers[0]["result"] == {
        "answers": {"db": {"answers": ["postgres"]}, "name": {"answers": ["from-options"]}}
    }


async def test_auth_refresh_failure_reaches_idle_sessions_with_their_next_turn(tmp_path: Path) -> None:
    # thr-1 finished its turn (idle); thr-2's turn then makes codex ask for new tokens, and nobody can
    # give them: thr-2's live turn ends with auth_failed, thr-1 hears of it with its next turn.
    refresh = {
        "method": "account/chatgptAuthTokens/refresh",
        "global": True,
        "only": "thr-2",
        "params": {"reason": "unauthorized"},
    }
    async with CodexProvider(_options(tmp_path, [refresh])) as provider:
        idle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        assert isinstance([e async for e in idle.events()][-1], Result)
        live = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        end = [e async for e in live.events()][-1]
        assert isinstance(end, Error) and end.code == "auth_failed"
        await idle.send("again")
        later = [e async for e in idle.events()]
        await idle.send("and again")
        latest = [e async for e in idle.events()]
    [notice] = _notices(later, "auth_failed")
    assert "must be refreshed" in notice.data["message"] and notice.data["reason"] == "unauthorized"
    assert isinstance(later[-1], Result)
    assert _notices(latest, "auth_failed") == []  # once, not with every turn
