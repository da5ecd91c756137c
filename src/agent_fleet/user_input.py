"""When an agent asks a person: the questions, the answers, and what happens when nobody is there.

Two kinds of request reach a caller, from every provider that has them:

- ``kind="questions"``: the agent asks the user one or more ``Question``s (codex's
  ``item/tool/requestUserInput``, Claude Code's ``AskUserQuestion`` tool);
- ``kind="elicitation"``: an MCP server asks for input (``message`` and a form ``schema``, or a
  ``url`` to visit) through the agent (codex's ``mcpServer/elicitation/request``).

An ``InputHandler`` (async ``(InputRequest) -> InputAnswer``) given in the provider's options answers
them; it runs on a task of its own, so a person may take minutes without holding up other sessions.
Without a handler (or when it raises) the provider answers with ``default_answer``: every question
that the canned answers (keyed by question id, header or question text; ``Spec.answers`` first, then
the options' ``canned_answers``) answer gets that answer; when one is left unanswered the request is
declined, and the model is told that nobody can answer and that it
should decide itself. Fleets run unattended: nothing ever waits for a person who is not there.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "NO_ONE_TO_ASK",
    "CannedAnswers",
    "InputAnswer",
    "InputHandler",
    "InputRequest",
    "Question",
    "default_answer",
    "input_notice",
]

#: What the model reads when a question cannot be answered: enough to go on without one.
NO_ONE_TO_ASK: Final = (
    "No user is available to answer (this agent runs unattended). Make a reasonable choice yourself, "
    "state the assumption you made, and continue."
)

CannedAnswers = Mapping[str, str | Sequence[str]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One question. ``options`` are the choices offered (labels), ``allow_other`` whether a free
    answer is allowed besides them, ``secret`` whether the answer should not be shown."""

    id: str
    question: str
    header: str = ""
    options: tuple[str, ...] = ()
    allow_other: bool = False
    secret: bool = False
    multi_select: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class InputRequest:
    """A request for input (see the module docstring). ``raw`` is the provider's own payload."""

    kind: Literal["questions", "elicitation"]
    session_id: str
    questions: tuple[Question, ...] = ()
    message: str = ""
    schema: Mapping[str, Any] | None = None
    url: str | None = None
    server: str | None = None
    raw: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class InputAnswer:
    """The answer. ``accept`` with ``answers`` (question id -> chosen answers) for questions, or
    ``content`` (the form's values) for an elicitation; ``decline`` / ``cancel`` refuse, and
    ``message`` tells the model why (where the provider can carry it)."""

    action: Literal["accept", "decline", "cancel"] = "accept"
    answers: Mapping[str, Sequence[str]] = field(default_factory=dict)
    content: Mapping[str, Any] | None = None
    message: str = ""

    def __post_init__(self) -> None:
        if self.action not in ("accept", "decline", "cancel"):
            raise ValueError(f"InputAnswer.action must be accept, decline or cancel, not {self.action!r}")
        answers = {str(k): (v,) if isinstance(v, str) else tuple(v) for k, v in self.answers.items()}
        object.__setattr__(self, "answers", answers)


InputHandler = Callable[[InputRequest], Awaitable[InputAnswer]]


def _canned_for(question: Question, layers: Sequence[CannedAnswers]) -> tuple[str, ...] | None:
    for canned in layers:
        for key in (question.id, question.header, question.question):
            if key and key in canned:
                value = canned[key]
                return (value,) if isinstance(value, str) else tuple(value)
    return None


def default_answer(request: InputRequest, *canned: CannedAnswers) -> InputAnswer:
    """The answer when no handler gives one: ``canned`` answers, else a decline (module docstring).

    Several ``canned`` mappings are layers: the first that answers a question wins (e.g. a task's
    own answers before the provider-wide ones)."""
    if request.kind == "questions" and request.questions:
        answers: dict[str, tuple[str, ...]] = {}
        for question in request.questions:
            found = _canned_for(question, canned)
            if found is None:
                return InputAnswer(action="decline", message=NO_ONE_TO_ASK)
            answers[question.id] = found
        return InputAnswer(action="accept", answers=answers)
    return InputAnswer(action="decline", message=NO_ONE_TO_ASK)


def input_notice(request: InputRequest, answer: InputAnswer, source: str) -> dict[str, Any]:
    """The data of the ``user_input`` notice: what was asked and how it was answered (``source``:
    ``handler``, ``default``), never the answers themselves (they may be secrets)."""
    data: dict[str, Any] = {"kind": request.kind, "action": answer.action, "source": source}
    if request.questions:
        data["questions"] = [q.question for q in request.questions]
    if request.message:
        data["message"] = request.message
    if request.server:
        data["server"] = request.server
    return data
