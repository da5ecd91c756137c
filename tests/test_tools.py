"""``agent_fleet.tools``: names, descriptions and JSON Schemas derived from functions; calls that never
raise for what the model or the function did."""

from __future__ import annotations

import asyncio
import enum
import functools
import json
import threading
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from agent_fleet import Spec, Tool, UsageError
from agent_fleet.tools import Image, ToolOutput, as_tools


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


@dataclass
class Box:
    width: float
    height: float


def search(
    query: str,
    limit: Annotated[int, Field(description="at most this many hits", ge=1)] = 10,
    *,
    colour: Colour | None = None,
    mode: Literal["fast", "exact"] = "fast",
) -> list[str]:
    """Search the index.

    Returns matching lines."""
    return [query] * limit


async def area(box: Box, origin: Point) -> float:
    return box.width * box.height + origin.x


# -- schema derivation ------------------------------------------------------------------------------


def test_name_description_and_schema_come_from_the_function() -> None:
    tool = Tool(search)
    assert tool.name == "search"
    assert tool.description == "Search the index.\n\nReturns matching lines."
    schema = tool.input_schema
    assert schema["type"] == "object" and "title" not in schema
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert props["query"]["type"] == "string"
    assert props["limit"] == {
        "default": 10,
        "description": "at most this many hits",
        "minimum": 1,
        "title": "Limit",
        "type": "integer",
    }
    assert props["mode"]["enum"] == ["fast", "exact"]
    assert {"$ref": "#/$defs/Colour"} in props["colour"]["anyOf"]
    assert schema["$defs"]["Colour"]["enum"] == ["red", "blue"]


def test_nested_models_and_dataclasses_become_definitions() -> None:
    schema = Tool(area).input_schema
    assert schema["required"] == ["box", "origin"]
    assert set(schema["$defs"]) == {"Box", "Point"}
    assert schema["$defs"]["Box"]["required"] == ["width", "height"]


def test_a_function_without_parameters_or_hints() -> None:
    def ping():  # type: ignore[no-untyped-def]
        return "pong"

    def echo(value):  # type: ignore[no-untyped-def]
        return value

    assert Tool(ping).input_schema == {"additionalProperties": False, "properties": {}, "type": "object"}
    assert Tool(ping).description == ""
    assert Tool(echo).input_schema["required"] == ["value"]


def test_explicit_name_description_and_schema_win() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    tool = Tool(lambda **kw: kw, name="raw", description="pass through", input_schema=schema)
    assert (tool.name, tool.description, tool.input_schema) == ("raw", "pass through", schema)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Tool(lambda x: x), "is not valid"),
        (lambda: Tool(search, name="has space"), "is not valid"),
        (lambda: Tool(search, name="x" * 65), "is not valid"),
        (lambda: Tool(lambda *a: a, name="star"), r"\*args"),
        (lambda: Tool(lambda **k: k, name="kw"), r"\*\*kwargs"),
        (lambda: Tool(search, input_schema={"type": "array"}), "type 'object'"),
        (lambda: Tool(search, input_schema={"type": "object", "properties": 3}), "not a valid JSON Schema"),
        (lambda: Tool(threading.Lock, name="lock"), "cannot"),
        (lambda: Tool("search"), "callable"),  # type: ignore[arg-type]
    ],
)
def test_tools_that_cannot_be_described_are_usage_errors(make: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        make()


def test_an_unsupported_type_hint_is_a_usage_error_naming_the_tool() -> None:
    def takes_lock(lock: threading.Thread) -> None:
        pass

    with pytest.raises(UsageError, match=r"takes_lock.*JSON Schema"):
        Tool(takes_lock)


def test_spec_turns_callables_into_tools_and_rejects_duplicates() -> None:
    spec = Spec(prompt="p", tools=[search, Tool(area, name="area2")])
    assert [type(t) for t in spec.tools] == [Tool, Tool]
    assert [t.name for t in spec.tools] == ["search", "area2"]  # type: ignore[union-attr]
    assert Spec(prompt="p").tools == ()
    with pytest.raises(UsageError, match="two tools are named 'search'"):
        Spec(prompt="p", tools=[search, search])
    with pytest.raises(UsageError, match="neither a callable nor a Tool"):
        Spec(prompt="p", tools=[search, 3])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="sequence"):
        as_tools(search)  # type: ignore[arg-type]


# -- calls -----------------------------------------------------------------------------------------


async def test_arguments_are_validated_and_converted() -> None:
    seen: list[Any] = []

    def record(box: Box, colour: Colour, count: int = 1) -> str:
        seen.append((box, colour, count))
        return "ok"

    out = await Tool(record).call({"box": {"width": 1, "height": 2.5}, "colour": "blue", "count": "3"})
    assert out == ToolOutput(content=("ok",))
    assert seen == [(Box(width=1, height=2.5), Colour.BLUE, 3)]


async def test_json_text_arguments_and_empty_arguments() -> None:
    assert (await Tool(search).call('{"query": "a", "limit": 2}')).text == '["a", "a"]'
    assert (await Tool(lambda: 1, name="one").call("")).text == "1"
    assert (await Tool(lambda: 1, name="one").call(None)).text == "1"


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "query: Field required"),
        ({"query": "a", "limit": 0}, "limit: Input should be greater than or equal to 1"),
        ({"query": "a", "other": 1}, "other: Extra inputs are not permitted"),
        ({"query": "a", "mode": "slow"}, "mode: Input should be 'fast' or 'exact'"),
        ("not json", "not JSON"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
async def test_bad_arguments_are_failed_results(arguments: Any, expected: str) -> None:
    out = await Tool(search).call(arguments)
    assert out.is_error
    assert out.text.startswith("invalid arguments for tool search: ") and expected in out.text


async def test_an_explicit_schema_is_enforced_and_arguments_pass_as_they_came() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    tool = Tool(lambda n: {"got": n}, name="raw", input_schema=schema)
    assert (await tool.call({"n": 4})).text == '{"got": 4}'
    bad = await tool.call({"n": "4"})
    assert bad.is_error and "n: '4' is not of type 'integer'" in bad.text
    missing = await tool.call({})
    assert missing.is_error and "'n' is a required property" in missing.text


async def test_an_exception_is_a_failed_result_the_model_can_read() -> None:
    async def fails(x: int) -> int:
        raise ValueError(f"bad x {x}")

    out = await Tool(fails).call({"x": 7})
    assert out == ToolOutput(content=("ValueError: bad x 7",), is_error=True)


async def test_cancelling_a_call_cancels_an_async_tool() -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    task = asyncio.create_task(Tool(slow).call({}))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()


async def test_a_sync_tool_runs_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    release = threading.Event()

    def blocking() -> int:
        release.wait(10)
        return threading.get_ident()

    call = asyncio.create_task(Tool(blocking).call({}))
    await asyncio.sleep(0)  # the loop is free while the tool blocks its thread
    release.set()
    assert int((await call).text) != loop_thread


async def test_async_callables_partials_and_sync_functions_returning_awaitables() -> None:
    async def add(a: int, b: int) -> int:
        return a + b

    partial = Tool(functools.partial(add, b=1), name="inc")
    assert partial.input_schema["required"] == ["a"]
    assert (await partial.call({"a": 1})).text == "2"

    def later(a: int) -> Any:
        return add(a, a)  # a coroutine made in the worker thread, awaited on the loop

    assert (await Tool(later).call({"a": 2})).text == "4"


@pytest.mark.parametrize(
    ("value", "content"),
    [
        ("plain text", ("plain text",)),
        (None, ("null",)),
        (3, ("3",)),
        ({"a": [1, "é"]}, ('{"a": [1, "é"]}',)),
        (Point(x=1), ('{"x": 1, "y": 0}',)),
        (Box(width=1, height=2), ('{"width": 1, "height": 2}',)),
        (["a", "b"], ('["a", "b"]',)),
        (Colour.RED, ('"red"',)),
    ],
)
async def test_return_values_become_text_or_json(value: Any, content: tuple[str, ...]) -> None:
    out = await Tool(lambda: value, name="v").call({})
    assert out == ToolOutput(content=content)


async def test_images_and_mixed_sequences() -> None:
    image = Image(data=b"\x89PNG", mime_type="image/png")
    assert (await Tool(lambda: image, name="i").call({})).content == (image,)
    mixed = await Tool(lambda: ["caption", image, {"n": 1}], name="m").call({})
    assert mixed.content == ("caption", image, '{"n": 1}')
    assert mixed.text == 'caption\n{"n": 1}'
    assert image.data_url() == "data:image/png;base64,iVBORw=="
    failed = ToolOutput(content=("custom",), is_error=True)
    assert await Tool(lambda: failed, name="f").call({}) is failed
    assert json.loads((await Tool(lambda: {"b": b"\x00"}, name="b").call({})).text) == {"b": "\x00"}


def _triple(x: int) -> int:
    return 3 * x


async def test_tools_pickle_by_definition() -> None:
    import pickle

    schema = {"type": "object", "properties": {"x": {"type": "integer"}}}
    spec = Spec(prompt="p", tools=[_triple, Tool(_triple, name="raw", description="d", input_schema=schema)])
    derived, explicit = pickle.loads(pickle.dumps(spec)).tools
    assert (derived.name, derived.input_schema) == ("_triple", Tool(_triple).input_schema)
    assert (await derived.call({"x": "2"})).text == "6"
    assert (explicit.name, explicit.description, explicit.input_schema) == ("raw", "d", schema)


def test_capabilities_say_which_providers_call_python_tools() -> None:
    from agent_fleet.claude import ClaudeProvider
    from agent_fleet.codex import CodexExecProvider, CodexProvider

    assert CodexProvider().capabilities.supports_python_tools
    assert ClaudeProvider().capabilities.supports_python_tools
    assert not CodexExecProvider().capabilities.supports_python_tools


async def test_a_sync_tool_that_exits_fails_only_its_call() -> None:
    import sys

    out = await Tool(lambda: sys.exit(3), name="quits").call({})
    assert out.is_error and "SystemExit: 3" in out.text


def test_a_hung_sync_tool_does_not_hold_up_the_programs_exit() -> None:
    import subprocess
    import sys
    import time

    script = """
import asyncio, threading
from agent_fleet import Tool

def hangs() -> None:
    threading.Event().wait()

async def main() -> None:
    try:
        await asyncio.wait_for(Tool(hangs).call({}), 0.2)
    except TimeoutError:
        print("gave up")

asyncio.run(main())
"""
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "gave up", proc.stderr
    assert time.monotonic() - started < 30
