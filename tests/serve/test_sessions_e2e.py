"""The daemon against the real codex app-server and the scripted model: sessions over HTTP."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.testing import RecordedRequest, Reply, ScriptedModelServer

from .conftest import MakeDaemon, client, read_events

pytestmark = pytest.mark.e2e  # runs the real binary

TOKEN_RE = re.compile(r"token-(\d+)")


def _types(events: list[tuple[int, dict[str, Any]]]) -> list[str]:
    return [record["type"] for _, record in events]


async def test_session_streams_until_result_then_a_follow_up_turn(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply.text("first answer"))
    scripted_model.enqueue(Reply.text("second answer"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        response = await http.post("/v1/sessions", json={"prompt": "hello", "cwd": str(workspace)})
        assert response.status_code == 201, response.text
        sid = response.json()["session_id"]
        first = await read_events(http, sid)
        assert _types(first)[-1] == "Result"
        assert first[-1][1]["text"] == "first answer"
        assert [i for i, _ in first] == list(range(1, len(first) + 1))
        assert all(record["task_id"] == sid for _, record in first)

        response = await http.post(f"/v1/sessions/{sid}/turns", json={"prompt": "again"})
        assert response.status_code == 200, response.text
        second = await read_events(http, sid, after=first[-1][0])
        assert _types(second)[-1] == "Result"
        assert second[-1][1]["text"] == "second answer"
        assert second[0][0] == first[-1][0] + 1

        both = len(first) + len(second)
        assert await read_events(http, sid, follow=True, limit=both) == first + second
        assert await read_events(http, sid) == first  # without follow: up to the first terminal

        info = (await http.get(f"/v1/sessions/{sid}")).json()
        assert info["state"] == "idle"
        assert info["turns"] == 2
        assert info["last_event_id"] == second[-1][0]
        listed = (await http.get("/v1/sessions")).json()["sessions"]
        assert [s["session_id"] for s in listed] == [sid]


async def test_last_event_id_mid_stream_yields_exactly_the_rest(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply.exec("echo one && echo two"))
    scripted_model.enqueue(Reply.text("done after the command"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        sid = (await http.post("/v1/sessions", json={"prompt": "run it", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        everything = await read_events(http, sid)  # the whole turn, for comparison
        assert len(everything) >= 4
        cut = len(everything) // 2
        head = await read_events(http, sid, limit=cut)  # a client that drops mid-stream
        rest = await read_events(http, sid, after=head[-1][0])
        assert head + rest == everything


async def test_64_concurrent_sessions_each_get_exactly_their_own_events(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    def responder(request: RecordedRequest) -> Reply | None:
        for text in reversed(request.user_texts()):
            match = TOKEN_RE.search(text)
            if match:
                return Reply.text(f"answer-{match.group(1)}")
        return None

    scripted_model.responder = responder
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:

        async def one(i: int) -> tuple[str, list[tuple[int, dict[str, Any]]]]:
            response = await http.post(
                "/v1/sessions", json={"prompt": f"reply with token-{i}", "cwd": str(workspace)}
            )
            assert response.status_code == 201, response.text
            sid = response.json()["session_id"]
            return sid, await read_events(http, sid)

        runs = await asyncio.gather(*(one(i) for i in range(64)))
    assert len({sid for sid, _ in runs}) == 64
    for i, (sid, events) in enumerate(runs):
        ids = [n for n, _ in events]
        assert ids == list(range(1, len(ids) + 1))  # none lost, none repeated
        assert all(record["task_id"] == sid for _, record in events)  # none misrouted
        assert _types(events).count("Result") == 1 and _types(events)[-1] == "Result"
        assert events[-1][1]["text"] == f"answer-{i}"
        stored = list(daemon.store.events(sid))
        assert [(n, r) for n, r in stored] == events
