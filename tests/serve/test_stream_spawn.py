"""``POST /v1/sessions?stream=1`` answers with the session's event stream (issue 28 item 16: a short turn
through the daemon was two HTTP exchanges, a POST then a GET): the same records GET .../events gives,
the ids in headers; ``RemoteProvider`` starts a turn and reads it in one exchange. Hermetic: a provider
double."""

from __future__ import annotations

from pathlib import Path

import httpx

from agent_fleet import Spec
from agent_fleet._sse import SSEDecoder
from agent_fleet.events import Result, TextDelta
from agent_fleet.remote import CURSOR_HEADER, SESSION_HEADER, RemoteProvider

from .conftest import TOKEN, MakeDaemon, client, read_events
from .fakes import fake_providers


async def test_a_streamed_start_answers_with_the_events_get_would_give(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    daemon = await make_daemon(providers=fake_providers)
    spec = {"prompt": "hello", "cwd": str(workspace)}
    async with client(daemon) as http:
        async with http.stream("POST", "/v1/sessions", params={"stream": "1"}, json=spec) as response:
            assert response.status_code == 201
            assert response.headers["content-type"].startswith("text/event-stream")
            sid = response.headers[SESSION_HEADER]
            assert response.headers[CURSOR_HEADER] == "0"
            decoder = SSEDecoder()
            streamed = [
                (int(ident or 0), data)
                async for chunk in response.aiter_raw()
                for kind, data, ident in decoder.feed(chunk)
                if kind == "event"
            ]
        stored = await read_events(http, sid)
    assert [seq for seq, _ in streamed] == [seq for seq, _ in stored]
    assert [r["type"] for _, r in stored][-2:] == ["TextDelta", "Result"]
    assert b'"re: hello"' in streamed[-2][1]


async def test_a_bad_stream_flag_or_spec_is_refused_before_any_stream(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    daemon = await make_daemon(providers=fake_providers)
    async with client(daemon) as http:
        bad_flag = await http.post("/v1/sessions?stream=yes", json={"prompt": "p", "cwd": str(workspace)})
        outside = await http.post("/v1/sessions?stream=1", json={"prompt": "p", "cwd": "/"})
    assert bad_flag.status_code == 400 and "stream must be" in bad_flag.json()["error"]["message"]
    assert outside.status_code in (400, 403) and outside.headers["content-type"].startswith(
        "application/json"
    )


class _Counting(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__()
        self.requests: list[tuple[str, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        return await super().handle_async_request(request)


async def test_remote_provider_starts_and_reads_a_turn_in_one_exchange(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    daemon = await make_daemon(providers=fake_providers)
    transport = _Counting()
    async with RemoteProvider(daemon.url, TOKEN, transport=transport) as provider:
        assert transport.requests == [("GET", "/v1/info")]  # (start(): what the daemon offers)
        transport.requests.clear()
        handle = await provider.spawn(Spec(prompt="one", cwd=workspace))
        events = [event async for event in handle.events()]
        assert transport.requests == [("POST", "/v1/sessions")]
        assert isinstance(events[-1], Result) and any(isinstance(e, TextDelta) for e in events)
        # a follow-up turn reads its events with a GET, after the first turn's
        await handle.send("two")
        result = await handle.wait()
        assert result.text == "done"
        assert transport.requests[1:] == [("POST", f"/v1/sessions/{handle.session_id}/turns"),
                                          ("GET", f"/v1/sessions/{handle.session_id}/events")]  # fmt: skip


async def test_a_handle_stopped_before_reading_its_stream_still_reads_a_true_record(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    daemon = await make_daemon(providers=fake_providers)
    async with RemoteProvider(daemon.url, TOKEN) as provider:
        handle = await provider.spawn(Spec(prompt="never read", cwd=workspace))
        await handle.stop()  # lets the stream spawn() opened go, unread
        events = [event async for event in handle.events()]  # read again from the daemon's record
    async with client(daemon) as http:
        stored = await read_events(http, handle.session_id)
    assert len(events) == len(stored) and type(events[-1]).__name__ == stored[-1][1]["type"]


async def test_any_session_id_survives_the_header(make_daemon: MakeDaemon, workspace: Path) -> None:
    """A header is Latin-1: the id of a session a client resumes may be anything (schemathesis found a
    500 here), so it travels percent-encoded."""
    daemon = await make_daemon(providers=fake_providers)  # (the double resumes any id)
    odd = "ünï/cøde id?\u2603"
    async with RemoteProvider(daemon.url, TOKEN) as provider:
        handle = await provider.resume(odd, Spec(prompt="again", cwd=workspace))
        assert handle.session_id == odd
        assert isinstance((await handle.wait()), Result)
