"""Python functions as agent tools: one definition that runs on every provider that supports tools.

::

    def word_count(text: str, unique: bool = False) -> int:
        \"\"\"Count the words in ``text``.\"\"\"
        words = text.split()
        return len(set(words)) if unique else len(words)

    async def fetch_issue(number: int) -> dict[str, Any]: ...

    spec = Spec(prompt="...", tools=[word_count, Tool(fetch_issue, name="issue", description="...")])

A plain callable (sync or async) becomes a ``Tool``: its name is the function's ``__name__``, its
description the docstring, its input schema a JSON Schema derived from the signature and type hints
(pydantic: ``Annotated[int, Field(description=...)]`` describes a parameter; nested models,
dataclasses, enums, ``Literal`` and optional values all work). ``Tool(fn, name=..., description=...,
input_schema=...)`` gives any of them explicitly; an explicit schema is enforced with ``jsonschema``
and the function gets the arguments as they came.

Calling a tool (``Tool.call``) never raises for what the model did or what the function did:

- arguments that do not match the schema -> a failed result naming what is wrong;
- the function raises -> a failed result ``"<ExceptionType>: <message>"`` the model can read;
- the return value becomes the output: ``str`` as text, an ``Image`` as an image, a sequence holding
  an ``Image`` as several parts, anything else (dict, list, number, model, dataclass, ``None``) as
  JSON text.

A sync function runs in a daemon thread of its own, so a slow one never blocks other sessions, and
one that never returns cannot hold up the program's exit (the event loop's default executor would
wait for it); an async one runs on the caller's event loop. Cancelling ``call`` cancels an async
function (a sync one runs to its end in its thread; its result is discarded).

Tool calls pass the approval policy as ``ApprovalRequest(kind="tool")``: allowed unless
``PermissionConfig.tool_disallow_patterns`` match the tool name, or ``tool_allow_patterns`` are given
and none matches (the caller wrote these tools, so the default is allow).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import inspect
import json
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from agent_fleet.errors import UsageError

__all__ = ["Image", "Tool", "ToolOutput", "as_tools"]

#: What OpenAI function names and MCP tool names both accept.
NAME_PATTERN: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Image:
    """An image a tool returns: raw ``data`` bytes of ``mime_type``."""

    data: bytes
    mime_type: str = "image/png"

    def base64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    def data_url(self) -> str:
        return f"data:{self.mime_type};base64,{self.base64()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput:
    """The outcome of one tool call: ``content`` parts (text or ``Image``), and whether it failed."""

    content: tuple[str | Image, ...]
    is_error: bool = False

    @property
    def text(self) -> str:
        """The text parts joined by newlines (images left out)."""
        return "\n".join(part for part in self.content if isinstance(part, str))


def _json_text(value: Any) -> str:
    from pydantic_core import to_jsonable_python

    return json.dumps(to_jsonable_python(value, fallback=repr), ensure_ascii=False)


def to_output(value: Any) -> ToolOutput:
    """A function's return value as a ``ToolOutput`` (see the module docstring)."""
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str | Image):
        return ToolOutput(content=(value,))
    if isinstance(value, list | tuple) and any(isinstance(v, Image) for v in value):
        return ToolOutput(content=tuple(v if isinstance(v, str | Image) else _json_text(v) for v in value))
    return ToolOutput(content=(_json_text(value),))


def failure(message: str) -> ToolOutput:
    """A failed result carrying ``message`` for the model."""
    return ToolOutput(content=(message,), is_error=True)


def _in_thread(fn: Callable[[], Any], name: str) -> asyncio.Future[Any]:
    """Run ``fn`` in a new daemon thread; its outcome resolves the returned future on this loop."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not future.done():  # the caller may have given up (cancelled) meanwhile
            outcome()

    def run() -> None:
        try:
            value = fn()
        except BaseException as exc:  # delivered to the awaiting task, where it is judged
            if not isinstance(exc, Exception):  # SystemExit in a tool ends the call, not the program
                exc = RuntimeError(f"{type(exc).__name__}: {exc}")
            report = functools.partial(settle, functools.partial(future.set_exception, exc))
        else:
            report = functools.partial(settle, functools.partial(future.set_result, value))
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
            loop.call_soon_threadsafe(report)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


def _is_async(fn: Callable[..., Any]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004


def _annotated(fn: Callable[..., Any]) -> Any:
    """Where ``fn``'s type hints live: the wrapped function of a partial, ``__init__`` of a class,
    ``__call__`` of a callable object."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isclass(fn):
        return fn.__init__
    if not (inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn)):
        return type(fn).__call__
    return fn


class _Signature:
    """Arguments of a function as a pydantic model: the JSON Schema, and validation that converts."""

    def __init__(self, fn: Callable[..., Any], tool: str) -> None:
        import typing

        import pydantic

        try:
            sig = inspect.signature(fn)
            hints = typing.get_type_hints(_annotated(fn), include_extras=True)
        except (TypeError, ValueError, NameError) as exc:
            raise UsageError(f"tool {tool!r}: cannot read the signature of {fn!r}: {exc}") from exc
        fields: dict[str, Any] = {}
        self.positional: list[str] = []
        self.keyword: list[str] = []
        for param in sig.parameters.values():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                raise UsageError(
                    f"tool {tool!r}: *args / **kwargs cannot be described to a model; "
                    "name every parameter or give Tool(input_schema=...)"
                )
            annotation = hints.get(param.name, Any)
            default = ... if param.default is param.empty else param.default
            fields[param.name] = (annotation, default)
            (self.positional if param.kind == param.POSITIONAL_ONLY else self.keyword).append(param.name)
        try:
            self.model: type[pydantic.BaseModel] = pydantic.create_model(
                f"{tool}_arguments",
                __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
                **fields,
            )
            schema = self.model.model_json_schema()
        except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
            raise UsageError(
                f"tool {tool!r}: cannot derive a JSON Schema from its signature ({exc}); "
                "give Tool(input_schema=...) or use JSON-compatible type hints"
            ) from exc
        schema.pop("title", None)
        schema.setdefault("properties", {})
        self.schema: dict[str, Any] = schema

    def bind(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
        """Validate ``arguments``; raises ``pydantic.ValidationError``."""
        model = self.model.model_validate(dict(arguments))
        args = [getattr(model, name) for name in self.positional]
        kwargs = {name: getattr(model, name) for name in self.keyword}
        return args, kwargs


class Tool:
    """A function the model may call. See the module docstring for how each part is derived.

    Raises ``UsageError`` when the name is not ``[A-Za-z0-9_-]{1,64}`` (e.g. a lambda without
    ``name=``), the signature cannot be described, or ``input_schema`` is not an object schema.
    """

    __slots__ = ("_explicit", "_is_async", "_signature", "description", "fn", "input_schema", "name")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_schema: Mapping[str, Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise UsageError(f"Tool needs a callable, not {type(fn).__name__}")
        tool_name = name if name is not None else getattr(fn, "__name__", "")
        if not isinstance(tool_name, str) or not NAME_PATTERN.match(tool_name):
            raise UsageError(
                f"tool name {tool_name!r} is not valid (1-64 letters, digits, _ or -); "
                "give Tool(fn, name=...)"
            )
        self.fn = fn
        self.name: str = tool_name
        self.description: str = description if description is not None else (inspect.getdoc(fn) or "")
        self._is_async = _is_async(fn)
        self._signature: _Signature | None = None
        self._explicit = input_schema is not None
        if input_schema is not None:
            if not isinstance(input_schema, Mapping) or input_schema.get("type") != "object":
                raise UsageError(f"tool {tool_name!r}: input_schema must be a JSON Schema with type 'object'")
            self._check_schema(input_schema)
            self.input_schema: dict[str, Any] = dict(input_schema)
        else:
            self._signature = _Signature(fn, tool_name)
            self.input_schema = self._signature.schema

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, fn={self.fn!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # The derived argument model is a class made at run time: pickle the definition, derive again.
        schema = self.input_schema if self._explicit else None
        return (_rebuild, (self.fn, self.name, self.description, schema))

    def _check_schema(self, schema: Mapping[str, Any]) -> None:
        import jsonschema

        try:
            jsonschema.validators.validator_for(schema).check_schema(dict(schema))
        except jsonschema.SchemaError as exc:
            raise UsageError(
                f"tool {self.name!r}: input_schema is not a valid JSON Schema: {exc.message}"
            ) from exc

    def _bind(self, arguments: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]] | str:
        """The call's arguments, or why they are invalid."""
        if self._signature is None:
            import jsonschema

            errors = sorted(
                jsonschema.validators.validator_for(self.input_schema)(self.input_schema).iter_errors(
                    dict(arguments)
                ),
                key=lambda e: list(e.path),
            )
            if errors:
                return "; ".join(
                    f"{'/'.join(map(str, e.path)) or '(arguments)'}: {e.message}" for e in errors[:5]
                )
            return [], dict(arguments)
        import pydantic

        try:
            return self._signature.bind(arguments)
        except pydantic.ValidationError as exc:
            return "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in exc.errors()[:5]
            )

    async def call(self, arguments: Any) -> ToolOutput:
        """Run the tool on ``arguments`` (a mapping, or a JSON object text). Never raises on bad
        arguments or a failing function; see the module docstring. Cancelling it propagates."""
        if isinstance(arguments, str | bytes):
            try:
                arguments = json.loads(arguments or "{}")
            except ValueError as exc:
                return failure(f"invalid arguments for tool {self.name}: not JSON ({exc})")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, Mapping):
            return failure(f"invalid arguments for tool {self.name}: expected a JSON object")
        bound = self._bind(arguments)
        if isinstance(bound, str):
            return failure(f"invalid arguments for tool {self.name}: {bound}")
        args, kwargs = bound
        try:
            if self._is_async:
                value = await self.fn(*args, **kwargs)
            else:
                value = await _in_thread(functools.partial(self.fn, *args, **kwargs), f"tool:{self.name}")
                if inspect.isawaitable(value):
                    value = await value
            return to_output(value)
        except Exception as exc:
            return failure(f"{type(exc).__name__}: {exc}")


def _rebuild(fn: Callable[..., Any], name: str, description: str, schema: Mapping[str, Any] | None) -> Tool:
    return Tool(fn, name=name, description=description, input_schema=schema)


def as_tools(items: Iterable[Tool | Callable[..., Any]]) -> tuple[Tool, ...]:
    """Each item as a ``Tool`` (callables wrapped). Raises ``UsageError`` for a non-callable or two
    tools with the same name."""
    if isinstance(items, str | bytes | Mapping) or callable(items):
        raise UsageError("Spec.tools must be a sequence of callables or Tool objects")
    tools: list[Tool] = []
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Tool):
            tool = item
        elif callable(item):
            tool = Tool(item)
        else:
            raise UsageError(f"Spec.tools: {item!r} is neither a callable nor a Tool")
        if tool.name in seen:
            raise UsageError(f"Spec.tools: two tools are named {tool.name!r}")
        seen.add(tool.name)
        tools.append(tool)
    return tuple(tools)


def by_name(tools: Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    """The tools (e.g. ``Spec.tools``) keyed by name, for answering calls."""
    return {tool.name: tool for tool in as_tools(tools)}
