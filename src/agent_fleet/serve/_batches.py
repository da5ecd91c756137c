"""Batches run by the daemon: ``runner.run_batch`` on the daemon's shared provider, one directory each.

``POST /v1/batches`` takes ``{"tasks": <the tasks file's text, or a list of its line objects>,
"spec": <the template Spec, its prompt optional>, "jobs": 4, "gate_cmd", "max_followups", "provider",
"worktrees": false}``.
Before the 201, the template and every task line are checked against the daemon's floor
(``serve._floor``: 403) and the provider is started (503). The batch then runs in the background in
``<state dir>/batches/<id>``: its ledger (``batch.db``), transcripts, ``summary.json`` and
``report.html``, the same files as ``agent-fleet batch --out``. Its box (each task's temporary
directory, and with ``"worktrees": true`` each task's git worktree on branch ``agent-fleet/<id>``) is
``<state dir>/boxes/<id>-*``: the daemon's own, private directory, so it need not be under an
``--allow-root`` (the tasks' repositories must be).

Where things are kept: the tasks and their states are in the batch's ledger, which also keeps the
template and settings (meta key ``serve``) so that ``resume`` runs the same batch; what the daemon did
with the batch is a row of the daemon's store. Batch states::

    running --all succeeded--> succeeded     running --a task did not succeed--> failed
    running --drain (SIGTERM)--> stopped      running --could not run (reason kept)--> error
    running --(the daemon died)--> interrupted     stopped | interrupted | failed --resume--> running

A resume is checked against the daemon's floor of the moment (its flags may have changed since).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import secrets
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

from agent_fleet._event_json import spec_from_json
from agent_fleet._redact import Redactor
from agent_fleet.contract import PermissionConfig
from agent_fleet.errors import UsageError
from agent_fleet.runner import PROVIDER_NAMES, BatchResult, GateConfig, Task, run_batch
from agent_fleet.runner._admit import task_of
from agent_fleet.runner._tasks_file import BatchTask, build_task, parse_tasks
from agent_fleet.runner.ledger import Ledger
from agent_fleet.serve._floor import Floor, FlooredProvider
from agent_fleet.serve._sessions import NotFound, Sessions
from agent_fleet.serve._state import private_tree
from agent_fleet.serve._store import Store

logger = logging.getLogger(__name__)
_BATCH_ID = re.compile(r"b[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")
_TEMPLATE_PROMPT: Final = "(batch template)"


@dataclass(frozen=True, slots=True, kw_only=True)
class _Settings:
    """A batch's settings as submitted (kept in its ledger's meta for a resume)."""

    spec: dict[str, Any]
    jobs: int
    gate_cmd: str | None
    max_followups: int
    provider: str
    worktrees: bool = False

    @classmethod
    def parse(cls, data: dict[str, Any], default_provider: str) -> _Settings:
        spec = data.get("spec") or {}
        if not isinstance(spec, dict):
            raise UsageError("'spec' must be a JSON object (a Spec, its prompt optional)")
        jobs = data.get("jobs", 4)
        if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= 64:
            raise UsageError("'jobs' must be an integer from 1 to 64")
        gate_cmd = data.get("gate_cmd")
        if gate_cmd is not None and (not isinstance(gate_cmd, str) or not gate_cmd.strip()):
            raise UsageError("'gate_cmd' must be a non-empty string")
        max_followups = data.get("max_followups", 2)
        if not isinstance(max_followups, int) or isinstance(max_followups, bool) or max_followups < 0:
            raise UsageError("'max_followups' must be a non-negative integer")
        provider = data.get("provider", default_provider)
        if provider not in PROVIDER_NAMES:
            raise UsageError(f"'provider' must be one of {', '.join(PROVIDER_NAMES)}")
        worktrees = data.get("worktrees", False)
        if not isinstance(worktrees, bool):
            raise UsageError("'worktrees' must be true or false")
        return cls(
            spec=dict(spec),
            jobs=jobs,
            gate_cmd=gate_cmd,
            max_followups=max_followups,
            provider=provider,
            worktrees=worktrees,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "jobs": self.jobs,
            "gate_cmd": self.gate_cmd,
            "max_followups": self.max_followups,
            "provider": self.provider,
            "worktrees": self.worktrees,
        }


class Batches:
    """The daemon's batches (see the module docstring)."""

    def __init__(
        self, *, root: Path, sessions: Sessions, store: Store, floor: Floor, redactor: Redactor
    ) -> None:
        self.root = root
        self.box_root = root.parent / "boxes"  # the tasks' boxes: the daemon's own directory
        self._sessions = sessions
        self._store = store
        self._floor = floor
        self._redactor = redactor
        self.running: dict[str, asyncio.Task[None]] = {}

    # -- starting ----------------------------------------------------------------------------------------

    async def create(self, data: Any, *, default_provider: str) -> str:
        """Check and start a batch; returns its id (see the module docstring for what is checked)."""
        if not isinstance(data, dict):
            raise UsageError("the body must be a JSON object with 'tasks'")
        self._not_draining()
        raw_tasks = data.get("tasks")
        if isinstance(raw_tasks, list):
            raw_tasks = "\n".join(json.dumps(line) for line in raw_tasks)
        if not isinstance(raw_tasks, str):
            raise UsageError("'tasks' must be the tasks file's text or a list of task objects")
        settings = _Settings.parse(data, default_provider)
        template, cwd = self._template(settings)
        tasks = parse_tasks(raw_tasks, base_dir=cwd, source="tasks")
        self._check(tasks, template, cwd, settings.provider)
        provider = FlooredProvider(await self._sessions.provider(settings.provider), self._floor)
        self._not_draining()
        batch_id = f"b{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        self._store.add_batch(batch_id, settings.provider, len(tasks))
        out = self.root / batch_id
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        out.mkdir(mode=0o700)  # the runner's files go in here (made private again when it ends)
        meta = {"serve": settings.to_json()}
        self._start(
            batch_id,
            lambda: run_batch(
                tasks,
                template=template,
                out_dir=out,
                jobs=settings.jobs,
                worktrees=settings.worktrees,
                provider=provider,
                cwd=cwd,
                meta=meta,
                box_dir=self.box_root,
            ),
        )
        return batch_id

    async def resume(self, batch_id: str, data: Any) -> None:
        """Continue a batch that is not running (``{"rerun": "failed"}`` also runs its failed tasks
        again): the runner's resume, with the template and settings kept in its ledger."""
        rerun = data.get("rerun") if isinstance(data, dict) else None
        if rerun not in (None, "failed"):
            raise UsageError("'rerun' must be \"failed\" (or left out)")
        row = self._row(batch_id)
        self._idle(batch_id)
        self._not_draining()
        out = self.root / batch_id
        try:
            ledger = Ledger.open(out)
        except UsageError:
            why = f" ({row['reason']})" if row.get("reason") else ""
            raise UsageError(f"batch {batch_id} has no ledger to resume: it never started{why}") from None
        try:
            meta = ledger.meta().get("serve")
            tasks = [task_of(r, out) for r in ledger.rows()]
        finally:
            ledger.close()
        if not isinstance(meta, dict):
            raise UsageError(f"batch {batch_id} was not started by this daemon: it has no settings to resume")
        settings = _Settings.parse(meta, row["provider"])
        template, cwd = self._template(settings)
        self._check(tasks, template, cwd, settings.provider)  # under the daemon's floor of the moment
        provider = FlooredProvider(await self._sessions.provider(settings.provider), self._floor)
        self._idle(batch_id)  # (another resume may have started while the provider did)
        self._not_draining()
        self._store.update_batch(batch_id, state="running")
        self._start(
            batch_id,
            lambda: run_batch(
                None,
                template=template,
                out_dir=out,
                jobs=settings.jobs,
                worktrees=settings.worktrees,
                provider=provider,
                cwd=cwd,
                box_dir=self.box_root,
                resume=True,
                rerun_failed=rerun == "failed",
            ),
        )

    def _not_draining(self) -> None:
        if self._sessions.draining:
            raise UsageError("the daemon is shutting down")

    def _idle(self, batch_id: str) -> None:
        if batch_id in self.running:
            raise UsageError(f"batch {batch_id} is running")

    def _template(self, settings: _Settings) -> tuple[Task, Path]:
        """The template task (its spec floored: ``Refused`` is a 403) and the batch's directory."""
        spec = spec_from_json({"prompt": _TEMPLATE_PROMPT, **settings.spec})
        floored = self._floor.spec(spec, where="spec")  # every field; Refused is a 403
        cwd = Path(str(floored.cwd))
        # The template keeps the client's permission: each task's is narrowed from the daemon's when
        # its session starts (FlooredProvider), after its tasks-file line is applied.
        template = Task(
            id="batch",
            spec=replace(spec, cwd=str(cwd), images=floored.images, temp_dir=floored.temp_dir),
            gate=GateConfig(command=settings.gate_cmd),
            max_followups=settings.max_followups,
        )
        return template, cwd

    def _check(self, tasks: Sequence[BatchTask], template: Task, cwd: Path, provider: str) -> None:
        """Each task as the runner will build it: its directory, what only a trusted client may ask
        for, its provider, and its gate command judged by its policy (each distinct one once)."""
        judged: set[tuple[str, str, PermissionConfig | None]] = set()
        for t in tasks:
            where = f"task {t.id!r} (line {t.line})"
            if t.provider is not None and t.provider != provider:
                # The daemon's provider of that kind would need the batch's own options and approval
                # queue; a batch runs on one.
                raise UsageError(
                    f"{where}: provider {t.provider!r} is not the batch's ({provider}); "
                    f'submit the task in a batch with "provider": "{t.provider}"'
                )
            task_cwd = Path(self._floor.cwd(t.cwd)) if t.cwd is not None else cwd
            task = build_task(t, template, task_cwd)
            floored = self._floor.spec(task.spec, where=where)  # every field, as the session gets it
            command = task.gate.command
            if command is not None:
                permission = floored.permission
                key = (command, str(task_cwd), permission)
                if key not in judged:
                    self._floor.check_gate(command, cwd=str(task_cwd), permission=permission, where=where)
                    judged.add(key)

    def _start(self, batch_id: str, run: Callable[[], Awaitable[BatchResult]]) -> None:
        self.running[batch_id] = asyncio.create_task(self._run(batch_id, run), name=f"batch:{batch_id}")

    async def _run(self, batch_id: str, run: Callable[[], Awaitable[BatchResult]]) -> None:
        try:
            result = await run()
        except asyncio.CancelledError:
            self._set(batch_id, "stopped", "the daemon shut down; POST /v1/batches/{id}/resume continues it")
            raise
        except Exception as exc:  # recorded as the batch's state, with its reason; the daemon goes on
            reason = self._redactor.text(str(exc) or type(exc).__name__)
            logger.warning("batch %s could not run: %s", batch_id, reason)
            self._set(batch_id, "error", reason)
        else:
            if result.ok:
                self._set(batch_id, "succeeded", None)
            else:
                failed = sum(not e.result.ok for e in result.entries)
                reason = result.stopped or f"{failed} of {len(result.entries)} task(s) did not succeed"
                self._set(batch_id, "failed", self._redactor.text(reason))
        finally:
            self.running.pop(batch_id, None)
            # The runner writes transcripts, summary.json and report.html with the process's umask:
            # inside a 0700 directory nobody else reaches them, and they are made 0600 besides.
            with contextlib.suppress(OSError):
                await asyncio.to_thread(private_tree, self.root / batch_id)

    def _set(self, batch_id: str, state: str, reason: str | None) -> None:
        with contextlib.suppress(sqlite3.ProgrammingError):  # a batch that outlived the drain's wait
            self._store.update_batch(batch_id, state=state, reason=reason)

    # -- reading -----------------------------------------------------------------------------------------

    def _row(self, batch_id: str) -> dict[str, Any]:
        row = self._store.batch(batch_id) if _BATCH_ID.fullmatch(batch_id) else None
        if row is None:
            raise NotFound(batch_id)
        return row

    def _progress(self, batch_id: str, *, running: bool, tasks: int | None) -> dict[str, Any]:
        """Counts per task state (and per final status) from the ledger, and up to ``tasks`` tasks."""
        out: dict[str, Any] = {"done": 0, "ok": 0, "states": {}}  # (the total is the store's)
        if tasks:
            out["tasks"] = []
        try:
            # A reader: the batch, while it runs, holds the ledger's lock (one run of an out at a time).
            ledger = Ledger.open(self.root / batch_id, lock=False)
        except UsageError:  # not created yet, or never: the batch failed before it started
            return out
        try:
            states = ledger.counts()
            if not running and "running" in states:  # cut off by a crash: what a resume continues
                states["interrupted"] = states.get("interrupted", 0) + states.pop("running")
            out["states"] = states
            out["done"] = states.get("finished", 0)
            out["ok"] = states.get("finished:succeeded", 0)
            if tasks:
                for row in ledger.rows():
                    if len(out["tasks"]) >= tasks:
                        break
                    state = "interrupted" if row.state == "running" and not running else row.state
                    out["tasks"].append(
                        {
                            "task_id": row.id,
                            "state": state,
                            "status": row.status,
                            "reason": row.reason or None,
                            "session_id": row.session_id,
                            "runs": row.runs,
                        }
                    )
        finally:
            ledger.close()
        return out

    def _summary(self, batch_id: str) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads((self.root / batch_id / "summary.json").read_text("utf-8"))
        except (OSError, ValueError):
            return None
        return data

    def describe(self, batch_id: str, *, tasks: int | None = None, summary: bool = True) -> dict[str, Any]:
        """The batch's state and progress, up to ``tasks`` of its tasks, and (when it is not running and
        ``summary``) its ``summary.json``. Redacted."""
        out = dict(self._row(batch_id))
        running = batch_id in self.running
        if running:
            out["state"] = "running"
        out.update(self._progress(batch_id, running=running, tasks=tasks))
        if summary:
            out["summary"] = None if running else self._summary(batch_id)
        redacted: dict[str, Any] = self._redactor.value(out)
        return redacted

    def rows(self, *, tasks: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The batches, newest first (at most ``limit``), with up to ``tasks`` of each one's tasks."""
        listed = self._store.batches()[:limit] if limit is not None else self._store.batches()
        return [self.describe(row["batch_id"], tasks=tasks, summary=False) for row in listed]

    def report(self, batch_id: str) -> str:
        self._row(batch_id)
        try:
            return (self.root / batch_id / "report.html").read_text(encoding="utf-8")
        except OSError:
            raise NotFound(f"{batch_id} (no report yet)") from None

    async def drain(self) -> None:
        """Stop the running batches (their tasks are recorded interrupted; each batch ``stopped``)."""
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
