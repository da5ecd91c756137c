"""``RemoteProvider`` turns the daemon's (or a proxy's) error answers into the library's errors, also on
the streamed events request, whose body is not read until asked for."""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator

import httpx
import pytest

from agent_fleet import Spec
from agent_fleet.errors import AgentFleetError, TransportError, UsageError
from agent_fleet.remote import RemoteProvider


class _Streamed(httpx.AsyncByteStream):
    """A body that arrives as a stream (as from a real socket), unread until someone reads it."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.body


def _daemon(events_status: int, events_body: bytes) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/sessions" and request.method == "POST":
            return httpx.Response(201, json={"session_id": "s1", "last_event_id": 0})
        if request.url.path == "/v1/sessions/s1/events":
            return httpx.Response(events_status, stream=_Streamed(events_body))
        return httpx.Response(404, json={"error": {"code": "not_found", "message": "no such id"}})

    return httpx.MockTransport(handle)


@pytest.mark.parametrize(
    ("status", "body", "error", "text"),
    [
        (404, json.dumps({"error": {"code": "not_found", "message": "no such id: s1"}}).encode(), UsageError,
         "no such id: s1"),
        (502, b"<html><body>502 Bad Gateway</body></html>", TransportError, "502"),
    ],
)  # fmt: skip
async def test_an_error_answer_to_the_event_stream_is_a_library_error(
    status: int, body: bytes, error: type[AgentFleetError], text: str
) -> None:
    provider = RemoteProvider("http://daemon.invalid", "t", transport=_daemon(status, body))
    try:
        handle = await provider.spawn(Spec(prompt="p", cwd="/w"))
        with pytest.raises(error, match=text):
            await handle.wait()
    finally:
        await provider.shutdown()


async def test_a_daemon_behind_https_is_verified_and_plain_http_loads_no_ca_bundle() -> None:
    for url, mode in (("https://fleet.example", ssl.CERT_REQUIRED), ("http://127.0.0.1:8765", ssl.CERT_NONE)):
        provider = RemoteProvider(url, "t")
        try:
            context = provider.client._transport._pool._ssl_context  # type: ignore[attr-defined]
            assert context.verify_mode == mode, url
        finally:
            await provider.shutdown()
