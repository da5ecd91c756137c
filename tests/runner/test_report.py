"""summary.json and the report page from a real batch of five scripted tasks (real codex binary), the
page read in a real headless Chromium (the system's, driven by Playwright; never a downloaded browser)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import jsonschema
import pytest
from playwright.async_api import Locator, Page, Request, Route, async_playwright

from agent_fleet.codex import CodexOptions
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.testing import ScriptedModelServer

from .five import DECLINED, GATE_OUTPUT, STATUSES, run_five

pytestmark = pytest.mark.e2e

SCHEMA = Path(__file__).resolve().parents[2] / "docs" / "summary.schema.json"
CHROMIUM = Path("/usr/bin/chromium")
#: Where the report's screenshot goes (a CI artifact); the test's tmp directory when unset.
ARTIFACTS_ENV = "AGENT_FLEET_ARTIFACTS"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-sync",
    "--no-first-run",
    "--metrics-recording-only",
]


async def test_summary_answers_questions_and_matches_its_schema(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    prices = PriceTable.from_mapping({"models": {"gpt-5.5": {"input": 2.0, "output": 10.0}}})
    out = tmp_path / "out"
    await run_five(repo, scripted_model, codex_options, out, prices=prices)
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(summary)
    tasks = {t["task_id"]: t for t in summary["tasks"]}
    assert {i: t["status"] for i, t in tasks.items()} == STATUSES
    ok = tasks["ok"]
    assert ok["prompt"] == "[task:ok] do the ok thing" and ok["final_message"] == "turn 1 done"
    # The model came from a -c style config override, not the task: the session reports it.
    assert codex_options.config.get("model") == "gpt-5.5" and ok["model"] == "gpt-5.5"
    assert ok["provider"] == "codex"
    # ... and the scripted model answered: never labelled as the real gpt-5.5 (issue 33)
    assert ok["scripted"] is True and ok["model_label"] == "scripted (as gpt-5.5)" and summary["scripted"]
    assert ok["tokens"]["input"] > 0 and ok["tokens"]["output"] > 0
    assert ok["cost"] == pytest.approx((ok["tokens"]["input"] * 2.0 + ok["tokens"]["output"] * 10.0) / 1e6)
    assert summary["currency"] == "USD" and summary["cost"] > 0
    assert ok["commands"][0]["command"] == "echo hello from ok" and ok["commands"][0]["exit_code"] == 0
    assert ok["commands"][0]["output_tail"] == "hello from ok\n"
    assert "+ok" in (ok["diff"] or ""), "the turn's last diff snapshot"
    assert ok["started_at"] < ok["finished_at"] and ok["duration"] > 0
    assert Path(ok["transcript"]).is_absolute() and _exists(ok["transcript"])
    assert ok["retries"] is None and ok["resumed_from"] is None
    assert [s["kind"] for s in ok["timeline"]].count("tool") == 2  # the command and the patch
    red = tasks["red-gate"]
    assert red["gate"]["passed"] is False and GATE_OUTPUT in red["gate"]["output_tail"]
    assert red["commands"][0]["exit_code"] == 2
    assert any(s["kind"] == "gate" and s["status"] == "failed" for s in red["timeline"])
    declined = tasks["declined"]
    assert declined["declines"] == [
        {
            "rule": "git-reset-hard",
            "reason": "git reset --hard discards uncommitted work",
            "command": DECLINED,
            "at": declined["declines"][0]["at"],
        }
    ]
    assert declined["commands"][0]["status"] == "declined" and declined["commands"][0]["exit_code"] is None
    error = tasks["model-error"]
    assert (
        error["errors"][0]["code"] == "bad_request"
        and "gpt-none does not exist" in error["errors"][0]["message"]
    )
    assert tasks["stopped"]["commands"][0]["command"] == "sleep 30"
    assert summary["stopped"] == "stopped by the user"


def _exists(path: str | Path) -> bool:
    return Path(path).exists()


def _artifacts(tmp_path: Path) -> Path:
    where = os.environ.get(ARTIFACTS_ENV)
    path = Path(where) if where else tmp_path / "artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path


async def _opened(page: Page, task_id: str) -> Locator:
    """Click the task's row; its detail, once drawn."""
    await page.locator(f'.task-row[data-task="{task_id}"] .c-status').click()
    detail = page.locator(f'#detail[data-task="{task_id}"]')
    await detail.locator("h2").wait_for()
    return detail


async def test_report_renders_in_a_real_browser(
    repo: Path, scripted_model: ScriptedModelServer, codex_options: CodexOptions, tmp_path: Path
) -> None:
    assert _exists(CHROMIUM), f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does it)"
    out = tmp_path / "out"
    await run_five(repo, scripted_model, codex_options, out)
    report = out / "report.html"
    url = report.resolve().as_uri()
    requests: list[str] = []
    blocked: list[str] = []
    errors: list[str] = []

    async def only_the_page(route: Route) -> None:
        if route.request.url == url:
            await route.continue_()
        else:
            blocked.append(route.request.url)
            await route.abort()

    def on_request(request: Request) -> None:
        requests.append(request.url)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 900})
            await page.route("**/*", only_the_page)
            page.on("request", on_request)
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            await page.goto(url)
            await page.locator(".task-row").first.wait_for()
            order = [await r.get_attribute("data-task") for r in await page.locator(".task-row").all()]
            assert sorted(order[:2]) == ["model-error", "red-gate"], f"failed tasks first: {order}"
            assert order[2] == "stopped" and sorted(order[3:]) == ["declined", "ok"]
            for task_id, status in STATUSES.items():
                row = page.locator(f'.task-row[data-task="{task_id}"]')
                assert await row.locator(".status").inner_text() == status, task_id
            # the scripted model is named as such, in the page and in each task's model
            assert "SCRIPTED" in await page.locator("#scripted").inner_text()
            # the time axis has ticks, from 0
            ticks = await page.locator("#axis .tick").all_inner_texts()
            assert len(ticks) >= 2 and ticks[0] == "0s", ticks

            declined = await _opened(page, "declined")
            assert await declined.locator(".status").first.inner_text() == "succeeded"
            rule = declined.locator(".declines li")
            assert "git-reset-hard" in await rule.inner_text() and DECLINED in await rule.inner_text()
            assert "scripted (as gpt-5.5)" in await declined.locator("dl").inner_text()
            red = await _opened(page, "red-gate")
            assert await red.locator("tr.command .exit-code").inner_text() == "2"
            assert GATE_OUTPUT in await red.locator(".gate-output").inner_text()
            assert await page.evaluate("location.hash") == "#task-red-gate", "an opened task can be linked"

            ok = await _opened(page, "ok")
            # Command output starts collapsed and opens on a click.
            output = ok.locator("tr.command details")
            assert not await output.locator("pre").is_visible()
            await output.locator("summary").click()
            assert "hello from ok" in await output.locator("pre").inner_text()
            # The conversation, collapsed: the agent's last message with the command it ran, in order.
            conversation = ok.locator("details.conversation")
            assert not await conversation.locator(":scope > ol").is_visible()
            await conversation.locator(":scope > summary").click()
            said = await conversation.locator(":scope > ol > li").all_inner_texts()
            assert said[0].startswith("task") and "do the ok thing" in said[0]
            command = next(n for n, s in enumerate(said) if "echo hello from ok" in s)
            agent = next(n for n, s in enumerate(said) if s.startswith("agent") and "turn 1 done" in s)
            assert command < agent, said
            # Files changed with their lines added and removed; the diff in colour.
            assert "+1" in await ok.locator(".files li", has_text="ok.txt").inner_text()
            added = ok.locator("pre.diff span.add", has_text="+ok").first
            assert await added.evaluate("e => getComputedStyle(e).backgroundColor") != "rgba(0, 0, 0, 0)"
            shot = _artifacts(tmp_path) / "report.png"
            await page.screenshot(path=str(shot), full_page=False)
            assert shot.stat().st_size > 10_000

            # Filter by status: only the failed tasks stay.
            await page.select_option("#status-filter", "failed")
            visible = [await r.get_attribute("data-task") for r in await page.locator(".task-row").all()]
            assert sorted(visible) == ["model-error", "red-gate"]
            assert await page.locator("#shown").inner_text() == "2 shown"
            # Search by prompt text, across statuses.
            await page.select_option("#status-filter", "")
            await page.fill("#search", "declined thing")
            await page.locator("#shown", has_text="1 shown").wait_for()
            visible = [await r.get_attribute("data-task") for r in await page.locator(".task-row").all()]
            assert visible == ["declined"]
            await page.fill("#search", "")
            await page.locator("#shown", has_text=f"{len(STATUSES)} shown").wait_for()

            # Dark mode from the system's setting.
            light = await page.evaluate("getComputedStyle(document.body).backgroundColor")
            await page.emulate_media(color_scheme="dark")
            dark = await page.evaluate("getComputedStyle(document.body).backgroundColor")
            assert (light, dark) == ("rgb(255, 255, 255)", "rgb(13, 17, 23)")
        finally:
            await browser.close()
    assert errors == []
    assert requests == [url], f"the page made requests: {requests}"
    assert blocked == []
    shutil.copy(report, _artifacts(tmp_path) / "report.html")
