"""Claude Code's ``AskUserQuestion`` tool <-> ``agent_fleet.user_input``.

Claude asks through ``can_use_tool("AskUserQuestion", {"questions": [{"question", "header",
"options": [{"label", "description"}], "multiSelect"}]})``. An answer is an allow whose updated input
adds ``"answers": {<question text>: <label, or labels joined by ", ">}``; a decline is a deny whose
message Claude reads (by default: nobody can answer, decide yourself). A question's id is its text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from claude_agent_sdk import PermissionResultAllow, PermissionResultDeny

from agent_fleet.user_input import NO_ONE_TO_ASK, InputAnswer, InputRequest, Question

ASK_USER: Final = "AskUserQuestion"


def to_input_request(tool_input: Mapping[str, Any], session_id: str) -> InputRequest:
    raw = tool_input.get("questions")
    questions: list[Any] = raw if isinstance(raw, list) else []
    out: list[Question] = []
    for q in questions:
        if not isinstance(q, dict) or not isinstance(q.get("question"), str):
            continue
        options = q.get("options") if isinstance(q.get("options"), list) else []
        out.append(
            Question(
                id=q["question"],
                question=q["question"],
                header=str(q.get("header") or ""),
                options=tuple(
                    str(o["label"]) for o in options or [] if isinstance(o, dict) and o.get("label")
                ),
                allow_other=True,  # Claude Code always offers a free answer
                multi_select=bool(q.get("multiSelect")),
            )
        )
    return InputRequest(kind="questions", session_id=session_id, questions=tuple(out), raw=dict(tool_input))


def to_permission(
    request: InputRequest, tool_input: Mapping[str, Any], answer: InputAnswer
) -> PermissionResultAllow | PermissionResultDeny:
    if answer.action != "accept":
        return PermissionResultDeny(
            message=answer.message or NO_ONE_TO_ASK, interrupt=answer.action == "cancel"
        )
    answers = {q.question: ", ".join(answer.answers.get(q.id, ())) for q in request.questions}
    return PermissionResultAllow(updated_input={**tool_input, "answers": answers})
