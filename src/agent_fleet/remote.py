"""``RemoteProvider``: the ``Provider`` contract over the ``agent-fleet serve`` API.

Switching a program from local to remote is one line::

    provider = CodexProvider(options)                       # local
    provider = RemoteProvider("http://127.0.0.1:8765")      # the daemon's (token: $AGENT_FLEET_TOKEN)

A handle reads its session's server-sent events from the last event id it saw, so a dropped connection
is resumed exactly after it (``Last-Event-ID``), nothing lost or repeated. Cancelling the task reading
``events()`` stops the turn, as the contract says. HTTP errors become the library's: 400 ``UsageError``,
409 ``Unsupported``, 401 ``AuthenticationError``, 503 ``ProviderUnavailable``, anything else or a
dropped connection that cannot be resumed ``TransportError``. The token is sent only in the
``Authorization`` header and never appears in an error message.

``RemoteBatch`` shows a batch this program runs with a ``RemoteProvider`` on the daemon's dashboard:
``agent-fleet batch --server`` attaches its batch, and passes its runner's notices on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import msgspec

from agent_fleet._event_json import event_from_record, spec_to_json
from agent_fleet._sse import SSEDecoder
from agent_fleet.contract import Capabilities, Handle, Provider, Sandbox, Spec, refuse_turn_settings
from agent_fleet.errors import (
    AuthenticationError,
    ProviderUnavailable,
    TransportError,
    TurnFailed,
    Unsupported,
    UsageError,
)
from agent_fleet.events import Error, Event, Result, System, TextDelta
from agent_fleet.notices import NOTICE_SUBTYPES

__all__ = ["RemoteBatch", "RemoteHandle", "RemoteProvider"]

logger = logging.getLogger(__name__)

_RECONNECTS = 5
#: Headers of ``POST /v1/sessions?stream=1``'s answer (its body is the session's event stream); the
#: session id percent-encoded.
SESSION_HEADER, CURSOR_HEADER = "Agent-Fleet-Session-Id", "Agent-Fleet-Last-Event-Id"
_decode = msgspec.json.Decoder(dict).decode  # a record: a JSON object (faster than json.loads)
_DEFAULT_CAPABILITIES = Capabilities(
    supports_injection=True,
    supports_resume=True,
    supports_tool_plugins=True,
    supports_output_schema=True,
    supports_reasoning_effort=True,
    needs_permission_config=True,
    emits_subagent_events=False,
    tool_permission_format="agent-fleet policy (on the daemon)",
    supports_review=False,
)


def _raise_for(response: httpx.Response) -> None:
    if response.is_success:
        return
    try:
        message = str(response.json()["error"]["message"])
    except (ValueError, KeyError, TypeError):
        message = f"HTTP {response.status_code}"
    match response.status_code:
        case 400 | 403 | 404 | 413:
            raise UsageError(f"the daemon refused the request: {message}")
        case 409:
            raise Unsupported(message)
        case 401:
            raise AuthenticationError("the daemon refused the token (set AGENT_FLEET_TOKEN)")
        case 503:
            raise ProviderUnavailable(f"the daemon's provider is unavailable: {message}", retryable=True)
        case _:
            raise TransportError(f"the daemon answered {response.status_code}: {message}")


class RemoteProvider(Provider):
    """A provider whose sessions run on an ``agent-fleet serve`` daemon at ``url``.

    ``token``: the daemon's bearer token (default ``$AGENT_FLEET_TOKEN``). ``provider``: the daemon's
    provider kind (default: the daemon's own default). ``timeout``: seconds per request (the event
    stream itself has no read timeout: a turn may be quiet for long). ``transport``: an httpx transport
    to reach the daemon by (e.g. ``httpx.AsyncHTTPTransport(uds=...)`` for a Unix socket behind a
    proxy, or a test double); default: TCP to ``url``."""

    name = "remote"

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        provider: str | None = None,
        timeout: float | None = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self._transport = transport
        self.options = None
        self.kind = provider
        token = token if token is not None else os.environ.get("AGENT_FLEET_TOKEN")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = timeout  # seconds per request
        self._client: httpx.AsyncClient | None = None
        self._headers = headers
        self._capabilities = _DEFAULT_CAPABILITIES
        self._handles: set[RemoteHandle] = set()
        #: Where a batch run with this provider makes its box (its tasks' temporary directories and
        #: worktrees): the daemon's own boxes directory, which its floor takes without an --allow-root
        #: (``GET /v1/info``; set by ``start()``, None before or when the daemon names none).
        self.box_dir: str | None = None

    @property
    def capabilities(self) -> Capabilities:
        """Static until ``start()``, then what the daemon reports for its provider (review excepted)."""
        return self._capabilities

    @property
    def client(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                base_url=self.url,
                headers=self._headers,
                timeout=httpx.Timeout(self.timeout),
                limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
                transport=self._transport,
                # Plain HTTP has nothing to verify: no CA bundle loaded (38 ms of CPU per client).
                verify=not self.url.startswith("http://"),
            )
        return self._client

    async def request(self, method: str, path: str, body: Any = None, **params: str) -> Any:
        try:
            response = await self.client.request(method, path, json=body, params=params or None)
        except httpx.TransportError as exc:
            raise TransportError(f"cannot reach the daemon at {self.url}: {type(exc).__name__}") from exc
        _raise_for(response)
        return response.json()

    async def start(self) -> None:
        info = await self.request("GET", "/v1/info")
        caps = info.get("capabilities") if isinstance(info, dict) else None
        if isinstance(caps, dict):
            with contextlib.suppress(TypeError):
                self._capabilities = Capabilities(**{**caps, "supports_review": False})
        boxes = info.get("boxes") if isinstance(info, dict) else None
        self.box_dir = boxes if isinstance(boxes, str) and boxes else None

    async def spawn(self, spec: Spec) -> RemoteHandle:
        return await self._open({"provider": self.kind} if self.kind else {}, spec)

    async def resume(self, session_id: str, spec: Spec) -> RemoteHandle:
        return await self._open(
            {"resume": session_id, **({"provider": self.kind} if self.kind else {})}, spec
        )

    async def _open(self, params: dict[str, str], spec: Spec) -> RemoteHandle:
        """``POST /v1/sessions?stream=1``: one exchange starts the session and opens its event stream
        (the handle reads it first), where a POST and then a GET took two."""
        request = self.client.build_request(
            "POST",
            "/v1/sessions",
            json=spec_to_json(spec),
            params={**params, "stream": "1"},
            timeout=httpx.Timeout(self.timeout, read=None),  # (only the wait for the answer is bounded)
        )
        try:
            response = await asyncio.wait_for(self.client.send(request, stream=True), self.timeout)
        except (httpx.TransportError, TimeoutError) as exc:
            raise TransportError(f"cannot reach the daemon at {self.url}: {type(exc).__name__}") from exc
        opened: httpx.Response | None = response
        try:
            session_id = unquote(response.headers.get(SESSION_HEADER) or "")
            if session_id and response.is_success:
                cursor = int(response.headers.get(CURSOR_HEADER) or 0)
            else:  # an error, or the JSON answer without the stream: the handle asks for the events
                await response.aread()
                _raise_for(response)
                opened = None
                data = response.json()
                session_id, cursor = str(data["session_id"]), int(data.get("last_event_id", 0))
        except (ValueError, KeyError, TypeError) as exc:
            await response.aclose()
            raise TransportError(f"the daemon answered {response.status_code} without a session id") from exc
        except BaseException:
            await response.aclose()
            raise
        handle = RemoteHandle(self, session_id, cursor, opened)
        self._handles.add(handle)
        return handle

    async def shutdown(self) -> None:
        """Stop this client's running turns (the daemon and its other sessions go on); close the client."""
        for handle in list(self._handles):
            if handle.running:
                with contextlib.suppress(Exception):
                    await handle.stop()
        self._handles.clear()
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class RemoteHandle(Handle):
    """One session on the daemon (see the module docstring)."""

    def __init__(
        self, provider: RemoteProvider, session_id: str, cursor: int, opened: httpx.Response | None = None
    ) -> None:
        self._provider = provider
        self._session_id = session_id
        self._cursor = cursor  # the last event id seen
        self._terminal: Result | Error | None = None
        self._stopped = False
        self._opened = opened  # the event stream spawn() opened with the session, not read yet

    @property
    def session_id(self) -> str:
        return self._session_id

    @property
    def running(self) -> bool:
        return self._terminal is None

    def events(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        # One generator from the socket to the caller: each layer of async iteration costs every record.
        if self._terminal is not None:
            return
        path = f"/v1/sessions/{self._session_id}/events"
        failures = 0
        try:
            while True:
                opened, self._opened = self._opened, None  # the stream spawn() opened, read first
                headers = {"Last-Event-ID": str(self._cursor)}
                try:
                    async with contextlib.AsyncExitStack() as stack:
                        if opened is not None:
                            response = opened
                            stack.push_async_callback(opened.aclose)
                        else:
                            response = await stack.enter_async_context(
                                self._provider.client.stream(
                                    "GET",
                                    path,
                                    headers=headers,
                                    timeout=httpx.Timeout(self._provider.timeout, read=None),
                                )
                            )
                            if not response.is_success:
                                await response.aread()  # a streamed answer: its error body is not read yet
                            _raise_for(response)
                        decoder = SSEDecoder()
                        async for chunk in response.aiter_raw():
                            for kind, data, ident in decoder.feed(chunk):
                                if kind != "event" or not ident:
                                    continue
                                record = _decode(data)
                                self._cursor = int(ident)
                                failures = 0
                                text = record.get("text")
                                if record.get("type") == "TextDelta" and type(text) is str:  # most of a turn
                                    item = record.get("item_id")
                                    yield TextDelta(text=text, item_id=item if type(item) is str else None)
                                    continue
                                event = event_from_record(record)
                                if isinstance(event, Result | Error):
                                    self._terminal = event
                                    yield event
                                    return
                                yield event
                except httpx.TransportError as exc:
                    failures += 1
                    if failures > _RECONNECTS:
                        raise TransportError(f"lost the daemon's event stream: {type(exc).__name__}") from exc
                    await asyncio.sleep(0.2 * failures)
                    continue
                # The stream ended without a terminal event (the daemon is draining): ask again.
                failures += 1
                if failures > _RECONNECTS:
                    raise TransportError("the daemon's event stream ended before the turn did")
                await asyncio.sleep(0.2 * failures)
        finally:
            if self._terminal is None:
                # The reader went away mid-turn (cancelled or closed): stop the turn, as stop() does.
                self._stopped = True
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._stop_request())

    async def send(
        self,
        prompt: str,
        *,
        images: Sequence[str | Path] = (),
        output_schema: Mapping[str, Any] | None = None,
        model: str | None = None,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        sandbox: Sandbox | None = None,
        approval_policy: str | None = None,
        cwd: str | Path | None = None,
    ) -> None:
        """A follow-up turn; ``images`` are URLs or paths on the daemon's machine (under its roots).
        The daemon takes no per-turn settings: one given is ``Unsupported`` (nothing is sent)."""
        refuse_turn_settings(
            "RemoteHandle (the daemon's POST /v1/sessions/{id}/turns)",
            model=model,
            reasoning_effort=reasoning_effort,
            reasoning_summary=reasoning_summary,
            sandbox=sandbox,
            approval_policy=approval_policy,
            cwd=cwd,
        )
        if self._terminal is None:
            raise UsageError("send(): the current turn is still running; wait for it or stop() first")
        if self._stopped:
            raise UsageError(
                "send(): this handle was stopped; continue the session with provider.resume(session_id, "
                "spec), or stop turns with interrupt() to keep the handle"
            )
        body: dict[str, Any] = {"prompt": prompt}
        if images:
            body["images"] = [str(i) for i in images]
        if output_schema is not None:
            body["output_schema"] = dict(output_schema)
        # The cursor stays on the previous turn's terminal event: the new turn's events come after it.
        await self._provider.request("POST", f"/v1/sessions/{self._session_id}/turns", body)
        self._terminal = None

    async def inject(self, text: str) -> None:
        await self._provider.request("POST", f"/v1/sessions/{self._session_id}/inject", {"text": text})

    async def _stop_request(self) -> None:
        await self._provider.request("POST", f"/v1/sessions/{self._session_id}/stop")

    async def _close_opened(self) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.aclose()

    async def stop(self) -> None:
        """Stop the running turn and let this handle go, as a local provider's ``stop()`` does (the
        daemon keeps the session: ``RemoteProvider.resume`` continues it)."""
        self._stopped = True
        await self._close_opened()
        if self._terminal is not None:
            return
        await self._stop_request()

    async def interrupt(self) -> None:
        """Stop the running turn and keep the session: the next ``send()`` continues it on this handle."""
        if self._terminal is not None:
            return
        await self._stop_request()

    async def wait(self) -> Result:
        if self._terminal is None:
            async for _ in self._events():
                pass
        terminal = self._terminal
        if isinstance(terminal, Error):
            raise TurnFailed(terminal)
        if terminal is None:
            raise TransportError("the daemon's event stream ended before the turn did")
        return terminal


#: The runner notices a ``RemoteBatch`` passes on (``runner.<what>``, as ``agent_fleet.notices`` declares).
_RUNNER_NOTICES = frozenset(name for name in NOTICE_SUBTYPES if name.startswith("runner."))
_NOTICES_PER_POST = 200
_HEARD_EVERY = 5.0  # seconds between reports when nothing happens: the daemon shows when it last heard


class RemoteBatch:
    """A batch this program runs on a ``RemoteProvider``'s daemon, shown on the daemon's dashboard with its
    tasks, their sessions, gates and follow-ups (``POST /v1/batches/attach``, then
    ``/v1/batches/{id}/notices``).

    ``await RemoteBatch.attach(provider, name=..., total=...)`` (None when the daemon cannot show it:
    an older daemon); ``report(task_id, event)`` with every runner notice (a ``System`` whose subtype is
    ``runner.<what>``; anything else is ignored), called from the event loop's thread; ``await
    close(state, reason)`` at the end (``succeeded``, ``failed`` or ``stopped``). Notices go out in the
    background, a few a second, and nothing here ever fails the batch: a daemon that does not answer
    only leaves the dashboard behind. When someone stops the batch on the dashboard, the daemon says so
    in its answer and ``on_stop()`` is called (once): stop the batch as Ctrl-C does.
    """

    def __init__(
        self,
        provider: RemoteProvider,
        batch_id: str,
        *,
        on_stop: Callable[[], None] | None = None,
        interval: float = 0.5,
    ) -> None:
        self.provider = provider
        self.batch_id = batch_id
        self.on_stop = on_stop
        self.interval = interval
        self.stop_asked = False
        self._queue: list[dict[str, Any]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._closed = False

    #: Seconds ``close`` may take to send what is left (a daemon gone away must not hold the command).
    CLOSE_WITHIN = 10.0

    @classmethod
    async def attach(
        cls,
        provider: RemoteProvider,
        *,
        name: str,
        total: int,
        on_stop: Callable[[], None] | None = None,
        interval: float = 0.5,
    ) -> RemoteBatch | None:
        body: dict[str, Any] = {"name": name[:200] or "batch", "total": total}
        if provider.kind:
            body["provider"] = provider.kind
        try:
            data = await provider.request("POST", "/v1/batches/attach", body)
        except Exception as exc:  # an older daemon, or none: the batch runs all the same
            logger.info("the daemon does not show this batch: %s", type(exc).__name__)
            return None
        batch = cls(provider, str(data["batch_id"]), on_stop=on_stop, interval=interval)
        batch._task = asyncio.create_task(batch._run(), name=f"remote-batch:{batch.batch_id}")
        return batch

    def report(self, task_id: str, event: Event) -> None:
        """Pass a runner notice on (see the class docstring)."""
        if self._closed or not isinstance(event, System) or event.subtype not in _RUNNER_NOTICES:
            return
        data = msgspec.to_builtins(event.data, str_keys=True, enc_hook=str)
        self._queue.append({"task_id": task_id, "subtype": event.subtype, "data": data})
        self._wake.set()

    async def _post(self, body: dict[str, Any]) -> None:
        try:
            answer = await self.provider.request("POST", f"/v1/batches/{self.batch_id}/notices", body)
        except UsageError as exc:  # refused (too large, malformed): dropped, never retried
            logger.warning("the daemon refused a report on batch %s: %s", self.batch_id, exc)
            return
        if isinstance(answer, dict) and answer.get("stop") and not self.stop_asked:
            self.stop_asked = True
            if self.on_stop is not None:
                self.on_stop()

    async def _run(self) -> None:
        failures = 0
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_HEARD_EVERY):
                    await self._wake.wait()
            self._wake.clear()
            taken, self._queue = self._queue[:_NOTICES_PER_POST], self._queue[_NOTICES_PER_POST:]
            if self._queue:
                self._wake.set()
            try:
                await self._post({"notices": taken})
                failures = 0
            except Exception as exc:  # the daemon is away: keep the notices, try again later
                failures += 1
                self._queue[:0] = taken
                logger.info("could not report batch %s (%s)", self.batch_id, type(exc).__name__)
                await asyncio.sleep(min(30.0, self.interval * 2**failures))
                continue
            await asyncio.sleep(self.interval)

    async def close(self, state: str, reason: str | None = None) -> None:
        """Send what is left and the batch's end (``succeeded``, ``failed`` or ``stopped``), within
        ``CLOSE_WITHIN`` seconds at most."""
        if self._closed:
            return
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(Exception):
            async with asyncio.timeout(self.CLOSE_WITHIN):
                while self._queue:
                    taken, self._queue = self._queue[:_NOTICES_PER_POST], self._queue[_NOTICES_PER_POST:]
                    await self._post({"notices": taken})
                end: dict[str, Any] = {"notices": [], "state": state}
                if reason:
                    end["reason"] = reason
                await self._post(end)
