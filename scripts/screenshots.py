"""Regenerate every screenshot in docs/: the daemon's dashboard, a session's page and the batch report.

    python scripts/screenshots.py              # docs/dashboard.png, docs/session.png, docs/report.png
                                               # and docs/report-task.png
    python scripts/screenshots.py --out DIR    # somewhere else

Offline and self-contained: a daemon (``agent-fleet serve`` in process, a temporary state dir) runs the real
codex binary against agent-fleet's scripted model (``agent_fleet.testing``), a few sessions and a batch
run the way ``agent-fleet batch --server`` runs one, and the system's Chromium (``/usr/bin/chromium``,
through Playwright; no browser is downloaded) signs in and takes the pictures. The report's pictures are
of a synthetic 40-task batch (``python -m agent_fleet.testing fleet-report``: made-up tasks written
through the runner's ledger, labelled scripted): its overview, then a failed task opened. About a minute.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import async_playwright

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions
from agent_fleet.remote import RemoteBatch, RemoteProvider
from agent_fleet.runner import GateConfig, Task, run_batch
from agent_fleet.runner.batch import BatchTask
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
from agent_fleet.testing._fleet import synthetic_batch

CHROMIUM = Path("/usr/bin/chromium")
BROWSER_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"]
TOKEN = "screenshots-token-0123456789"
DOCS = Path(__file__).resolve().parent.parent / "docs"

GREETING = """*** Begin Patch
*** Add File: hello.py
+def hello(name: str) -> str:
+    return f"Hello, {name}!"
*** Update File: README.md
@@
-# demo
+# demo
+
+`hello.hello("you")` greets you.
*** End Patch"""


def _patch(name: str, text: str) -> str:
    return f"*** Begin Patch\n*** Add File: {name}\n+{text}\n*** End Patch"


def agent(request: RecordedRequest) -> Reply:
    """The scripted model: what it does depends on the task in the prompt and how far it got."""
    step = len(request.tool_outputs())
    if request.contains("greeting"):
        if step == 0:
            return Reply(
                items=(
                    ReasoningItem(
                        summary="The README describes the package; I should look at the files first."
                    ),
                    Text(text="Let me look at the repository first."),
                    exec_command("ls -la && cat README.md"),
                )
            )
        if step == 1:
            return Reply(items=(Text(text="I'll add the function and document it."), apply_patch(GREETING)))
        if step == 2:
            return Reply(items=(exec_command("python3 -c 'import hello; print(hello.hello(\"fleet\"))'"),))
        return Reply.text("Added `hello()` in hello.py and documented it in the README.")
    if request.contains("deploy"):
        if step == 0:
            return Reply(items=(Text(text="Publishing the build."), exec_command("./deploy.sh --prod")))
        return Reply.text("Deployed.")
    if request.contains("task gamma") and not request.contains("quality gate failed"):
        return Reply.text("Looked at it: nothing to change.") if step == 0 else Reply.text("done")
    for name in ("alpha", "beta", "gamma"):
        if request.contains(f"task {name}"):
            if step == 0:
                return Reply(items=(apply_patch(_patch(f"{name}.txt", name)),))
            return Reply.text(f"Wrote {name}.txt.")
    return Reply.text("done")


def _repo(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "README.md").write_text("# demo\n")
    (path / "deploy.sh").write_text("#!/bin/sh\necho deployed\n")
    (path / "deploy.sh").chmod(0o755)
    for argv in (
        ["init", "-q"],
        ["add", "-A"],
        ["-c", "user.name=demo", "-c", "user.email=d@example.com", "commit", "-qm", "start"],
    ):
        subprocess.run(["git", *argv], cwd=path, check=True)
    return path


async def _fleet(daemon: Daemon, work: Path) -> dict[str, Any]:
    """Two sessions (one done, one waiting for a person) and a batch run as batch --server runs one."""
    repo = _repo(work / "demo")
    async with httpx.AsyncClient(
        base_url=daemon.url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60
    ) as http:
        spec = {
            "prompt": "Add a greeting function and document it in the README",
            "cwd": str(repo),
            "sandbox": "workspace-write",
        }
        done = (await http.post("/v1/sessions", json=spec)).json()["session_id"]
        async with http.stream("GET", f"/v1/sessions/{done}/events") as events:
            async for _ in events.aiter_lines():
                pass
        batch_repo = _repo(work / "batch")
        provider = RemoteProvider(daemon.url, TOKEN)
        shown = await RemoteBatch.attach(provider, name=str(work / "out"), total=3, interval=0.1)
        assert shown is not None
        tasks = [
            BatchTask(
                id=name, line=i + 1, prompt=f"task {name}: write {name}.txt", gate_cmd=f"test -f {name}.txt"
            )
            for i, name in enumerate(("alpha", "beta", "gamma"))
        ]
        spec_of_batch = Spec(prompt="(per task)", cwd=str(batch_repo), sandbox="workspace-write")
        template = Task(id="batch", spec=spec_of_batch, gate=GateConfig(command=None), max_followups=2)
        result = await run_batch(
            tasks,
            template=template,
            out_dir=work / "out",
            jobs=3,
            provider=provider,
            cwd=batch_repo,
            on_event=lambda e: shown.report(e.task_id, e.event) if e.source == "runner" else None,
        )
        await shown.close("succeeded" if result.ok else "failed")
        await provider.shutdown()
        ask = {
            "prompt": "Ship it: deploy the build to production",
            "cwd": str(repo),
            "sandbox": "workspace-write",
            "permission": {"default": "ask"},
        }
        waiting = (await http.post("/v1/sessions", json=ask)).json()["session_id"]
        async with asyncio.timeout(60):
            while not daemon.approvals.pending():
                await daemon.approvals.changed.wait()
    return {"done": done, "waiting": waiting}


async def report_screenshots(url: str, out: Path) -> list[Path]:
    """The batch report page at ``url``: its overview, then a failed task opened."""
    overview, task = out / "report.png", out / "report-task.png"
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1400, "height": 860}, color_scheme="light")
            await page.goto(url)
            await page.locator(".task-row").first.wait_for()
            await page.screenshot(path=str(overview))
            failed = page.locator('.task-row[data-status="failed"]').first
            task_id = await failed.get_attribute("data-task")
            await failed.locator(".c-status").click()
            detail = page.locator(f'#detail[data-task="{task_id}"]')
            await detail.locator("h2").wait_for()
            await detail.locator("details.conversation > summary").click()
            await page.screenshot(path=str(task), full_page=False)
        finally:
            await browser.close()
    return [overview, task]


async def main(out: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="agent-fleet-shots-") as tmp:
        work = Path(tmp)
        # The batch's boxes (each task's temporary directory) under the daemon's --allow-root.
        os.environ["XDG_STATE_HOME"] = str(work / "state-home")
        token = work / "token"
        token.write_text(TOKEN)
        token.chmod(0o600)
        with ScriptedModelServer(responder=agent) as model:
            env = scripted_codex_env(model, work / "codex-home")
            options = {"codex": CodexOptions(config=dict(env.config), env=dict(env.env))}
            config = ServeConfig(
                state_dir=work / "state", token_file=token, allow_roots=(work,), options=options
            )
            async with Daemon(config) as daemon:
                ids = await _fleet(daemon, work)
                async with async_playwright() as pw:
                    browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=BROWSER_ARGS)
                    try:
                        page = await browser.new_page(viewport={"width": 1400, "height": 900})
                        await page.goto(f"{daemon.url}/")  # a browser without the token: the sign-in form
                        await page.fill("input[name=token]", TOKEN)
                        await page.click("button[type=submit]")
                        await page.locator(f'tr[data-session="{ids["done"]}"]').wait_for()
                        await page.locator("#batches details").first.evaluate("d => d.open = true")
                        await page.screenshot(path=str(out / "dashboard.png"), full_page=True)
                        await page.goto(f"{daemon.url}/sessions/{ids['done']}")
                        await page.locator(".entry .diff").first.wait_for()
                        await page.locator(".entry details.output").first.evaluate("d => d.open = true")
                        await page.screenshot(path=str(out / "session.png"), full_page=True)
                    finally:
                        await browser.close()
    print(f"wrote {out / 'dashboard.png'} and {out / 'session.png'}")
    with tempfile.TemporaryDirectory(prefix="agent-fleet-report-") as tmp:
        batch = synthetic_batch(Path(tmp) / "batch", 40, seed=7)
        written = await report_screenshots((batch / "report.html").resolve().as_uri(), out)
    print("wrote " + " and ".join(map(str, written)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=DOCS, help="where to write the pictures (default: docs/)")
    where = parser.parse_args().out
    if not CHROMIUM.exists():
        sys.exit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    where.mkdir(parents=True, exist_ok=True)
    asyncio.run(main(where))
    sys.exit(0)
