"""What the dashboard needs from the daemon, hermetic (a provider double: no agent binary runs): sign-in
from a page, rows that tell sessions apart, filters, a client's batch with its tasks, stopping batches,
the updates feed, watchers that are not clients, and pages whose only script is their own."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet.contract import Handle, Provider, Spec
from agent_fleet.errors import UsageError
from agent_fleet.events import Error, Event, Result, System, TextDelta, TokenUsage
from agent_fleet.remote import RemoteBatch, RemoteProvider
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.serve import Daemon
from agent_fleet.serve._feed import Feed

from .conftest import TOKEN, MakeDaemon, client, page_data, read_events
from .fakes import FakeProvider

BROWSER = {"Accept": "text/html,application/xhtml+xml,*/*;q=0.8"}


class TurnHandle(Handle):
    """A turn that reports its model (scripted), some usage and a cost, then waits for ``release`` (or a
    stop) before its ``Result``."""

    def __init__(self, session_id: str, *, hold: bool, cost: float | None) -> None:
        self._id = session_id
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self.release = asyncio.Event()
        self.injected: list[str] = []
        self._cost = cost
        self._running = True
        usage = TokenUsage(input_tokens=1000, cached_input_tokens=200, output_tokens=300, total_tokens=1300)
        self._queue.put_nowait(
            System(subtype="session", data={"model": "gpt-5.5", "model_provider": "scripted"})
        )
        self._queue.put_nowait(TextDelta(text="working", item_id="m1"))
        self._queue.put_nowait(usage)
        self._usage = usage
        if not hold:
            self.release.set()

    @property
    def session_id(self) -> str:
        return self._id

    async def events(self) -> AsyncIterator[Event]:
        while not self._queue.empty():
            yield self._queue.get_nowait()
        stopped = asyncio.ensure_future(self._stopped())
        released = asyncio.ensure_future(self.release.wait())
        await asyncio.wait([stopped, released], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        released.cancel()
        self._running = False
        if released.done() and not released.cancelled():
            yield Result(session_id=self._id, text="done", usage=self._usage, cost_usd=self._cost)
        else:
            yield Error(code="cancelled", message="stopped")

    async def _stopped(self) -> None:
        event = await self._queue.get()
        assert isinstance(event, Error)

    async def send(
        self,
        prompt: str,
        *,
        images: Sequence[str | Path] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> None:
        raise UsageError("one turn only")

    async def inject(self, text: str) -> None:
        self.injected.append(text)

    async def stop(self) -> None:
        if self._running:
            self._queue.put_nowait(Error(code="cancelled", message="stopped"))

    async def interrupt(self) -> None:
        await self.stop()

    async def wait(self) -> Result:
        raise UsageError("not used")


class TurnProvider(FakeProvider):
    def __init__(self, *, hold: bool = False, cost: float | None = None) -> None:
        self.hold = hold
        self.cost = cost
        self.handles: list[TurnHandle] = []

    async def spawn(self, spec: Spec) -> Handle:
        handle = TurnHandle(f"turn-{len(self.handles) + 1}", hold=self.hold, cost=self.cost)
        self.handles.append(handle)
        return handle


async def _daemon(make_daemon: MakeDaemon, provider: Provider, **kw: Any) -> Daemon:
    return await make_daemon(providers=lambda name, options: provider, **kw)


async def eventually(condition: Callable[[], object], within: float = 10.0) -> None:
    """Until ``condition()`` holds (what it waits on has no event of its own to wait for)."""
    async with asyncio.timeout(within):
        while True:
            if condition():
                return
            await asyncio.sleep(0.01)


# -- signing in ------------------------------------------------------------------------------------------


async def test_a_browser_opening_a_page_without_the_token_is_sent_to_sign_in_and_back(
    make_daemon: MakeDaemon,
) -> None:
    daemon = await make_daemon()
    async with client(daemon, token=None) as http:
        home = await http.get("/", headers=BROWSER)
        assert home.status_code == 303 and home.headers["location"] == "login"  # relative: proxies keep it
        deep = await http.get("/sessions/abc-1", params={"x": "1"}, headers=BROWSER)
        assert deep.status_code == 303 and deep.headers["location"] == "../login?next=sessions/abc-1%3Fx%3D1"
        assert (await http.get("/")).status_code == 401  # an API client still gets the JSON error
        form = await http.get("/login", params={"next": "sessions/abc-1"})
        assert 'action="login"' in form.text and 'name="next" value="sessions/abc-1"' in form.text
        back = await http.post("/login", data={"token": TOKEN, "next": "sessions/abc-1"})
        assert back.status_code == 303 and back.headers["location"] == "./sessions/abc-1"
        for elsewhere in (
            "//evil.example/x",
            "https://evil.example",
            "/etc",
            "sessions/../../x",
            "v1/sessions",
        ):
            response = await http.post("/login", data={"token": TOKEN, "next": elsewhere})
            assert response.headers["location"] == "./", elsewhere
        assert (await http.get("/", headers=BROWSER)).status_code == 200  # the cookie signs the page in


# -- rows ------------------------------------------------------------------------------------------------


async def test_a_sessions_row_tells_it_apart(make_daemon: MakeDaemon, workspace: Path) -> None:
    provider = TurnProvider(cost=0.25)
    daemon = await _daemon(make_daemon, provider)
    async with client(daemon) as http:
        spec = {"prompt": "fix the flaky test\nin tests/", "cwd": str(workspace), "model": "asked-for"}
        sid = (await http.post("/v1/sessions", json=spec)).json()["session_id"]
        await read_events(http, sid)
        [row] = (await http.get("/v1/sessions")).json()["sessions"]
    assert row["prompt"] == "fix the flaky test\nin tests/" and row["cwd"] == str(workspace)
    assert row["model"] == "gpt-5.5" and row["model_provider"] == "scripted" and row["scripted"] is True
    assert row["model_label"] == "scripted (as gpt-5.5)"
    assert row["tokens"] == 1300 and row["cost"] == 0.25 and row["currency"] == "USD"
    assert row["state"] == "idle" and row["duration"] >= 0 and row["ended"] >= row["created"]
    assert row["clients"] == 0 and row["loaded"] is True and row["task_id"] is None


async def test_a_price_table_gives_the_cost_a_provider_does_not_report(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    prices = PriceTable.from_mapping(
        {"models": {"gpt-5.5": {"input": 1.0, "cached_input": 0.5, "output": 10.0}}}
    )
    daemon = await _daemon(make_daemon, TurnProvider(), prices=prices)
    async with client(daemon) as http:
        sid = (await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        await read_events(http, sid)
        row = (await http.get(f"/v1/sessions/{sid}")).json()
    assert row["cost"] == pytest.approx((800 * 1.0 + 200 * 0.5 + 300 * 10.0) / 1e6)


async def test_sessions_filter_by_state_batch_provider_and_text(make_daemon: MakeDaemon) -> None:
    daemon = await make_daemon()
    store = daemon.store
    for n in range(6):
        sid = f"s{n}"
        store.add_session(
            sid, "codex" if n % 2 else "claude", {"prompt": f"task number {n}", "cwd": f"/w/r{n}"}
        )
        store.update(sid, state="idle", batch_id="c1" if n < 3 else None, task_id=f"t{n}")
    async with client(daemon) as http:

        async def ids(**params: str) -> list[str]:
            return [
                r["session_id"] for r in (await http.get("/v1/sessions", params=params)).json()["sessions"]
            ]

        assert await ids(batch="c1") == ["s2", "s1", "s0"]
        assert await ids(provider="claude") == ["s4", "s2", "s0"]
        assert await ids(q="NUMBER 4") == ["s4"]  # ASCII case does not count
        assert await ids(q="/w/r5") == ["s5"] and await ids(q="t3") == ["s3"]
        assert await ids(batch="c1", provider="codex", state="idle") == ["s1"]
        assert (await http.get("/v1/sessions", params={"provider": "nope"})).status_code == 400
        assert (await http.get("/v1/sessions", params={"q": "x" * 201})).status_code == 400
        shown = page_data((await http.get("/", params={"batch": "c1", "before": "s2"})).text)
    assert [r["session_id"] for r in shown["sessions"]] == ["s1", "s0"]
    assert shown["total"] == 3 and shown["offset"] == 1 and shown["filters"]["batch"] == "c1"


# -- a client's batch (batch --server) --------------------------------------------------------------------


def _notice(task: str, subtype: str, **data: Any) -> dict[str, Any]:
    return {"task_id": task, "subtype": f"runner.{subtype}", "data": data}


async def test_a_clients_batch_shows_its_tasks_their_sessions_and_its_notes(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    daemon = await _daemon(make_daemon, TurnProvider())
    async with client(daemon) as http:
        attached = await http.post("/v1/batches/attach", json={"name": "/home/me/out", "total": 2})
        assert attached.status_code == 201, attached.text
        bid = attached.json()["batch_id"]
        sid = (await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        await read_events(http, sid)
        report = {
            "notices": [
                _notice("alpha", "started", prompt="do alpha"),
                _notice("alpha", "session", session_id=sid),
                _notice("alpha", "gate", passed=False, summary="tests: 2 failed", checks=[]),
                _notice("alpha", "followup", number=1, limit=2, prompt="fix it"),
                _notice("alpha", "finished", status="succeeded", reason="ok"),
                _notice("beta", "started", prompt="do beta"),
            ]
        }
        answer = await http.post(f"/v1/batches/{bid}/notices", json=report)
        assert answer.json() == {"ok": True, "stop": False}
        batch = (await http.get(f"/v1/batches/{bid}")).json()
        session = (await http.get(f"/v1/sessions/{sid}")).json()
        listed = [
            r["session_id"]
            for r in (await http.get("/v1/sessions", params={"batch": bid})).json()["sessions"]
        ]
        end = await http.post(
            f"/v1/batches/{bid}/notices", json={"state": "failed", "reason": "1 of 2 failed"}
        )
        assert end.status_code == 200
        ended = (await http.get(f"/v1/batches/{bid}")).json()
        refused = [
            await http.post(f"/v1/batches/{bid}/notices", json={"notices": [_notice("a/b", "started")]}),
            await http.post(
                f"/v1/batches/{bid}/notices", json={"notices": [{"task_id": "a", "subtype": "x"}]}
            ),
            await http.post(f"/v1/batches/{bid}/resume"),
            await http.post("/v1/batches/attach", json={"name": "", "total": 1}),
            await http.post("/v1/batches/attach", json={"name": "x", "total": -1}),
            await http.post("/v1/batches/attach", json={"name": "x", "total": 2**70}),
        ]
        unknown = await http.post("/v1/batches/c20990101-000000-abcdef/notices", json={})
        no_report = await http.get(f"/v1/batches/{bid}/report")
    assert batch["kind"] == "client" and batch["name"] == "/home/me/out" and batch["total"] == 2
    assert batch["state"] == "running" and batch["done"] == 1 and batch["ok"] == 1
    tasks = {t["task_id"]: t for t in batch["tasks"]}
    assert tasks["alpha"]["session_id"] == sid and tasks["alpha"]["status"] == "succeeded"
    assert tasks["beta"]["state"] == "running" and tasks["beta"]["prompt"] == "do beta"
    assert session["task_id"] == "alpha" and session["batch_id"] == bid and listed == [sid]
    assert [n["subtype"] for n in session["notes"]] == ["runner.gate", "runner.followup"]
    assert session["notes"][0]["data"]["summary"] == "tests: 2 failed" and session["notes"][0]["after"] >= 1
    assert ended["state"] == "failed" and ended["reason"] == "1 of 2 failed"
    assert [r.status_code for r in refused] == [400] * 6
    assert unknown.status_code == 404 and no_report.status_code == 404


async def test_a_stop_asked_on_the_dashboard_reaches_the_client_running_the_batch(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    daemon = await make_daemon()
    stopped = asyncio.Event()
    provider = RemoteProvider(daemon.url, TOKEN)
    try:
        shown = await RemoteBatch.attach(provider, name="out", total=1, on_stop=stopped.set, interval=0.05)
        assert shown is not None
        async with client(daemon) as http:
            assert (await http.post(f"/v1/batches/{shown.batch_id}/stop")).status_code == 200
            assert (await http.get(f"/v1/batches/{shown.batch_id}")).json()["stop_asked"] is True
            shown.report("a", System(subtype="runner.started", data={"prompt": "p"}))
            shown.report("a", TextDelta(text="not a notice"))  # only the runner's notices go
            async with asyncio.timeout(10):
                await stopped.wait()
            await shown.close("stopped", "stopped from the dashboard")
            batch = (await http.get(f"/v1/batches/{shown.batch_id}")).json()
        assert batch["state"] == "stopped" and batch["tasks"][0]["task_id"] == "a"
        assert batch["stop_asked"] is False
    finally:
        await provider.shutdown()


async def test_a_batch_run_here_stops_through_the_api_and_can_be_resumed(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    provider = TurnProvider(hold=True)
    daemon = await _daemon(make_daemon, provider)
    async with client(daemon) as http:
        tasks = [{"id": "one", "prompt": "p1"}, {"id": "two", "prompt": "p2"}]
        bid = (
            await http.post("/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}, "jobs": 1})
        ).json()["batch_id"]
        await eventually(lambda: provider.handles)
        assert (await http.post(f"/v1/batches/{bid}/stop")).status_code == 200
        async with asyncio.timeout(20):
            await asyncio.wait([daemon.batches.running[bid]])
        batch = (await http.get(f"/v1/batches/{bid}")).json()
    assert batch["state"] == "stopped" and "resume" in batch["reason"]
    assert len(provider.handles) == 1  # the second task never started


# -- the updates -------------------------------------------------------------------------------------------


async def _updates(http: httpx.AsyncClient, params: dict[str, str], want: int) -> list[tuple[str, Any]]:
    got: list[tuple[str, Any]] = []
    async with asyncio.timeout(10), http.stream("GET", "/v1/updates", params=params) as stream:
        assert stream.status_code == 200
        kind = ""
        async for line in stream.aiter_lines():
            if line.startswith("event: "):
                kind = line[7:]
            elif line.startswith("data: "):
                got.append((kind, json.loads(line[6:])))
                if len(got) >= want:
                    return got
    return got


async def test_the_updates_say_what_changed_and_a_reader_too_far_behind_is_told_to_reload(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    provider = TurnProvider(hold=True)
    daemon = await _daemon(make_daemon, provider)
    daemon.feed.expect_reader()
    async with client(daemon) as http:
        start = str(daemon.feed.seq)
        reader = asyncio.ensure_future(_updates(http, {"after": start}, 1))
        sid = (await http.post("/v1/sessions", json={"prompt": "watch me", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        [(kind, row)] = await reader
        assert kind == "session" and row["session_id"] == sid and row["prompt"] == "watch me"
        assert row["fleet_running"] == 1
        mine = asyncio.ensure_future(_updates(http, {"after": str(daemon.feed.seq), "session": sid}, 1))
        other = (await http.post("/v1/sessions", json={"prompt": "other", "cwd": str(workspace)})).json()
        provider.handles[0].release.set()
        [(kind, row)] = await mine
        assert kind == "session" and row["session_id"] == sid  # the other session's updates were left out
        assert other["session_id"] != sid
        assert await _updates(http, {"after": str(daemon.feed.seq + 50)}, 1) == [("reset", {})]  # restarted


async def test_the_feed_keeps_only_so_much_and_builds_nothing_nobody_reads() -> None:
    rows = {"s1": {"session_id": "s1"}}
    feed = Feed(session_row=rows.get, batch_row=lambda key: None, interval=0.01, keep=3, grace=0)
    feed.session("s1")
    feed.flush()
    assert feed.seq == 1 and not feed._kept  # nobody reads: nothing built, a later reader resets
    reads = feed.read(0)
    assert [u.kind for u in await anext(reads)] == ["reset"]
    for n in range(3):
        feed.publish("note", {"n": n}, session="s1")
    assert [json.loads(u.data)["n"] for u in await anext(reads)] == [0, 1, 2]
    for n in range(3, 8):  # more than it keeps, while the reader is away
        feed.publish("note", {"n": n}, session="s1")
    assert [u.kind for u in await anext(reads)] == ["reset"]
    feed.publish("note", {"n": 8})
    assert [json.loads(u.data)["n"] for u in await anext(reads)] == [8]
    assert [u.kind for u in await anext(feed.read(1))] == ["reset"]  # its updates are gone
    feed.close()
    with pytest.raises(StopAsyncIteration):
        await anext(reads)


# -- watchers, pages ---------------------------------------------------------------------------------------


async def test_a_watcher_is_not_the_sessions_client(make_daemon: MakeDaemon, workspace: Path) -> None:
    provider = TurnProvider(hold=True)
    daemon = await _daemon(make_daemon, provider)
    async with client(daemon) as http:
        sid = (await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        live = daemon.sessions.live[sid]
        async with http.stream(
            "GET", f"/v1/sessions/{sid}/events", params={"follow": "1", "watch": "1"}
        ) as watched:
            assert watched.status_code == 200
            await asyncio.sleep(0.2)
            assert live.readers == 0 and live.alone is not None  # still an orphan: its timer runs
            async with http.stream("GET", f"/v1/sessions/{sid}/events", params={"follow": "1"}) as read:
                assert read.status_code == 200
                await eventually(lambda: live.readers == 1)
        provider.handles[0].release.set()


async def test_pages_run_only_their_own_script_and_their_data_cannot_end_it(
    make_daemon: MakeDaemon, workspace: Path
) -> None:
    hostile = "</script><script>alert(1)</script><!-- \u2028"
    daemon = await _daemon(make_daemon, TurnProvider())
    async with client(daemon) as http:
        sid = (await http.post("/v1/sessions", json={"prompt": hostile, "cwd": str(workspace)})).json()[
            "session_id"
        ]
        await read_events(http, sid)
        pages = [await http.get("/"), await http.get(f"/sessions/{sid}")]
        missing = await http.get("/sessions/nope")
    assert missing.status_code == 404 and "no session" in missing.text
    for page in pages:
        assert page.status_code == 200
        scripts = re.findall(r"<script>(.*?)</script>", page.text, re.DOTALL)
        assert len(scripts) == 1 and "alert(1)" not in scripts[0]
        digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
        policy = page.headers["content-security-policy"]
        assert f"script-src 'sha256-{digest}'" in policy and "connect-src 'self'" in policy
        assert "<script>alert(1)" not in page.text  # the data block holds it escaped
        assert page_data(page.text)  # and still parses
    session = page_data(pages[1].text)["session"]
    assert session["prompt"] == hostile and session["history"][0]["prompt"] == hostile


async def test_a_decline_reason_is_told_to_the_running_turn(make_daemon: MakeDaemon, workspace: Path) -> None:
    from agent_fleet._provider.refine import HANDLER_SESSION
    from agent_fleet.policy import ApprovalRequest, Decision

    provider = TurnProvider(hold=True)
    daemon = await _daemon(make_daemon, provider)
    async with client(daemon) as http:
        sid = (await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(workspace)})).json()[
            "session_id"
        ]
        HANDLER_SESSION.set(sid)
        request = ApprovalRequest(kind="command", command="rm -r build", cwd=str(workspace))
        asked = asyncio.ensure_future(
            daemon.approvals.handler(
                request, Decision(action="decline", rule="default-ask", reason="no rule")
            )
        )
        await eventually(daemon.approvals.pending)
        [pending] = (await http.get("/v1/approvals")).json()["approvals"]
        assert pending["session_id"] == sid and pending["prompt"] == "p" and pending["why"] == "no rule"
        body = {"decision": "decline", "reason": "keep the build dir"}
        assert (await http.post(f"/v1/approvals/{pending['approval_id']}", json=body)).status_code == 200
        decided = await asked
        provider.handles[0].release.set()
    assert decided.action == "decline" and decided.reason == "keep the build dir"
    assert provider.handles[0].injected == [
        "A person declined the command `rm -r build`. Their reason: keep the build dir"
    ]


async def test_allowed_for_the_session_is_remembered_for_that_session_and_that_request_only() -> None:
    from agent_fleet._provider.refine import HANDLER_SESSION
    from agent_fleet.policy import ApprovalRequest, Decision
    from agent_fleet.serve._approvals import ApprovalQueue

    queue = ApprovalQueue(timeout=5)
    ask = Decision(action="decline", rule="default-ask", reason="nobody decided")
    touch = ApprovalRequest(kind="command", command="touch x", cwd="/w")

    async def asked(session: str, request: ApprovalRequest, answer: str | None) -> Decision:
        HANDLER_SESSION.set(session)
        decision = asyncio.ensure_future(queue.handler(request, ask))
        if answer is not None:
            await eventually(queue.pending)
            queue.decide(queue.pending()[0]["approval_id"], answer)
        return await decision

    assert (await asked("s1", touch, "allow_for_session")).action == "allow_for_session"
    again = await asked("s1", touch, None)  # not parked: nobody is asked
    assert again.action == "allow_for_session" and "for the session" in (again.reason or "")
    assert (await asked("s2", touch, "decline")).action == "decline"  # another session is asked
    other = ApprovalRequest(kind="command", command="touch y", cwd="/w")
    assert (await asked("s1", other, "allow_once")).action == "allow_once"  # another request too
    assert (await queue.handler(touch, Decision(action="decline", rule="user-deny"))).rule == "user-deny"


async def test_a_request_to_leave_the_sandbox_is_never_allowed_for_the_session() -> None:
    """An escalated request a person allowed "for the session" is asked again the next time: leaving the
    sandbox is allowed one run at a time."""
    from agent_fleet._provider.refine import HANDLER_SESSION
    from agent_fleet.policy import ApprovalRequest, Decision
    from agent_fleet.serve._approvals import ApprovalQueue

    queue = ApprovalQueue(timeout=5)
    unproven = Decision(action="decline", rule="escalation-unproven", reason="outside the sandbox")
    deploy = ApprovalRequest(kind="command", command="./deploy.sh", cwd="/w", escalated=True)
    HANDLER_SESSION.set("s1")
    for answer in ("allow_for_session", "allow_once"):
        decision = asyncio.ensure_future(queue.handler(deploy, unproven))
        await eventually(queue.pending)  # parked each time: the first answer was not remembered
        [pending] = queue.pending()
        assert pending["escalated"] is True
        queue.decide(pending["approval_id"], answer)
        assert (await decision).action == answer


async def test_serve_says_where_the_dashboard_is_and_how_to_sign_in(tmp_path: Path, token_file: Path) -> None:
    import os
    import signal
    import sys

    argv = [str(Path(sys.executable).parent / "agent-fleet"), "serve", "--port", "0"]
    argv += [
        "--state-dir",
        str(tmp_path / "state"),
        "--token-file",
        str(token_file),
        "--allow-root",
        str(tmp_path),
    ]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=asyncio.subprocess.PIPE, env=dict(os.environ))
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        async with asyncio.timeout(30):
            while not lines or not lines[-1].startswith("clients:"):
                line = (await proc.stdout.readline()).decode()
                assert line, lines
                lines.append(line)
    finally:
        proc.send_signal(signal.SIGTERM)
        await proc.wait()
    url = lines[0].split()[-1]
    assert lines[0].startswith("listening on http://127.0.0.1:")
    assert f"dashboard: {url}/" in "".join(lines) and f"cat {token_file}" in "".join(lines)
    assert f"--server {url}" in lines[-1] and TOKEN not in "".join(lines)
