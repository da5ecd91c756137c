"""A loopback OpenAI Responses API server whose replies a test scripts.

It runs in a background thread (not on the caller's event loop) so it keeps serving while a test
blocks, and so one server can feed several codex processes and event loops at once.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_fleet._scripted import SCRIPTED_MODEL_NAME
from agent_fleet.testing import _sse
from agent_fleet.testing._loopback import ScriptedHandler, ScriptedServer, next_id, split_words

__all__ = [
    "CustomToolCall",
    "FunctionCall",
    "Item",
    "ReasoningItem",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedModelServer",
    "Text",
    "apply_patch",
    "exec_command",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Text:
    """An assistant message. ``chunks`` streams it as deltas (default: one delta per word)."""

    text: str
    chunks: Sequence[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionCall:
    """A ``function_call`` output item (``arguments`` is a JSON string or a mapping)."""

    name: str
    arguments: str | Mapping[str, Any]
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CustomToolCall:
    """A freeform ``custom_tool_call`` output item, e.g. ``apply_patch`` with the raw patch."""

    name: str
    input: str
    call_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningItem:
    """A reasoning item with a summary text; ``duration`` seconds pass between its start and its end."""

    summary: str
    duration: float = 0.0


Item = Text | FunctionCall | CustomToolCall | ReasoningItem


def exec_command(cmd: str, *, workdir: str | None = None, call_id: str | None = None) -> FunctionCall:
    """A model request to run ``cmd`` through codex's ``exec_command`` tool."""
    args: dict[str, Any] = {"cmd": cmd}
    if workdir is not None:
        args["workdir"] = workdir
    return FunctionCall(name="exec_command", arguments=args, call_id=call_id)


def apply_patch(patch: str, *, call_id: str | None = None) -> CustomToolCall:
    """A model request to apply ``patch`` (codex's ``*** Begin Patch`` format) via the freeform tool."""
    return CustomToolCall(name="apply_patch", input=patch, call_id=call_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """One scripted response to one model request.

    ``delay`` waits before answering; ``event_delay`` between SSE events. ``status`` other than 200
    answers with an HTTP error whose body is the API's error object (``error_message``,
    ``error_type``, ``error_code``) and with ``headers`` (e.g. ``Retry-After``). ``failed`` ends the
    stream with ``response.failed`` (code, message) instead of ``response.completed``. ``cut_after``
    closes the connection after that many SSE events, with no terminal event (a dropped stream).
    """

    items: Sequence[Item] = ()
    delay: float = 0.0
    event_delay: float = 0.0
    status: int = 200
    error_message: str = "scripted error"
    error_type: str = "scripted_error"
    error_code: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    failed: tuple[str, str] | None = None
    usage: Mapping[str, int] | None = None
    cut_after: int | None = None

    @classmethod
    def text(cls, text: str, **kw: Any) -> Reply:
        return cls(items=(Text(text=text),), **kw)

    @classmethod
    def exec(cls, cmd: str, *, workdir: str | None = None, **kw: Any) -> Reply:
        return cls(items=(exec_command(cmd, workdir=workdir),), **kw)

    @classmethod
    def call(
        cls, name: str, arguments: str | Mapping[str, Any], *, call_id: str | None = None, **kw: Any
    ) -> Reply:
        """The model calls function ``name``, e.g. a ``Spec.tools`` function (codex dynamic tool)."""
        return cls(items=(FunctionCall(name=name, arguments=arguments, call_id=call_id),), **kw)

    @classmethod
    def patch(cls, patch: str, **kw: Any) -> Reply:
        return cls(items=(apply_patch(patch),), **kw)

    @classmethod
    def http_error(cls, status: int, message: str = "scripted error", **kw: Any) -> Reply:
        return cls(status=status, error_message=message, **kw)

    @classmethod
    def context_window_exceeded(cls, **kw: Any) -> Reply:
        """What the Responses API streams when the input does not fit the model's context window."""
        message = (
            "Your input exceeds the context window of this model. Please adjust your input and try again."
        )
        return cls(failed=("context_length_exceeded", message), **kw)

    @classmethod
    def usage_limit_exceeded(cls, **kw: Any) -> Reply:
        """What the Responses API streams when the account's quota (usage limit) is spent."""
        message = "You exceeded your current quota, please check your plan and billing details."
        return cls(failed=("insufficient_quota", message), **kw)

    @classmethod
    def rate_limited(cls, retry_after: float = 1.0, **kw: Any) -> Reply:
        """HTTP 429 with a ``Retry-After`` header, as the API answers a client over its rate limit."""
        return cls(
            status=429,
            error_message=f"Rate limit reached. Please try again in {retry_after:g}s.",
            error_type="requests",
            error_code="rate_limit_exceeded",
            headers={"Retry-After": f"{retry_after:g}"},
            **kw,
        )

    def error_body(self) -> dict[str, Any]:
        """The JSON body of an HTTP error reply (the API's ``{"error": {...}}`` shape)."""
        return {"error": {"message": self.error_message, "type": self.error_type, "code": self.error_code}}

    def sse_events(self) -> Iterator[dict[str, Any]]:
        response_id = next_id("resp")
        yield _sse.response_created(response_id)
        for item in self.items:
            match item:
                case Text(text=text, chunks=chunks):
                    item_id = next_id("msg")
                    yield _sse.message_added(item_id)
                    parts = list(chunks) if chunks is not None else split_words(text)
                    for part in parts:
                        yield _sse.text_delta(item_id, part)
                    yield _sse.message_done(item_id, text)
                case FunctionCall(name=name, arguments=arguments, call_id=call_id):
                    args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
                    yield _sse.function_call_done(call_id or next_id("call"), name, args)
                case CustomToolCall(name=name, input=input_text, call_id=call_id):
                    yield _sse.custom_tool_call_done(call_id or next_id("call"), name, input_text)
                case ReasoningItem(summary=summary, duration=duration):
                    item_id = next_id("rs")
                    yield _sse.reasoning_added(item_id)
                    if duration:
                        yield {_PAUSE: duration}
                    yield _sse.reasoning_done(item_id, summary)
        if self.failed is not None:
            yield _sse.response_failed(response_id, *self.failed)
        else:
            yield _sse.response_completed(response_id, dict(self.usage) if self.usage else None)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request the server received: HTTP method, path, headers and the parsed JSON body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    received_at: float = field(default_factory=time.monotonic)

    @property
    def input(self) -> list[dict[str, Any]]:
        """The Responses API ``input`` items (empty when the body has none)."""
        if isinstance(self.body, dict) and isinstance(self.body.get("input"), list):
            return [i for i in self.body["input"] if isinstance(i, dict)]
        return []

    def texts(self, role: str | None = None) -> list[str]:
        """Every text span of ``message`` input items (optionally only of ``role``)."""
        out: list[str] = []
        for item in self.input:
            if item.get("type") != "message" or (role is not None and item.get("role") != role):
                continue
            content = item.get("content")
            if isinstance(content, str):
                out.append(content)
            elif isinstance(content, list):
                out += [c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)]
        return out

    def user_texts(self) -> list[str]:
        return self.texts("user")

    @property
    def last_user_text(self) -> str:
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def tool_outputs(self) -> list[dict[str, Any]]:
        """``function_call_output`` and ``custom_tool_call_output`` input items, in order."""
        return [i for i in self.input if i.get("type") in ("function_call_output", "custom_tool_call_output")]

    @property
    def ends_with_tool_output(self) -> bool:
        """True when the model is being asked to continue after a tool call."""
        items = self.input
        return bool(items) and items[-1].get("type") in ("function_call_output", "custom_tool_call_output")

    def contains(self, needle: str) -> bool:
        """True when ``needle`` occurs anywhere in the request body."""
        return needle in json.dumps(self.body)


Responder = Callable[[RecordedRequest], Reply | None]


class ScriptedModelServer(ScriptedServer[RecordedRequest, Reply]):
    """Loopback Responses API endpoint: ``POST /v1/responses`` answered from a script.

    Replies come from ``responder(request)`` when it returns one, else from the FIFO queue
    (``replies`` / ``enqueue``), else ``default``. Every request is recorded in ``requests``.
    Use as a (sync or async) context manager, or call ``start()`` / ``stop()``.
    """

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Responder | None = None,
        default: Reply | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__(
            replies,
            responder=responder,
            default=default or Reply.text("(scripted model: no reply scripted for this request)"),
            host=host,
            port=port,
        )

    # --- lifecycle --------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL for codex's ``base_url`` (ends with ``/v1``)."""
        host, port = self.address
        return f"http://{host}:{port}/v1"

    # --- codex wiring -----------------------------------------------------------------------------
    def codex_config(
        self,
        *,
        provider: str = "scripted",
        env_key: str = "AGENT_FLEET_SCRIPTED_API_KEY",
        model: str | None = "gpt-5.5",
    ) -> dict[str, Any]:
        """Codex config overrides (dotted keys) that point codex at this server.

        Retries are disabled so scripted HTTP errors surface at once instead of after backoff.
        """
        config: dict[str, Any] = {
            "model_provider": provider,
            f"model_providers.{provider}": {
                "name": SCRIPTED_MODEL_NAME,  # how a run knows it is scripted (agent_fleet._scripted)
                "base_url": self.url,
                "wire_api": "responses",
                "env_key": env_key,
                "request_max_retries": 0,
                "stream_max_retries": 0,
            },
        }
        if model is not None:
            config["model"] = model
        return config


_PAUSE = "__pause__"  # not an SSE event: the server waits that many seconds before the next one


def _frames(events: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    for event in events:
        if _PAUSE in event:
            time.sleep(event[_PAUSE])
        else:
            yield _sse.encode_sse([event])


class _Handler(ScriptedHandler):
    owner: ScriptedModelServer

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send_json(200, {"data": [], "object": "list", "models": []})
        else:
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})

    def do_POST(self) -> None:
        body = self._read_body()
        if not self.path.split("?")[0].rstrip("/").endswith("/responses"):
            self._send_json(404, {"error": {"message": f"no route {self.path}"}})
            return
        reply = self.owner._answer(RecordedRequest("POST", self.path, dict(self.headers.items()), body))
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._send_json(reply.status, reply.error_body(), reply.headers)
            return
        events: Iterable[dict[str, Any]] = reply.sse_events()
        if reply.cut_after is not None:
            events = itertools.islice(events, reply.cut_after)
        self._send_sse(_frames(events), reply.event_delay, reply.headers)


ScriptedModelServer.handler_class = _Handler
ScriptedModelServer.thread_name = "scripted-model-server"
