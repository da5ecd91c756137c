"""Answering a request for input the same way from every provider (see ``agent_fleet.user_input``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent_fleet.events import Event, System
from agent_fleet.user_input import (
    CannedAnswers,
    InputAnswer,
    InputHandler,
    InputRequest,
    default_answer,
    input_notice,
)


async def answer_input(
    request: InputRequest,
    handler: InputHandler | None,
    canned: Sequence[CannedAnswers],
    emit: Callable[[Event], None],
) -> InputAnswer:
    """The ``handler``'s answer, else ``default_answer`` from the ``canned`` layers (first wins); a
    failing handler is reported
    (``input_handler_failed``) and the default answers. Emits the ``user_input`` notice."""
    answer: InputAnswer | None = None
    source = "default"
    if handler is not None:
        try:
            answer = await handler(request)
            if not isinstance(answer, InputAnswer):
                raise TypeError(f"input_handler returned {type(answer).__name__}, not InputAnswer")
            source = "handler"
        except Exception as exc:
            answer = None
            error = {"error": f"{type(exc).__name__}: {exc}", "kind": request.kind}
            emit(System(subtype="input_handler_failed", data=error))
    if answer is None:
        answer = default_answer(request, *canned)
    emit(System(subtype="user_input", data=input_notice(request, answer, source)))
    return answer
