"""The daemon against the real codex app-server and the scripted model: sessions over HTTP."""

from __future__ import annotations

import asyncio
import json
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
        assert [(n, json.loads(r)) for n, r in stored] == events


async def test_a_session_has_its_history_per_turn(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply.text("first answer"), Reply.text("never", delay=30))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        sid = (await http.post("/v1/sessions", json={"prompt": "hello", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        first = await read_events(http, sid)
        await http.post(f"/v1/sessions/{sid}/turns", json={"prompt": "and then?"})
        await scripted_model.wait_for_request()
        assert (await http.post(f"/v1/sessions/{sid}/stop")).status_code == 200
        await read_events(http, sid, after=first[-1][0])
        history = (await http.get(f"/v1/sessions/{sid}")).json()["history"]
    assert [(h["turn"], h["prompt"], h["status"]) for h in history] == [
        (1, "hello", "completed"),
        (2, "and then?", "cancelled"),
    ]
    assert history[0]["text"] == "first answer" and history[0]["usage"], history[0]
    assert history[0]["first_event_id"] == 1 and history[1]["first_event_id"] == first[-1][0] + 1
    assert history[1]["text"] is None and history[1]["error"]["code"] == "cancelled"


async def test_finished_sessions_beyond_the_bound_leave_memory_and_a_follow_up_resumes_them(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply.text("noted token-31"), Reply.text("other"), Reply.text("it was token-31"))
    daemon = await make_daemon(options=codex_serve_options, max_live_sessions=1)
    async with client(daemon) as http:
        first = (
            await http.post("/v1/sessions", json={"prompt": "remember token-31", "cwd": str(workspace)})
        ).json()["session_id"]
        before = await read_events(http, first)
        other = (await http.post("/v1/sessions", json={"prompt": "other", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        await read_events(http, other)
        assert list(daemon.sessions.live) == [other]  # the least recently finished one left memory
        releasing = list(daemon.sessions._releasing.values())
        if releasing:
            await asyncio.wait(releasing)
        assert daemon.store.session(first)["archived"] is True  # type: ignore[index]  # let go of, on codex too
        provider = await daemon.sessions.provider("codex")
        assert first in [s.id for s in await provider.list_sessions(archived=True)]
        state = (await http.get(f"/v1/sessions/{first}")).json()
        assert state["state"] == "idle" and state["last_event_id"] == before[-1][0]
        assert await read_events(http, first) == before  # served from the store
        turn = await http.post(f"/v1/sessions/{first}/turns", json={"prompt": "what was it?"})
        assert turn.status_code == 200, turn.text
        assert turn.json()["last_event_id"] == before[-1][0]
        after = await read_events(http, first, after=before[-1][0])
        assert after[-1][1]["type"] == "Result" and after[-1][1]["text"] == "it was token-31"
        assert after[0][0] == before[-1][0] + 1
        history = (await http.get(f"/v1/sessions/{first}")).json()["history"]
        assert [h["prompt"] for h in history] == ["remember token-31", "what was it?"]
    assert "remember token-31" in scripted_model.requests[-1].user_texts()  # resumed: history kept
    assert list(daemon.sessions.live) == [first]
