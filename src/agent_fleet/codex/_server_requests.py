"""Codex server requests other than approvals: wire params in, neutral values out, and back.

- ``item/tool/call`` (a ``Spec.tools`` function): ``{"tool", "arguments", "callId"}`` ->
  ``{"contentItems": [{"type": "inputText", "text"} | {"type": "inputImage", "imageUrl"}], "success"}``;
- ``item/tool/requestUserInput``: ``{"questions": [{"id", "header", "question", "options", ...}]}`` ->
  ``{"answers": {<question id>: {"answers": [...]}}}`` (no way to refuse: a decline answers every
  question with the message for the model);
- ``mcpServer/elicitation/request``: ``{"serverName", "mode", "message", "requestedSchema" | "url"}`` ->
  ``{"action": "accept" | "decline" | "cancel", "content"}``;
- ``currentTime/read`` -> ``{"currentTimeAt": <unix seconds>}``;
- ``account/chatgptAuthTokens/refresh`` -> ``{"accessToken", "chatgptAccountId", "chatgptPlanType"}``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Final

from agent_fleet.codex.options import AuthTokens
from agent_fleet.tools import Image, ToolOutput
from agent_fleet.user_input import NO_ONE_TO_ASK, InputAnswer, InputRequest, Question

TOOL_CALL: Final = "item/tool/call"
USER_INPUT: Final = "item/tool/requestUserInput"
ELICITATION: Final = "mcpServer/elicitation/request"
CURRENT_TIME: Final = "currentTime/read"
AUTH_REFRESH: Final = "account/chatgptAuthTokens/refresh"
INPUT_METHODS: Final = frozenset({USER_INPUT, ELICITATION})


def tool_call_response(output: ToolOutput) -> dict[str, Any]:
    items: list[dict[str, Any]] = []
    for part in output.content:
        if isinstance(part, Image):
            items.append({"type": "inputImage", "imageUrl": part.data_url()})
        else:
            items.append({"type": "inputText", "text": part})
    return {"contentItems": items, "success": not output.is_error}


def _question(raw: Any, index: int) -> Question:
    q = raw if isinstance(raw, dict) else {}
    raw_options = q.get("options")
    options: list[Any] = raw_options if isinstance(raw_options, list) else []
    return Question(
        id=str(q.get("id") or f"q{index}"),
        question=str(q.get("question") or ""),
        header=str(q.get("header") or ""),
        options=tuple(str(o.get("label")) for o in options if isinstance(o, dict) and o.get("label")),
        allow_other=bool(q.get("isOther")),
        secret=bool(q.get("isSecret")),
    )


def input_request(method: str, params: Mapping[str, Any], session_id: str) -> InputRequest:
    """The neutral request for a ``requestUserInput`` or elicitation request."""
    if method == USER_INPUT:
        raw = params.get("questions")
        questions: list[Any] = raw if isinstance(raw, list) else []
        return InputRequest(
            kind="questions",
            session_id=session_id,
            questions=tuple(_question(q, i) for i, q in enumerate(questions)),
            raw=dict(params),
        )
    schema = params.get("requestedSchema")
    return InputRequest(
        kind="elicitation",
        session_id=session_id,
        message=str(params.get("message") or params.get("description") or ""),
        schema=schema if isinstance(schema, dict) else None,
        url=params.get("url") if isinstance(params.get("url"), str) else None,
        server=params.get("serverName") if isinstance(params.get("serverName"), str) else None,
        raw=dict(params),
    )


def input_response(method: str, request: InputRequest, answer: InputAnswer) -> dict[str, Any]:
    """The wire answer for ``request`` (built by ``input_request`` from ``method``)."""
    if method == USER_INPUT:
        if answer.action == "accept":
            answers = {q.id: list(answer.answers.get(q.id, ())) for q in request.questions}
        else:
            refusal = [answer.message or NO_ONE_TO_ASK]
            answers = {q.id: refusal for q in request.questions}
        return {"answers": {qid: {"answers": values} for qid, values in answers.items()}}
    if answer.action == "accept":
        return {"action": "accept", "content": dict(answer.content or {})}
    return {"action": answer.action, "content": None}


def current_time_response() -> dict[str, Any]:
    return {"currentTimeAt": int(time.time())}


def auth_tokens_response(tokens: AuthTokens) -> dict[str, Any]:
    if not isinstance(tokens, AuthTokens):
        raise TypeError(f"auth_refresh_handler returned {type(tokens).__name__}, not AuthTokens")
    return {
        "accessToken": tokens.access_token,
        "chatgptAccountId": tokens.account_id,
        "chatgptPlanType": tokens.plan_type,
    }
