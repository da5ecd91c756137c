"""Batches on the daemon (real codex binary, scripted model): progress, summary, report page."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agent_fleet.testing import Reply, ScriptedModelServer

from .conftest import MakeDaemon, client

pytestmark = pytest.mark.e2e  # runs the real binary


async def test_a_batch_runs_on_the_daemon_and_serves_its_summary_and_report(
    make_daemon: MakeDaemon,
    codex_serve_options: dict[str, Any],
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    scripted_model.responder = lambda request: Reply.text("done")
    daemon = await make_daemon(options=codex_serve_options)
    async with client(daemon) as http:
        tasks = "\n".join(
            ['{"id": "one", "prompt": "first thing"}', '{"id": "two", "prompt": "second thing"}']
        )
        response = await http.post(
            "/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}, "jobs": 2}
        )
        assert response.status_code == 201, response.text
        batch_id = response.json()["batch_id"]
        progress = (await http.get(f"/v1/batches/{batch_id}")).json()
        assert progress["total"] == 2 and progress["summary"] is None
        running = daemon.batches.live[batch_id].task
        assert running is not None
        async with asyncio.timeout(120):
            await running
        done = (await http.get(f"/v1/batches/{batch_id}")).json()
        assert done["state"] == "succeeded", done
        assert done["done"] == 2 and done["ok"] == 2
        assert sorted(t["task_id"] for t in done["summary"]["tasks"]) == ["one", "two"]
        report = await http.get(f"/v1/batches/{batch_id}/report")
        assert report.status_code == 200 and "<html" in report.text.lower()
        listed = (await http.get("/v1/batches")).json()["batches"]
        assert [b["batch_id"] for b in listed] == [batch_id]
        assert (await http.get("/v1/batches/b20260101-000000-000000")).status_code == 404
        assert (await http.get("/v1/batches/..")).status_code == 404
