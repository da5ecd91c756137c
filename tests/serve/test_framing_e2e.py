"""Clickjacking, in headless Chromium (issue 28 item 4): a page on another port of 127.0.0.1 is the same
site as the daemon, so the signed-in dashboard's cookie goes with a frame of it. The daemon's pages must
refuse to be framed. (Marked e2e: it starts a browser; no agent runs.)"""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.async_api import async_playwright

from .conftest import TOKEN, MakeDaemon
from .test_dashboard_e2e import BROWSER_ARGS, CHROMIUM

pytestmark = pytest.mark.e2e  # starts a real browser


@pytest.fixture
def attacker() -> Iterator[tuple[str, list[str]]]:
    """A page on another port of 127.0.0.1 that frames whatever URL it is given (``/?u=URL``)."""
    pages: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            target = self.path.partition("?u=")[2]
            body = (
                f'<!doctype html><title>win a prize</title><iframe id="f" src="{target}"></iframe>'.encode()
            )
            pages.append(target)
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()


async def test_the_signed_in_dashboard_refuses_to_be_framed(
    make_daemon: MakeDaemon, attacker: tuple[str, list[str]]
) -> None:
    assert CHROMIUM.exists(), f"{CHROMIUM} is missing: apt-get install -y chromium"
    daemon = await make_daemon()
    evil, _ = attacker
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"{daemon.url}/login")
            await page.fill("input[name=token]", TOKEN)
            await page.click("button[type=submit]")
            await page.locator("#sessions").wait_for()  # signed in: the dashboard shows
            for target in (f"{daemon.url}/", f"{daemon.url}/login"):
                async with page.expect_response(target) as answered:
                    await page.goto(f"{evil}/?u={target}")
                response = await answered.value
                assert response.status == 200, target  # the cookie went along: only the headers refuse
                await page.wait_for_load_state("load")
                frame = page.frame_locator("#f")
                assert await frame.locator("#sessions, form").count() == 0, target
                [child] = page.main_frame.child_frames
                assert not child.url.startswith(daemon.url), child.url  # an error page, not the daemon's
        finally:
            await browser.close()


__all__ = ["Path"]
