"""The dashboard in headless Chromium (issue 33's acceptance): signing in from `/`, a batch run with
`batch --server` appearing with its tasks, a session's page showing messages, a coloured diff and a
command's output as they happen, an approval decided "for the session" with its context in view, a
turn interrupted from the page, 2,000 sessions paged without fetching them all, and all of it behind a
proxy that serves the daemon under a path.

One browser and one daemon (the real codex binary, the scripted model) serve the whole module; each test
has its own browser context and its own prompts, so the order does not matter. The system's Chromium is
driven by Playwright (no browser is downloaded)."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import uvicorn
from playwright.async_api import Browser, BrowserContext, Page, Request, Response, async_playwright
from starlette.types import Receive, Scope, Send

from agent_fleet.codex import CodexOptions
from agent_fleet.contract import Handle, Spec
from agent_fleet.events import (
    AssistantMessage,
    Diff,
    Error,
    Event,
    Plan,
    PlanStep,
    Reasoning,
    SubAgent,
    System,
    TextDelta,
    ToolResult,
    ToolUse,
    UnknownEvent,
    WebSearch,
)
from agent_fleet.serve import Daemon, ServeConfig
from agent_fleet.testing import (
    ReasoningItem,
    RecordedRequest,
    Reply,
    ScriptedModelServer,
    Text,
    apply_patch,
    exec_command,
    scripted_codex_env,
)

from .conftest import TOKEN, client
from .fakes import FakeHandle, FakeProvider, fake_providers

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]  # the real binary, a browser

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
TIMEOUT = 30_000  # ms: what the page waits for at most (a loaded CI machine)

EDIT = """*** Begin Patch
*** Update File: notes.txt
@@
-an old line
+a new line
*** End Patch"""


def agent(request: RecordedRequest) -> Reply:
    """The module's scripted model: each test's prompt names what it does."""
    step = len(request.tool_outputs())
    if request.contains("LIVE-CONVERSATION"):
        match step:
            case 0:  # late enough for the page to be open before anything happens
                items = (ReasoningItem(summary="look first"), Text(text="Let me look."))
                return Reply(items=(*items, exec_command("printf 'line-one\\nline-two\\n'")), delay=1.5)
            case 1:
                return Reply(items=(apply_patch(EDIT),))
            case _:  # the turn is still running while the page shows what came before
                return Reply.text("Edited notes.txt.", delay=4)
    if request.contains("ASK-TWICE"):
        if step < 2:
            return Reply(items=(exec_command("touch asked.txt"),))
        return Reply.text("made it")
    if request.contains("LONG-TURN"):
        return Reply.text("too late", delay=60)
    for name in ("alpha", "beta"):
        if request.contains(f"write {name}.txt"):
            patch = f"*** Begin Patch\n*** Add File: {name}.txt\n+{name}\n*** End Patch"
            return Reply(items=(apply_patch(patch),)) if step == 0 else Reply.text(f"wrote {name}.txt")
    return Reply.text("done")


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(responder=agent) as server:
        yield server


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("dashboard")


@pytest.fixture(scope="module")
def repo(workdir: Path) -> Path:
    path = workdir / "repo"
    path.mkdir()
    (path / "notes.txt").write_text("an old line\n")
    return path


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def daemon(workdir: Path, model: ScriptedModelServer, repo: Path) -> AsyncIterator[Daemon]:
    env = scripted_codex_env(model, workdir / "codex-home")
    token = workdir / "token"
    token.write_text(TOKEN)
    token.chmod(0o600)
    options = {"codex": CodexOptions(config=dict(env.config), env=dict(env.env))}
    # batch --server gives each task a temporary directory in the command's box, under its state dir:
    # the daemon must allow it (docs/concepts/box.md, "On the daemon").
    boxes = Path(os.environ["XDG_STATE_HOME"]) / "agent-fleet" / "boxes"
    boxes.mkdir(parents=True, exist_ok=True)
    roots = (workdir, boxes)
    config = ServeConfig(state_dir=workdir / "state", token_file=token, allow_roots=roots, options=options)
    async with Daemon(config) as running:
        yield running


@pytest.fixture(scope="module")
def chromium() -> Path:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: apt-get install -y chromium"
    return CHROMIUM


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def browser(chromium: Path) -> AsyncIterator[Browser]:
    async with async_playwright() as pw:
        launched = await pw.chromium.launch(executable_path=str(chromium), args=BROWSER_ARGS)
        try:
            yield launched
        finally:
            await launched.close()


async def _signed_in(browser: Browser, daemon: Daemon) -> tuple[BrowserContext, Page]:
    context = await browser.new_context(viewport={"width": 1400, "height": 900})
    await context.add_cookies([{"name": "agent_fleet_token", "value": TOKEN, "url": daemon.url}])
    page = await context.new_page()
    page.set_default_timeout(TIMEOUT)
    return context, page


async def _session(daemon: Daemon, prompt: str, cwd: Path, **spec: Any) -> str:
    async with client(daemon) as http:
        body = {"prompt": prompt, "cwd": str(cwd), "sandbox": "workspace-write", **spec}
        response = await http.post("/v1/sessions", json=body)
        assert response.status_code == 201, response.text
        return str(response.json()["session_id"])


async def test_signing_in_from_the_dashboards_address(browser: Browser, daemon: Daemon) -> None:
    context = await browser.new_context()
    try:
        page = await context.new_page()
        page.set_default_timeout(TIMEOUT)
        await page.goto(f"{daemon.url}/")
        assert page.url == f"{daemon.url}/login"  # the sign-in form, not a JSON error
        await page.fill("input[name=token]", TOKEN)
        await page.click("button[type=submit]")
        await page.locator("#sessions").wait_for()
        assert page.url == f"{daemon.url}/"
        await context.clear_cookies()
        await page.goto(f"{daemon.url}/sessions/no-such-session")  # a deep link comes back after sign-in
        await page.fill("input[name=token]", TOKEN)
        await page.click("button[type=submit]")
        await page.get_by_text("no session 'no-such-session'").wait_for()
        assert page.url == f"{daemon.url}/sessions/no-such-session"
    finally:
        await context.close()


async def test_a_batch_run_with_server_appears_with_its_tasks(
    browser: Browser, daemon: Daemon, workdir: Path
) -> None:
    batch_repo = workdir / "batch-repo"
    batch_repo.mkdir()
    tasks = workdir / "tasks.jsonl"
    lines = [
        f'{{"id": "{n}", "prompt": "write {n}.txt", "gate_cmd": "test -f {n}.txt"}}'
        for n in ("alpha", "beta")
    ]
    tasks.write_text("\n".join(lines) + "\n")
    context, page = await _signed_in(browser, daemon)
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "OPENAI_API_KEY")}
    argv = [str(Path(sys.executable).parent / "agent-fleet"), "batch", str(tasks), "--server", daemon.url]
    argv += ["--cwd", str(batch_repo), "--out", str(workdir / "batch-out"), "--sandbox", "workspace-write"]
    try:
        await page.goto(f"{daemon.url}/")
        await page.locator("#sessions").wait_for()
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**env, "AGENT_FLEET_TOKEN": TOKEN},
            cwd=batch_repo,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 120)
        assert proc.returncode == 0, out.decode()
        # The open page was told, with no reload: the batch, its two tasks and their sessions.
        row = page.locator("#batches tr[data-batch^='c']")
        await row.locator("td.state .badge.state-succeeded").wait_for()
        assert str(workdir / "batch-out") in await row.inner_text()
        await row.locator("summary").click()
        for name in ("alpha", "beta"):
            task = row.locator(f'tr[data-task="{name}"]')
            assert "finished: succeeded" in await task.inner_text()
        link = row.locator('tr[data-task="alpha"] a')
        await link.click()
        await page.locator(".entry.note").first.wait_for()  # its gate, on the task's session page
        assert "gate passed" in await page.locator("#conversation").inner_text()
        assert "alpha" in await page.locator("[data-meta=task]").inner_text()
    finally:
        await context.close()


async def test_a_session_page_shows_the_conversation_as_it_happens(
    browser: Browser, daemon: Daemon, repo: Path
) -> None:
    context, page = await _signed_in(browser, daemon)
    try:
        sid = await _session(daemon, "LIVE-CONVERSATION: edit the notes", repo)
        await page.goto(f"{daemon.url}/sessions/{sid}")
        state = page.locator("[data-meta=state]")
        message = page.locator(".entry.message", has_text="Let me look.")
        await message.wait_for()
        command = page.locator(".entry.command", has_text="line-one")
        await command.locator(".badge.ok", has_text="exit 0").wait_for()
        await command.locator("details.output summary").click()
        assert "line-two" in await command.locator("details.output pre").inner_text()
        added = page.locator(".entry .diff .add", has_text="a new line").first
        removed = page.locator(".entry .diff .del", has_text="an old line").first
        await added.wait_for()
        assert await state.inner_text() == "running"  # all of it shown while the turn still runs
        colours = [
            await line.evaluate("e => getComputedStyle(e).backgroundColor") for line in (added, removed)
        ]
        assert len(set(colours)) == 2 and "rgba(0, 0, 0, 0)" not in colours  # green and red, not plain
        await page.locator(".entry.message", has_text="Edited notes.txt.").wait_for()
        await page.locator("[data-meta=state].state-idle").wait_for()
        assert await page.locator(".entry.reasoning").inner_text() == "reasoning\nlook first"
    finally:
        await context.close()


async def test_an_approval_is_decided_for_the_session_with_its_context_in_view(
    browser: Browser, daemon: Daemon, repo: Path
) -> None:
    context, page = await _signed_in(browser, daemon)
    try:
        await page.goto(f"{daemon.url}/")
        await page.locator("#sessions").wait_for()
        sid = await _session(daemon, "ASK-TWICE: make asked.txt", repo, permission={"default": "ask"})
        card = page.locator(f"#approvals .card:has(a[href='sessions/{sid}'])")
        await card.wait_for()  # came with the page's updates
        text = await card.inner_text()
        assert "touch asked.txt" in text and "ASK-TWICE: make asked.txt" in text and str(repo) in text
        assert "rule default-ask" in text
        await card.locator("button[data-decide=allow_for_session]").click()
        await card.wait_for(state="detached")
        await page.locator(f'tr[data-session="{sid}"] .state-idle').wait_for()
        # The same command asked for again in this session ran without asking anyone.
        assert await page.locator("#approvals .card").count() == 0
        async with client(daemon) as http:
            events = (await http.get(f"/v1/sessions/{sid}/events")).text
        assert events.count('"subtype":"approval_pending"') == 1, events
        assert "allowed for the session by a person" in events  # (codex offered no acceptForSession)
        assert (repo / "asked.txt").exists()
    finally:
        await context.close()


async def test_a_running_turn_is_interrupted_from_the_dashboard(
    browser: Browser, daemon: Daemon, repo: Path
) -> None:
    context, page = await _signed_in(browser, daemon)
    try:
        sid = await _session(daemon, "LONG-TURN: wait", repo)
        await page.goto(f"{daemon.url}/")
        row = page.locator(f'tr[data-session="{sid}"]')
        await row.locator(".state-running").wait_for()
        button = await row.locator("button[data-stop]").element_handle()
        assert button is not None
        await button.click()
        await row.locator(".state-stopped").wait_for()
        assert await row.locator("button[data-stop]").is_hidden()
        assert await button.evaluate("b => b.isConnected")  # updated in place, never re-rendered
        async with client(daemon) as http:
            assert (await http.get(f"/v1/sessions/{sid}")).json()["history"][0]["status"] == "cancelled"
    finally:
        await context.close()


async def test_two_thousand_sessions_page_without_fetching_them_all(
    browser: Browser, tmp_path: Path, workdir: Path
) -> None:
    token = workdir / "token"
    config = ServeConfig(state_dir=tmp_path / "state", token_file=token, allow_roots=(tmp_path,))
    async with Daemon(config, providers=fake_providers) as many:
        for n in range(2000):
            many.store.add_session(f"s{n:04d}", "codex", {"prompt": f"task {n}", "cwd": str(tmp_path)})
        many.store.update("s1999", state="idle")
        context, page = await _signed_in(browser, many)
        received: list[int] = []

        async def on_response(response: Response) -> None:
            if response.url.startswith(many.url) and "updates" not in response.url:
                received.append(len(await response.body()))

        page.on("response", on_response)
        try:
            await page.goto(f"{many.url}/")
            rows = page.locator("#sessions tbody tr")
            assert await rows.count() == 50
            assert await page.locator("#page-info").inner_text() == "1\u201350 of 2,000"
            first = await rows.first.get_attribute("data-session")
            await page.click("#older")
            await page.locator("#page-info", has_text="51\u2013100 of 2,000").wait_for()
            assert await rows.count() == 50 and await rows.first.get_attribute("data-session") == "s1949"
            assert first == "s1999"
            await page.click("#newest")
            await page.locator("#page-info", has_text="1\u201350 of 2,000").wait_for()
        finally:
            await context.close()
    assert 0 < sum(received) < 200_000, received  # two pages of 50, never the 2,000


class PathProxy:
    """A reverse proxy serving the daemon under ``/fleet/`` as docs/how-to/proxy.md's nginx does: the
    path stripped on the way in, the cookie's path set to ``/fleet/``, responses (event streams too)
    passed on as they come."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.http = httpx.AsyncClient(timeout=httpx.Timeout(60.0, read=None))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"]
        if not path.startswith("/fleet/"):
            where = [(b"location", b"/fleet/")] if path == "/fleet" else []
            await send({"type": "http.response.start", "status": 301 if where else 404, "headers": where})
            await send({"type": "http.response.body", "body": b""})
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        query = scope["query_string"].decode()
        url = self.upstream + path[len("/fleet") :] + (f"?{query}" if query else "")
        headers = [(k, v) for k, v in scope["headers"] if k not in (b"host", b"content-length")]
        request = self.http.build_request(scope["method"], url, headers=headers, content=body)
        response = await self.http.send(request, stream=True)
        try:
            passed = []
            for name, value in response.headers.raw:
                if name.lower() in (b"content-length", b"transfer-encoding", b"connection"):
                    continue
                if name.lower() == b"set-cookie":
                    value = value.replace(b"Path=/", b"Path=/fleet/")
                passed.append((name, value))
            await send({"type": "http.response.start", "status": response.status_code, "headers": passed})

            async def forward() -> None:
                async for chunk in response.aiter_raw():
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})

            async def client_gone() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass

            # As nginx does: when the browser goes, the upstream request is closed too.
            tasks = [asyncio.ensure_future(forward()), asyncio.ensure_future(client_gone())]
            try:
                await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
        finally:
            await response.aclose()


@pytest_asyncio.fixture(loop_scope="module")
async def proxied(daemon: Daemon) -> AsyncIterator[str]:
    proxy = PathProxy(daemon.url)
    server = uvicorn.Server(
        uvicorn.Config(proxy, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    )
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)  # listening before uvicorn runs: the browser's first request waits in the backlog
    serving = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/fleet/"
    finally:
        server.should_exit = True
        await serving
        await proxy.http.aclose()
        sock.close()


async def test_the_dashboard_works_behind_a_proxy_that_serves_it_under_a_path(
    browser: Browser, daemon: Daemon, proxied: str, repo: Path
) -> None:
    context = await browser.new_context()
    outside: list[str] = []

    def on_request(request: Request) -> None:
        if not request.url.startswith(proxied):
            outside.append(request.url)

    try:
        page = await context.new_page()
        page.set_default_timeout(TIMEOUT)
        page.on("request", on_request)
        await page.goto(proxied)
        assert page.url == proxied + "login"
        await page.fill("input[name=token]", TOKEN)
        await page.click("button[type=submit]")
        await page.locator("#sessions").wait_for()
        assert page.url == proxied
        sid = await _session(daemon, "UNDER-A-PATH: say something", repo)
        link = page.locator(f'tr[data-session="{sid}"] a[href^="sessions/"]')
        await link.click()  # the row came through the proxy's event stream
        await page.locator(".entry.message", has_text="done").wait_for()
        assert page.url == f"{proxied}sessions/{sid}"
        await page.click("header a")  # back to the dashboard, under the path
        await page.locator("#sessions").wait_for()
        assert page.url == proxied
    finally:
        await context.close()
    assert outside == []  # every request stayed under the path (no CDN, no absolute URL)


SUB = "019b-sub-agent-thread"
EVERY_KIND: list[Event] = [
    Reasoning(text="think about <b>it</b>", item_id="r1"),
    TextDelta(text="Hello ", item_id="m1"),
    TextDelta(text="<img src=x onerror=alert(1)>", item_id="m1"),
    ToolUse(id="c1", name="shell", input={"command": "make test", "cwd": "/w"}),
    ToolResult(id="c1", output="1 failed\n", exit_code=2, is_error=True, status="failed"),
    ToolUse(id="approval:c2", name="approval", input={"kind": "network", "host": "pypi.org"}, synthetic=True),
    ToolResult(id="approval:c2", output="not allowed", is_error=True, status="decline", synthetic=True),
    System(subtype="approval_denied", data={"rule": "network-deny", "reason": "no hosts allowed"}),
    SubAgent(item_id="s1", tool="spawn_agent", status="running", prompt="check the docs", agents={SUB: {}}),
    AssistantMessage(text="the docs are fine", item_id="m2", agent=SUB),
    Plan(steps=(PlanStep(step="read", status="completed"), PlanStep(step="write", status="pending"))),
    Diff(diff="diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new\n", turn_id="t1"),
    WebSearch(item_id="w1", query="agent fleet"),
    System(subtype="stream_retry", data={"message": "the model stream dropped"}),
    UnknownEvent(raw={"method": "newer/thing"}),
    Error(code="turn_failed", message="the model gave up"),
]


class EveryKind(FakeHandle):
    async def events(self) -> AsyncIterator[Event]:
        for event in EVERY_KIND:
            yield event


class EveryKindProvider(FakeProvider):
    async def spawn(self, spec: Spec) -> Handle:
        return EveryKind("every-kind", spec.prompt)


async def test_a_session_page_shows_every_kind_of_event_as_text(
    browser: Browser, tmp_path: Path, workdir: Path
) -> None:
    config = ServeConfig(state_dir=tmp_path / "state", token_file=workdir / "token", allow_roots=(tmp_path,))
    errors: list[str] = []
    async with Daemon(config, providers=lambda name, options: EveryKindProvider()) as fake:
        async with client(fake) as http:
            bid = (await http.post("/v1/batches/attach", json={"name": "out", "total": 1})).json()["batch_id"]
            sid = (await http.post("/v1/sessions", json={"prompt": "p", "cwd": str(tmp_path)})).json()[
                "session_id"
            ]
            (await http.get(f"/v1/sessions/{sid}/events")).raise_for_status()
            gate = {
                "passed": False,
                "summary": "tests: 1 failed",
                "checks": [
                    {"name": "gate", "passed": False, "detail": "`make test` exited 2", "exit_code": 2}
                ],
            }
            notices = [
                {"task_id": "t", "subtype": "runner.session", "data": {"session_id": sid}},
                {"task_id": "t", "subtype": "runner.gate", "data": gate},
                {
                    "task_id": "t",
                    "subtype": "runner.followup",
                    "data": {"number": 1, "limit": 2, "prompt": "fix"},
                },
            ]
            (await http.post(f"/v1/batches/{bid}/notices", json={"notices": notices})).raise_for_status()
        context, page = await _signed_in(browser, fake)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("dialog", lambda dialog: errors.append("dialog: " + dialog.message))
        try:
            await page.goto(f"{fake.url}/sessions/{sid}")
            await page.locator(".entry.error").wait_for()
            text = await page.locator("#conversation").inner_text()
            for shown in (
                "think about <b>it</b>",
                "Hello <img src=x onerror=alert(1)>",  # shown as text, never markup
                "$ make test",
                "exit 2",
                "declined",
                "rule network-deny: no hosts allowed",
                "sub-agent spawn_agent",
                "check the docs",
                "the docs are fine",
                "read (completed)",
                "agent fleet",
                "stream_retry: the model stream dropped",
                "UnknownEvent",
                "gate failed",
                "tests: 1 failed",
                "follow-up 1 of 2",
                "the model gave up",
            ):
                assert shown in text, shown
            sub = page.locator(".entry.sub", has_text="the docs are fine")
            assert "sub-agent" in await sub.locator(".agent").inner_text()
            await page.locator(".entry summary", has_text="the turn's diff").click()
            assert await page.locator(".diff .add", has_text="+new").count() == 1
            assert await page.locator("img").count() == 0
            assert await page.locator("[data-meta=task]").inner_text() == "t"
        finally:
            await context.close()
    assert errors == []
