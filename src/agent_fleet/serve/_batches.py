"""Batches run by the daemon: ``runner.run_batch`` on the daemon's shared provider, one out dir each.

``POST /v1/batches`` takes ``{"tasks": <the tasks file's text, or a list of its line objects>,
"spec": <the template Spec, its prompt optional>, "jobs": 4, "gate_cmd", "max_followups"}``. The batch
runs in the background under ``<state dir>/batches/<id>`` (``summary.json`` and ``report.html``, the
same files as ``agent-fleet batch --out``), so a restarted daemon still serves finished batches.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet._event_json import spec_from_json
from agent_fleet.errors import UsageError
from agent_fleet.runner import BatchEntry, GateConfig, Task, run_batch
from agent_fleet.runner.batch import parse_tasks
from agent_fleet.serve._sessions import NotFound, Sessions

logger = logging.getLogger(__name__)
_BATCH_ID = re.compile(r"b[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")


@dataclass(slots=True, eq=False)
class LiveBatch:
    id: str
    out_dir: Path
    total: int
    created: float = field(default_factory=time.time)
    done: int = 0
    ok: int = 0
    state: str = "running"
    task: asyncio.Task[None] | None = None


class Batches:
    """The daemon's batches (see the module docstring)."""

    def __init__(self, *, root: Path, sessions: Sessions) -> None:
        self.root = root
        self._sessions = sessions
        self.live: dict[str, LiveBatch] = {}

    def create(self, data: Any, *, default_provider: str) -> LiveBatch:
        if not isinstance(data, dict):
            raise UsageError("the body must be a JSON object with 'tasks'")
        if self._sessions.draining:
            raise UsageError("the daemon is shutting down")
        raw_tasks = data.get("tasks")
        if isinstance(raw_tasks, list):
            raw_tasks = "\n".join(json.dumps(line) for line in raw_tasks)
        if not isinstance(raw_tasks, str):
            raise UsageError("'tasks' must be the tasks file's text or a list of task objects")
        spec_data = dict(data.get("spec") or {})
        spec_data.setdefault("prompt", "(batch template)")
        spec = spec_from_json(spec_data)
        cwd = Path(self._sessions.check_cwd(spec.cwd))
        tasks = parse_tasks(raw_tasks, base_dir=cwd, source="tasks")
        for task in tasks:
            if task.cwd is not None:
                self._sessions.check_cwd(task.cwd)
        jobs = data.get("jobs", 4)
        if not isinstance(jobs, int) or not 1 <= jobs <= 64:
            raise UsageError("'jobs' must be an integer from 1 to 64")
        gate_cmd = data.get("gate_cmd")
        if gate_cmd is not None and not isinstance(gate_cmd, str):
            raise UsageError("'gate_cmd' must be a string")
        max_followups = data.get("max_followups", 2)
        if not isinstance(max_followups, int) or max_followups < 0:
            raise UsageError("'max_followups' must be a non-negative integer")
        template = Task(
            id="batch",
            spec=spec,
            gate=GateConfig(command=gate_cmd),
            max_followups=max_followups,
        )
        provider = data.get("provider", default_provider)
        if not isinstance(provider, str):
            raise UsageError("'provider' must be a string")
        batch_id = f"b{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        batch = LiveBatch(id=batch_id, out_dir=self.root / batch_id, total=len(tasks))
        self.live[batch_id] = batch
        batch.task = asyncio.create_task(
            self._run(batch, tasks, template, provider, jobs, cwd), name=f"batch:{batch_id}"
        )
        return batch

    async def _run(
        self, batch: LiveBatch, tasks: Any, template: Task, provider_name: str, jobs: int, cwd: Path
    ) -> None:
        def on_result(entry: BatchEntry) -> None:
            batch.done += 1
            batch.ok += 1 if entry.result.ok else 0

        try:
            provider = await self._sessions.provider(provider_name)
            result = await run_batch(
                tasks,
                template=template,
                out_dir=batch.out_dir,
                jobs=jobs,
                provider=provider,
                cwd=cwd,
                on_result=on_result,
            )
            batch.state = "succeeded" if result.ok else "failed"
        except Exception as exc:  # recorded as the batch's state; the daemon goes on
            logger.warning("batch %s failed: %s", batch.id, type(exc).__name__)
            batch.state = "error"

    def _summary(self, batch_id: str) -> dict[str, Any] | None:
        path = self.root / batch_id / "summary.json"
        try:
            data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data

    def describe(self, batch_id: str) -> dict[str, Any]:
        live = self.live.get(batch_id)
        summary = self._summary(batch_id) if _BATCH_ID.fullmatch(batch_id) else None
        if live is None and summary is None:
            raise NotFound(batch_id)
        out: dict[str, Any] = {"batch_id": batch_id}
        if live is not None:
            out.update(state=live.state, total=live.total, done=live.done, ok=live.ok, created=live.created)
        else:
            out["state"] = "finished"
        out["summary"] = summary if (live is None or live.state != "running") else None
        return out

    def rows(self) -> list[dict[str, Any]]:
        ids = set(self.live)
        if self.root.is_dir():
            ids.update(p.parent.name for p in self.root.glob("*/summary.json"))
        rows = []
        for batch_id in sorted(ids, reverse=True):
            row = self.describe(batch_id)
            row.pop("summary", None)
            rows.append(row)
        return rows

    def report(self, batch_id: str) -> str:
        self.describe(batch_id)
        path = self.root / batch_id / "report.html"
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            raise NotFound(f"{batch_id} (no report yet)") from None

    async def drain(self) -> None:
        tasks = [b.task for b in self.live.values() if b.task is not None and not b.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
