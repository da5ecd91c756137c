"""A loopback Anthropic Messages API server whose replies a test scripts (for the Claude Code CLI).

    from agent_fleet.testing._anthropic import AnthropicReply, ScriptedAnthropicServer, scripted_claude_env

    with ScriptedAnthropicServer([AnthropicReply.bash("echo hi"), AnthropicReply.text("done")]) as server:
        env = scripted_claude_env(server, home=tmp_path / "claude-home")
        # run the claude CLI with env (ANTHROPIC_BASE_URL, a dummy key, a private HOME, no telemetry)

Like ``_server.ScriptedModelServer`` it runs in a background thread, so it keeps serving while a
test blocks and can feed several CLI processes and event loops at once.

``POST /v1/messages`` is the model. With ``"stream": true`` the reply is server-sent events
(``message_start``, ``content_block_start``, ``content_block_delta`` with ``text_delta`` /
``input_json_delta`` / ``thinking_delta``, ``content_block_stop``, ``message_delta`` with the stop
reason and usage, ``message_stop``); otherwise one JSON message. Only *agent* requests (those that
offer tools) take replies from the script; the CLI's side requests without tools (e.g. a session
title) get ``side_reply`` so they never consume a scripted turn. ``POST /v1/messages/count_tokens``
answers a token count. Any other path is answered with an empty JSON object and recorded in
``other_requests`` so a test can see what a new CLI version calls.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet._scripted import SCRIPTED_ENV, SCRIPTED_MODEL_NAME
from agent_fleet.testing._loopback import ScriptedHandler, ScriptedServer, next_id, split_words
from agent_fleet.testing._sse import encode_sse

__all__ = [
    "AnthropicBlock",
    "AnthropicReply",
    "AnthropicRequest",
    "AnthropicResponder",
    "AnthropicText",
    "AnthropicThinking",
    "AnthropicToolUse",
    "ScriptedAnthropicServer",
    "scripted_claude_env",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicText:
    """A text block. ``chunks`` streams it as deltas (default: one delta per word)."""

    text: str
    chunks: Sequence[str] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicToolUse:
    """A ``tool_use`` block, e.g. ``Bash`` with ``{"command": ...}``; ``input`` streams as JSON deltas."""

    name: str
    input: Mapping[str, Any]
    id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicThinking:
    """A ``thinking`` block (extended thinking) with a dummy signature."""

    thinking: str
    signature: str = "scripted-signature"


AnthropicBlock = AnthropicText | AnthropicToolUse | AnthropicThinking


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicReply:
    """One scripted response to one model request.

    ``delay`` waits before answering; ``event_delay`` between SSE events. ``status`` other than 200
    answers with an Anthropic error body (``error_type``, ``error_message``). ``headers`` go with the
    response (e.g. ``retry-after``, ``anthropic-ratelimit-unified-*``). ``stop_reason``
    defaults to ``tool_use`` when a block is a tool use, else ``end_turn``. ``usage`` may set
    ``input_tokens``, ``output_tokens``, ``cache_read_input_tokens``, ``cache_creation_input_tokens``.
    """

    blocks: Sequence[AnthropicBlock] = ()
    delay: float = 0.0
    event_delay: float = 0.0
    status: int = 200
    error_type: str = "api_error"
    error_message: str = "scripted error"
    stop_reason: str | None = None
    usage: Mapping[str, int] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def text(cls, text: str, **kw: Any) -> AnthropicReply:
        return cls(blocks=(AnthropicText(text=text),), **kw)

    @classmethod
    def tool_use(cls, name: str, input: Mapping[str, Any], **kw: Any) -> AnthropicReply:
        return cls(blocks=(AnthropicToolUse(name=name, input=input),), **kw)

    @classmethod
    def bash(cls, command: str, **kw: Any) -> AnthropicReply:
        """Ask Claude Code to run ``command`` with its ``Bash`` tool."""
        return cls(blocks=(AnthropicToolUse(name="Bash", input={"command": command}),), **kw)

    @classmethod
    def http_error(
        cls, status: int, message: str = "scripted error", error_type: str | None = None, **kw: Any
    ) -> AnthropicReply:
        kind = error_type or _ERROR_TYPES.get(status, "api_error")
        return cls(status=status, error_message=message, error_type=kind, **kw)

    # --- wire ------------------------------------------------------------------------------------
    def _stop_reason(self) -> str:
        if self.stop_reason is not None:
            return self.stop_reason
        return "tool_use" if any(isinstance(b, AnthropicToolUse) for b in self.blocks) else "end_turn"

    def _usage(self) -> dict[str, int]:
        u = dict(self.usage or {})
        return {
            "input_tokens": u.get("input_tokens", 10),
            "output_tokens": u.get("output_tokens", 5),
            "cache_creation_input_tokens": u.get("cache_creation_input_tokens", 0),
            "cache_read_input_tokens": u.get("cache_read_input_tokens", 0),
        }

    def message(self, model: str) -> dict[str, Any]:
        """The whole reply as one non-streaming Messages API response."""
        content: list[dict[str, Any]] = []
        for block in self.blocks:
            match block:
                case AnthropicText(text=text):
                    content.append({"type": "text", "text": text})
                case AnthropicToolUse(name=name, input=tool_input, id=tool_id):
                    content.append(
                        {
                            "type": "tool_use",
                            "id": tool_id or next_id("toolu", width=6),
                            "name": name,
                            "input": dict(tool_input),
                        }
                    )
                case AnthropicThinking(thinking=thinking, signature=signature):
                    content.append({"type": "thinking", "thinking": thinking, "signature": signature})
        return {
            "id": next_id("msg", width=6),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content,
            "stop_reason": self._stop_reason(),
            "stop_sequence": None,
            "usage": self._usage(),
        }

    def sse_events(self, model: str) -> Iterator[dict[str, Any]]:
        """The reply as the Messages API stream of events."""
        usage = self._usage()
        start_usage = {**usage, "output_tokens": 1}
        yield {
            "type": "message_start",
            "message": {
                "id": next_id("msg", width=6),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        }
        for index, block in enumerate(self.blocks):
            match block:
                case AnthropicText(text=text, chunks=chunks):
                    yield _block_start(index, {"type": "text", "text": ""})
                    for part in list(chunks) if chunks is not None else split_words(text):
                        yield _block_delta(index, {"type": "text_delta", "text": part})
                case AnthropicToolUse(name=name, input=tool_input, id=tool_id):
                    start = {
                        "type": "tool_use",
                        "id": tool_id or next_id("toolu", width=6),
                        "name": name,
                        "input": {},
                    }
                    yield _block_start(index, start)
                    raw = json.dumps(dict(tool_input))
                    for part in (raw[: len(raw) // 2], raw[len(raw) // 2 :]):
                        yield _block_delta(index, {"type": "input_json_delta", "partial_json": part})
                case AnthropicThinking(thinking=thinking, signature=signature):
                    yield _block_start(index, {"type": "thinking", "thinking": "", "signature": ""})
                    for part in split_words(thinking):
                        yield _block_delta(index, {"type": "thinking_delta", "thinking": part})
                    yield _block_delta(index, {"type": "signature_delta", "signature": signature})
            yield {"type": "content_block_stop", "index": index}
        yield {
            "type": "message_delta",
            "delta": {"stop_reason": self._stop_reason(), "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
        yield {"type": "message_stop"}


_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _block_delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


@dataclass(frozen=True, slots=True)
class AnthropicRequest:
    """A request the server received: HTTP method, path, headers and the parsed JSON body."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any
    received_at: float = field(default_factory=time.monotonic)

    @property
    def _dict(self) -> dict[str, Any]:
        return self.body if isinstance(self.body, dict) else {}

    @property
    def model(self) -> str | None:
        model = self._dict.get("model")
        return model if isinstance(model, str) else None

    @property
    def stream(self) -> bool:
        return self._dict.get("stream") is True

    @property
    def tool_names(self) -> list[str]:
        """Names of the tools the request offers the model."""
        tools = self._dict.get("tools")
        if not isinstance(tools, list):
            return []
        return [t["name"] for t in tools if isinstance(t, dict) and isinstance(t.get("name"), str)]

    @property
    def is_agent(self) -> bool:
        """True for an agent-loop request (one that offers tools), False for a side request."""
        return bool(self.tool_names)

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` array (empty when the body has none)."""
        messages = self._dict.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    def _blocks(self, role: str | None) -> Iterator[dict[str, Any]]:
        for message in self.messages:
            if role is not None and message.get("role") != role:
                continue
            content = message.get("content")
            if isinstance(content, str):
                yield {"type": "text", "text": content}
            elif isinstance(content, list):
                yield from (c for c in content if isinstance(c, dict))

    def texts(self, role: str | None = None) -> list[str]:
        """Every text block of the messages (optionally only of ``role``), in order."""
        return [
            b["text"]
            for b in self._blocks(role)
            if b.get("type") == "text" and isinstance(b.get("text"), str)
        ]

    def user_texts(self) -> list[str]:
        return self.texts("user")

    @property
    def last_user_text(self) -> str:
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def tool_results(self) -> list[dict[str, Any]]:
        """``tool_result`` blocks of user messages, in order."""
        return [b for b in self._blocks("user") if b.get("type") == "tool_result"]

    def tool_result_text(self, block: Mapping[str, Any]) -> str:
        """The text of one ``tool_result`` block (string content or its text parts joined)."""
        content = block.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(c.get("text", "") for c in content if isinstance(c, dict))
        return ""

    @property
    def ends_with_tool_result(self) -> bool:
        """True when the model is being asked to continue after a tool call."""
        messages = self.messages
        if not messages or messages[-1].get("role") != "user":
            return False
        content = messages[-1].get("content")
        return isinstance(content, list) and any(
            isinstance(c, dict) and c.get("type") == "tool_result" for c in content
        )

    def contains(self, needle: str) -> bool:
        """True when ``needle`` occurs anywhere in the request body."""
        return needle in json.dumps(self.body)


AnthropicResponder = Callable[[AnthropicRequest], AnthropicReply | None]


class ScriptedAnthropicServer(ScriptedServer[AnthropicRequest, AnthropicReply]):
    """Loopback Messages API endpoint: agent requests to ``POST /v1/messages`` answered from a script.

    Replies come from ``responder(request)`` when it returns one, else from the FIFO queue
    (``replies`` / ``enqueue``), else ``default``. Side requests (no tools offered) get
    ``side_reply`` unless the responder answers them. Every model request is recorded in
    ``requests`` (agent ones also in ``agent_requests``), every other request in ``other_requests``.
    Use as a (sync or async) context manager, or call ``start()`` / ``stop()``.
    """

    def __init__(
        self,
        replies: Iterable[AnthropicReply] = (),
        *,
        responder: AnthropicResponder | None = None,
        default: AnthropicReply | None = None,
        side_reply: AnthropicReply | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.side_reply = side_reply or AnthropicReply.text("Scripted session")
        self._other: list[AnthropicRequest] = []
        super().__init__(
            replies,
            responder=responder,
            default=default or AnthropicReply.text("(scripted model: no reply scripted for this request)"),
            host=host,
            port=port,
        )

    @property
    def agent_requests(self) -> list[AnthropicRequest]:
        """Model requests that offered tools (the agent loop), in arrival order."""
        return [r for r in self.requests if r.is_agent]

    @property
    def other_requests(self) -> list[AnthropicRequest]:
        """Every request that was not a model request (token counting, unknown paths, ...)."""
        with self._lock:
            return list(self._other)

    def _scripted(self, request: AnthropicRequest) -> AnthropicReply:
        return super()._scripted(request) if request.is_agent else self.side_reply

    # --- lifecycle --------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """Base URL for ``ANTHROPIC_BASE_URL`` (no ``/v1``: the client appends it)."""
        host, port = self.address
        return f"http://{host}:{port}"


#: Environment that keeps the Claude Code CLI offline and away from the user's configuration,
#: apart from the variables naming the server, the key and the home directory.
CLAUDE_OFFLINE_ENV: dict[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "CLAUDE_CODE_ENABLE_TELEMETRY": "0",
    "CLAUDE_CODE_MAX_RETRIES": "0",
}


def scripted_claude_env(
    server: ScriptedAnthropicServer,
    home: str | os.PathLike[str],
    *,
    api_key: str = "sk-ant-scripted-dummy-key",
) -> dict[str, str]:
    """Environment for a Claude Code CLI talking to ``server`` (merge over ``os.environ``).

    Creates ``home`` (a temporary directory, never ``~``) and points ``HOME`` and
    ``CLAUDE_CONFIG_DIR`` into it, so nothing reads or writes the real user configuration. Resume
    needs the same ``home`` as the session's first run (transcripts live there).
    """
    root = Path(home)
    config_dir = root / ".claude"
    config_dir.mkdir(parents=True, exist_ok=True)
    return {
        **CLAUDE_OFFLINE_ENV,
        "ANTHROPIC_BASE_URL": server.url,
        SCRIPTED_ENV: SCRIPTED_MODEL_NAME,  # the run is labelled scripted (agent_fleet._scripted)
        "ANTHROPIC_API_KEY": api_key,
        "HOME": str(root),
        "CLAUDE_CONFIG_DIR": str(config_dir),
        "XDG_CONFIG_HOME": str(root / ".config"),
        "XDG_CACHE_HOME": str(root / ".cache"),
        "XDG_DATA_HOME": str(root / ".local" / "share"),
        "XDG_STATE_HOME": str(root / ".local" / "state"),
    }


class _Handler(ScriptedHandler):
    owner: ScriptedAnthropicServer

    def _extra_headers(self) -> dict[str, str]:
        return {"request-id": next_id("req", width=6)}

    def _record_other(self, body: Any) -> None:
        request = AnthropicRequest(self.command, self.path, dict(self.headers.items()), body)
        with self.owner._lock:
            self.owner._other.append(request)

    def do_GET(self) -> None:
        self._record_other(None)
        self._send_json(200, {})

    def do_HEAD(self) -> None:
        self._record_other(None)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        body = self._read_body()
        route = self.path.split("?")[0].rstrip("/")
        if route.endswith("/v1/messages/count_tokens"):
            self._record_other(body)
            self._send_json(200, {"input_tokens": max(1, len(json.dumps(body)) // 4)})
            return
        if not route.endswith("/v1/messages"):
            self._record_other(body)
            self._send_json(200, {})
            return
        request = AnthropicRequest("POST", self.path, dict(self.headers.items()), body)
        reply = self.owner._answer(request)
        if reply.delay:
            time.sleep(reply.delay)
        if reply.status != 200:
            self._send_json(
                reply.status,
                {"type": "error", "error": {"type": reply.error_type, "message": reply.error_message}},
                reply.headers,
            )
            return
        model = request.model or "claude-scripted"
        if not request.stream:
            self._send_json(200, reply.message(model), reply.headers)
            return
        self._send_sse(
            (encode_sse([event]) for event in reply.sse_events(model)), reply.event_delay, reply.headers
        )


ScriptedAnthropicServer.handler_class = _Handler
ScriptedAnthropicServer.thread_name = "scripted-anthropic-server"
