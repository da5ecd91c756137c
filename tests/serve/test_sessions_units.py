"""Sessions on a provider double, hermetic: stop keeps the session through ``Handle.interrupt`` where the
provider has it, pages of ``GET /v1/sessions`` (issue 28 items 11 and 13)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_fleet.contract import Handle, Provider, Spec
from agent_fleet.errors import Unsupported

from .conftest import MakeDaemon, client, page_data, read_events
from .fakes import FakeHandle, FakeProvider, fake_providers


class _Slow(FakeHandle):
    """A turn that runs until stopped; counts how it was stopped."""

    stops = 0
    interrupts = 0

    def _turn(self, prompt: str) -> None:
        if getattr(self, "_started", False):
            super()._turn(prompt)  # later turns answer at once
            return
        self._started = True
        self._running = True  # the first turn runs until stopped

    async def stop(self) -> None:
        _Slow.stops += 1
        await super().stop()

    async def interrupt(self) -> None:
        _Slow.interrupts += 1
        await super().stop()


class _NoInterrupt(_Slow):
    async def interrupt(self) -> None:
        raise Unsupported("no interrupt here")


class _SlowProvider(FakeProvider):
    handle_type: type[_Slow] = _Slow
    resumed: list[str] = []

    async def spawn(self, spec: Spec) -> Handle:
        return self.handle_type(f"slow-{id(spec)}", spec.prompt)

    async def resume(self, session_id: str, spec: Spec) -> Handle:
        type(self).resumed.append(session_id)
        return FakeHandle(session_id, spec.prompt)


async def _stop_and_continue(make_daemon: MakeDaemon, workspace: Path, provider: type[_SlowProvider]) -> str:
    daemon = await make_daemon(providers=lambda name, options: provider())
    async with client(daemon) as http:
        sid = (await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        assert (await http.post(f"/v1/sessions/{sid}/stop")).status_code == 200
        assert (await read_events(http, sid))[-1][1]["code"] == "cancelled"
        turn = await http.post(f"/v1/sessions/{sid}/turns", json={"prompt": "go on"})
        assert turn.status_code == 200, turn.text
        return str((await read_events(http, sid, after=turn.json()["last_event_id"]))[-1][1]["type"])


async def test_stop_interrupts_and_keeps_the_handle_where_the_provider_can(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    _Slow.stops = _Slow.interrupts = 0
    _SlowProvider.resumed = []
    assert await _stop_and_continue(make_daemon, workspace, _SlowProvider) == "Result"
    assert (_Slow.interrupts, _Slow.stops, _SlowProvider.resumed) == (1, 0, [])  # the same handle went on


async def test_stop_falls_back_and_the_next_turn_resumes_on_the_provider(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    class Provider(_SlowProvider):
        handle_type = _NoInterrupt

    _Slow.stops = 0
    _SlowProvider.resumed = []
    assert await _stop_and_continue(make_daemon, workspace, Provider) == "Result"
    assert _Slow.stops >= 1 and len(_SlowProvider.resumed) == 1


async def test_sessions_are_listed_a_page_at_a_time(make_daemon: MakeDaemon, workspace: Path) -> None:
    daemon = await make_daemon(providers=fake_providers)
    async with client(daemon) as http:
        made = []
        for n in range(7):
            sid = (await http.post("/v1/sessions", json={"prompt": f"p{n}", "cwd": str(workspace)})).json()[
                "session_id"
            ]
            await read_events(http, sid)
            made.append(sid)
        seen: list[str] = []
        cursor: Any = None
        while True:
            params = {"limit": "3", **({"before": cursor} if cursor else {})}
            page = (await http.get("/v1/sessions", params=params)).json()
            assert len(page["sessions"]) <= 3
            seen += [row["session_id"] for row in page["sessions"]]
            cursor = page["next"]
            if cursor is None:
                break
        assert seen == list(reversed(made))  # newest first, each once
        idle = (await http.get("/v1/sessions", params={"state": "idle", "limit": "1000"})).json()["sessions"]
        assert len(idle) == 7
        assert (await http.get("/v1/sessions", params={"state": "running"})).json()["sessions"] == []
        assert (await http.get("/v1/sessions", params={"state": "nope"})).status_code == 400
        assert (await http.get("/v1/sessions", params={"limit": "0"})).status_code == 400
        assert (await http.get("/v1/sessions", params={"before": "no-such"})).status_code == 404
        assert (await http.get("/v1/sessions", params={"page": "2"})).status_code == 400
        # The dashboard shows the latest 50 and says how many there are.
        shown = page_data((await http.get("/")).text)
        assert shown["total"] == 7 and len(shown["sessions"]) == 7


__all__ = ["Provider"]
