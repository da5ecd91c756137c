"""The dashboard in headless Chromium: a running session and its pending approval appear, and deciding
it from the page lets the command run (real codex binary, scripted model)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Request, async_playwright

from agent_fleet.testing import Reply, ScriptedModelServer, exec_command

from .conftest import TOKEN, MakeDaemon, client

pytestmark = pytest.mark.e2e  # runs the real binary

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]


@pytest.fixture
def chromium() -> Path:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: apt-get install -y chromium"
    return CHROMIUM


async def test_dashboard_shows_the_session_and_decides_its_approval(
    chromium: Path,
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.enqueue(Reply(items=(exec_command("touch from-the-page.txt"),)), Reply.text("done"))
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        spec = {
            "prompt": "make the file",
            "cwd": str(workspace),
            "sandbox": "workspace-write",
            "permission": {"default": "ask"},
        }
        sid = (await http.post("/v1/sessions", json=spec)).json()["session_id"]
        async with asyncio.timeout(30):
            while not daemon.approvals.pending():
                await daemon.approvals.changed.wait()

    elsewhere: list[str] = []

    def on_request(request: Request) -> None:
        if not request.url.startswith(daemon.url):
            elsewhere.append(request.url)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(chromium), args=BROWSER_ARGS)
        try:
            page = await browser.new_page()
            page.on("request", on_request)
            await page.goto(f"{daemon.url}/login")
            await page.fill("input[name=token]", TOKEN)
            await page.click("button[type=submit]")
            row = page.locator(f'tr[data-session="{sid}"]')
            await row.wait_for()
            assert "running" in await row.inner_text()
            allow = page.locator("#approvals button[data-decide=allow_once]")
            await allow.wait_for()
            assert "touch from-the-page.txt" in await page.locator("#approvals").inner_text()
            await allow.click()
            await page.locator(f'tr[data-session="{sid}"] td.state-idle').wait_for(timeout=30_000)
            assert await page.locator("#approvals button").count() == 0
        finally:
            await browser.close()
    assert (workspace / "from-the-page.txt").exists()
    assert elsewhere == []  # no CDN, nothing but the daemon


async def test_dashboard_shows_a_batch_with_each_tasks_state_and_session(
    chromium: Path,
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.responder = lambda request: Reply.text("done")
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        tasks = [{"id": "alpha", "prompt": "one"}, {"id": "beta", "prompt": "two"}]
        response = await http.post("/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}})
        assert response.status_code == 201, response.text
        batch_id = response.json()["batch_id"]
        async with asyncio.timeout(60):
            await asyncio.wait([daemon.batches.running[batch_id]])
        sessions = {
            t["task_id"]: t["session_id"] for t in (await http.get(f"/v1/batches/{batch_id}")).json()["tasks"]
        }
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(chromium), args=BROWSER_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"{daemon.url}/login")
            await page.fill("input[name=token]", TOKEN)
            await page.click("button[type=submit]")
            row = page.locator(f'tr[data-batch="{batch_id}"]')
            await row.wait_for()
            assert "succeeded" in await row.locator("td").nth(1).inner_text()
            assert "2/2 (2 ok)" in await row.inner_text()
            await row.locator("summary").click()
            for task_id in ("alpha", "beta"):
                task = row.locator(f'tr[data-task="{task_id}"]')
                await task.wait_for()
                text = await task.inner_text()
                assert "finished: succeeded" in text and sessions[task_id] in text
        finally:
            await browser.close()
