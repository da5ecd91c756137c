"""``agent_fleet.user_input``: what the runner answers when no person is there."""

from __future__ import annotations

import pytest

from agent_fleet.user_input import (
    NO_ONE_TO_ASK,
    InputAnswer,
    InputRequest,
    Question,
    default_answer,
    input_notice,
)

QUESTIONS = InputRequest(
    kind="questions",
    session_id="s",
    questions=(
        Question(id="db", header="Database", question="Which database?", options=("sqlite", "pg")),
        Question(id="n", header="Name", question="Project name?", secret=True),
    ),
)


def test_without_canned_answers_the_model_is_told_to_decide() -> None:
    answer = default_answer(QUESTIONS)
    assert answer == InputAnswer(action="decline", message=NO_ONE_TO_ASK)
    assert "No user is available" in NO_ONE_TO_ASK and "continue" in NO_ONE_TO_ASK


@pytest.mark.parametrize("key", ["db", "Database", "Which database?"])
def test_canned_answers_match_id_header_or_text(key: str) -> None:
    answer = default_answer(QUESTIONS, {key: "pg", "n": ["a", "b"]})
    assert answer.action == "accept"
    assert answer.answers == {"db": ("pg",), "n": ("a", "b")}


def test_one_unanswered_question_declines_the_request() -> None:
    assert default_answer(QUESTIONS, {"db": "pg"}).action == "decline"


def test_elicitations_are_declined_by_default() -> None:
    request = InputRequest(kind="elicitation", session_id="s", message="token?", server="docs")
    assert default_answer(request, {"token?": "x"}).action == "decline"


def test_the_notice_never_carries_the_answers() -> None:
    answer = InputAnswer(answers={"db": "pg", "n": "hunter2"})
    data = input_notice(QUESTIONS, answer, "handler")
    assert data == {
        "kind": "questions",
        "action": "accept",
        "source": "handler",
        "questions": ["Which database?", "Project name?"],
    }
    assert "hunter2" not in str(data)


def test_answer_values_are_checked_and_normalised() -> None:
    assert InputAnswer(answers={"a": "x"}).answers == {"a": ("x",)}
    with pytest.raises(ValueError, match="accept, decline or cancel"):
        InputAnswer(action="maybe")  # type: ignore[arg-type]


def test_spec_answers_are_checked() -> None:
    from agent_fleet import Spec

    assert Spec(prompt="p", answers={"q": ["a", "b"], "r": "c"}).answers == {"q": ["a", "b"], "r": "c"}
    with pytest.raises(ValueError, match=r"Spec\.answers"):
        Spec(prompt="p", answers={"q": 1})  # type: ignore[dict-item]


def test_canned_layers_the_first_that_answers_wins() -> None:
    task = {"Which database?": "pg"}
    provider = {"db": "sqlite", "n": "fleet"}
    assert default_answer(QUESTIONS, task, provider).answers == {"db": ("pg",), "n": ("fleet",)}
    assert default_answer(QUESTIONS, provider, task).answers == {"db": ("sqlite",), "n": ("fleet",)}
