from __future__ import annotations

import dataclasses

import pytest

from agent_fleet._provider.fastnew import positional_new
from agent_fleet.events import AssistantMessage, Result, TextDelta


@pytest.mark.parametrize(
    ("cls", "values", "expected"),
    [
        (TextDelta, ("hi", "item_1"), TextDelta(text="hi", item_id="item_1")),
        (TextDelta, ("", None), TextDelta(text="")),
        (
            AssistantMessage,
            ("done", "item_2", "final", None),
            AssistantMessage(text="done", item_id="item_2", phase="final"),
        ),
        (
            Result,
            ("s", "t", "text", None, None, None, None, ()),
            Result(session_id="s", turn_id="t", text="text", usage=None, structured=None),
        ),
    ],
)
def test_same_object_as_the_dataclass_constructor(cls: type, values: tuple, expected: object) -> None:
    made = positional_new(cls)(*values)
    assert type(made) is cls
    assert made == expected
    assert repr(made) == repr(expected)
    if cls is TextDelta:
        assert hash(made) == hash(expected)
    assert dataclasses.asdict(made) == dataclasses.asdict(expected)


def test_result_stays_frozen() -> None:
    delta = positional_new(TextDelta)("a", None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delta.text = "b"  # type: ignore[misc]


def test_every_field_is_required() -> None:
    with pytest.raises(TypeError):
        positional_new(TextDelta)("a")


def test_refuses_classes_it_cannot_build_faithfully() -> None:
    @dataclasses.dataclass
    class NoSlots:
        a: int

    @dataclasses.dataclass(slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (NoSlots, PostInit):
        with pytest.raises(TypeError, match="slots dataclass"):
            positional_new(cls)
