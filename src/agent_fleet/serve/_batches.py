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
``stop`` stops a running batch as Ctrl-C stops ``agent-fleet batch``: no task starts, running turns are
interrupted and recorded (state ``stopped``; a resume continues it).

A client's batch (``agent-fleet batch --server``) runs in the client: its sessions are the daemon's, its
runner is not. So that the dashboard shows it with its tasks, the client attaches it (``attach``: its
name and size; ids start with ``c``) and reports its runner's notices (``notices``): a task started
(its prompt), its session (the session is labelled with the task and batch), its gates and follow-ups
(notes on the session), its end, and at last the batch's end. The daemon keeps its tasks in its own
store (``batch_tasks``); a stop asked for it is answered to the client (``"stop": true``), whose runner
stops as on Ctrl-C, and turns still running after ``STOP_GRACE`` seconds are interrupted here.
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
from agent_fleet.notices import NOTICE_SUBTYPES
from agent_fleet.runner import PROVIDER_NAMES, BatchResult, GateConfig, Task, TaskEvent, run_batch
from agent_fleet.runner._admit import task_of
from agent_fleet.runner._tasks_file import BatchTask, build_task, parse_tasks, task_id_problem
from agent_fleet.runner.ledger import Ledger
from agent_fleet.serve._floor import Floor, FlooredProvider
from agent_fleet.serve._sessions import NotFound, Sessions
from agent_fleet.serve._state import private_tree
from agent_fleet.serve._store import Store

logger = logging.getLogger(__name__)
_BATCH_ID = re.compile(r"[bc][0-9]{8}-[0-9]{6}-[0-9a-f]{6}")
_TEMPLATE_PROMPT: Final = "(batch template)"
#: Runner notices a client reports (``runner.<what>``, as ``agent_fleet.notices`` declares them).
RUNNER_NOTICES: Final = frozenset(name for name in NOTICE_SUBTYPES if name.startswith("runner."))
#: Notices that are notes on the task's session (the rest change the task's row).
_NOTED: Final = frozenset(RUNNER_NOTICES - {"runner.started", "runner.session", "runner.finished"})
#: Seconds a client has to stop its batch's turns itself before the daemon interrupts them.
STOP_GRACE: Final = 5.0
_MAX_NOTICES: Final = 1000
#: The most tasks a client's batch may say it has (SQLite integers stop at 2**63).
MAX_TOTAL: Final = 100_000_000
_NAME: Final = re.compile(r"[^\x00-\x1f\x7f]{1,200}")
#: Tasks listed with a batch on the dashboard (the counts cover every task).
SHOWN_TASKS: Final = 50


def _nothing(*args: Any) -> None:
    pass


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
        spec = data.get("spec")
        spec = {} if spec is None else spec
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
        self._stops: dict[str, asyncio.Event] = {}  # a running batch's stop (run_batch's)
        self.stop_asked: set[str] = set()  # clients' batches a stop was asked for
        self.on_change: Callable[[str], None] = _nothing  # the batch's row may have changed

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
        stop = self._stops[batch_id] = asyncio.Event()
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
                stop=stop,
                on_event=self._watch(batch_id),
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
        if row.get("kind") == "client":
            raise UsageError(
                f"batch {batch_id} is run by a client (agent-fleet batch --server): continue it there, "
                "with agent-fleet batch --resume OUT"
            )
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
        stop = self._stops[batch_id] = asyncio.Event()
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
                stop=stop,
                on_event=self._watch(batch_id),
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

    def _watch(self, batch_id: str) -> Callable[[TaskEvent], None]:
        """The runner's ``on_event`` for a batch run here: a task starting or ending changes its row."""
        changes = ("runner.started", "runner.session", "runner.finished")

        def on_event(task_event: TaskEvent) -> None:
            if task_event.source == "runner" and getattr(task_event.event, "subtype", None) in changes:
                self.on_change(batch_id)

        return on_event

    def _start(self, batch_id: str, run: Callable[[], Awaitable[BatchResult]]) -> None:
        self.running[batch_id] = asyncio.create_task(self._run(batch_id, run), name=f"batch:{batch_id}")
        self.on_change(batch_id)

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
            stop = self._stops.get(batch_id)
            if stop is not None and stop.is_set():
                why = "stopped through the API; POST /v1/batches/{id}/resume continues it"
                self._set(batch_id, "stopped", why)
            elif result.ok:
                self._set(batch_id, "succeeded", None)
            else:
                failed = sum(not e.result.ok for e in result.entries)
                reason = result.stopped or f"{failed} of {len(result.entries)} task(s) did not succeed"
                self._set(batch_id, "failed", self._redactor.text(reason))
        finally:
            self.running.pop(batch_id, None)
            self._stops.pop(batch_id, None)
            self.on_change(batch_id)
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
                    prompt = row.spec.get("prompt")
                    out["tasks"].append(
                        {
                            "task_id": row.id,
                            "prompt": prompt if isinstance(prompt, str) else None,
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

    def _client_progress(self, batch_id: str, *, tasks: int | None) -> dict[str, Any]:
        states = self._store.task_counts(batch_id)
        out: dict[str, Any] = {
            "done": states.get("finished", 0),
            "ok": states.get("finished:succeeded", 0),
            "states": states,
        }
        if tasks:
            out["tasks"] = [
                {k: v for k, v in task.items() if k != "updated"}
                for task in self._store.tasks(batch_id, limit=tasks)
            ]
        return out

    def describe(self, batch_id: str, *, tasks: int | None = None, summary: bool = True) -> dict[str, Any]:
        """The batch's state and progress, up to ``tasks`` of its tasks, and (when it is not running and
        ``summary``) its ``summary.json``. Redacted."""
        out = dict(self._row(batch_id))
        if out.get("kind") == "client":
            out.update(self._client_progress(batch_id, tasks=tasks))
            out["stop_asked"] = batch_id in self.stop_asked
            if summary:
                out["summary"] = None  # in the client's --out
            redacted_client: dict[str, Any] = self._redactor.value(out)
            return redacted_client
        running = batch_id in self.running
        if running:
            out["state"] = "running"
        out.update(self._progress(batch_id, running=running, tasks=tasks))
        if summary:
            out["summary"] = None if running else self._summary(batch_id)
        redacted: dict[str, Any] = self._redactor.value(out)
        return redacted

    def row(self, batch_id: str) -> dict[str, Any] | None:
        """The batch as the dashboard lists it, with its first ``SHOWN_TASKS`` tasks (None: unknown)."""
        try:
            return self.describe(batch_id, tasks=SHOWN_TASKS, summary=False)
        except NotFound:
            return None

    def rows(self, *, tasks: int | None = None, limit: int | None = None) -> list[dict[str, Any]]:
        """The batches, newest first (at most ``limit``), with up to ``tasks`` of each one's tasks."""
        listed = self._store.batches(limit=limit)
        return [self.describe(row["batch_id"], tasks=tasks, summary=False) for row in listed]

    def report(self, batch_id: str) -> str:
        if self._row(batch_id).get("kind") == "client":
            raise NotFound(f"{batch_id} (a client's batch: its report is in the client's --out)")
        try:
            return (self.root / batch_id / "report.html").read_text(encoding="utf-8")
        except OSError:
            raise NotFound(f"{batch_id} (no report yet)") from None

    # -- stopping ------------------------------------------------------------------------------------

    def stop(self, batch_id: str) -> None:
        """Stop a running batch (see the module docstring); nothing to do for one that is not running."""
        row = self._row(batch_id)
        if row.get("kind") == "client":
            if row["state"] != "running":
                return
            self.stop_asked.add(batch_id)
            self.on_change(batch_id)
            asyncio.get_running_loop().call_later(
                STOP_GRACE, lambda: asyncio.ensure_future(self._interrupt_client_batch(batch_id))
            )
            return
        stop = self._stops.get(batch_id)
        if stop is not None:
            stop.set()

    async def _interrupt_client_batch(self, batch_id: str) -> None:
        """The turns of a client's batch still running after its stop was asked for (the client may be
        gone): interrupted, as ``POST /v1/sessions/{id}/stop`` does."""
        rows = self._store.sessions(batch=batch_id, states=("running",))
        for session in rows:
            try:
                await self._sessions.stop(session["session_id"])
            except Exception as exc:
                logger.warning("session %s: stop failed: %s", session["session_id"], type(exc).__name__)

    # -- a client's batch -----------------------------------------------------------------------------

    def attach(self, data: Any, *, default_provider: str) -> str:
        """Record a batch a client runs (``{"name", "total", "provider"?}``); returns its id."""
        self._not_draining()
        if not isinstance(data, dict):
            raise UsageError('the body must be {"name": ..., "total": ...}')
        name, total = data.get("name"), data.get("total")
        if isinstance(total, float) and total.is_integer():  # JSON's 3.0 is the integer 3
            total = int(total)
        provider = data.get("provider", default_provider)
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise UsageError("'name' must be 1 to 200 characters, no control characters")
        if not isinstance(total, int) or isinstance(total, bool) or not 0 <= total <= MAX_TOTAL:
            raise UsageError(f"'total' must be an integer from 0 to {MAX_TOTAL}")
        if provider not in PROVIDER_NAMES:
            raise UsageError(f"'provider' must be one of {', '.join(PROVIDER_NAMES)}")
        batch_id = f"c{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        self._store.add_batch(batch_id, provider, total, kind="client", name=self._redactor.text(name))
        self.on_change(batch_id)
        return batch_id

    def notices(self, batch_id: str, data: Any) -> dict[str, Any]:
        """A client's report on its batch (see the module docstring): ``{"notices": [{"task_id",
        "subtype", "data"}], "state"?, "reason"?}``. Returns ``{"ok": true, "stop": <asked>}``."""
        row = self._row(batch_id)
        if row.get("kind") != "client":
            raise UsageError(f"batch {batch_id} runs on this daemon: its tasks are its runner's to report")
        if not isinstance(data, dict):
            raise UsageError('the body must be {"notices": [...], "state"?, "reason"?}')
        notices = data.get("notices", [])
        state, reason = data.get("state"), data.get("reason")
        if not isinstance(notices, list) or len(notices) > _MAX_NOTICES:
            raise UsageError(f"'notices' must be a list of at most {_MAX_NOTICES} notices")
        if state not in (None, "succeeded", "failed", "stopped"):
            raise UsageError("'state' must be succeeded, failed or stopped")
        if not isinstance(reason, str | None):
            raise UsageError("'reason' must be a string")
        checked = [self._notice(n) for n in notices]  # all checked before any is applied
        for task_id, subtype, body in checked:
            self._apply(batch_id, task_id, subtype, body)
        if state is not None:
            self._store.update_batch(batch_id, state=state, reason=self._redactor.text(reason or "") or None)
            self.stop_asked.discard(batch_id)
        else:
            self._store.update_batch(batch_id)  # heard from
        if checked or state is not None:
            self.on_change(batch_id)
        return {"ok": True, "stop": batch_id in self.stop_asked}

    @staticmethod
    def _notice(notice: Any) -> tuple[str, str, dict[str, Any]]:
        if not isinstance(notice, dict) or set(notice) - {"task_id", "subtype", "data"}:
            raise UsageError('a notice is {"task_id", "subtype", "data"}')
        task_id, subtype, body = notice.get("task_id"), notice.get("subtype"), notice.get("data", {})
        if (problem := task_id_problem(task_id)) is not None:
            raise UsageError(f"a notice's task_id {problem}")
        if subtype not in RUNNER_NOTICES:
            raise UsageError(f"a notice's subtype must be a runner notice (runner.<what>), not {subtype!r}")
        if not isinstance(body, dict):
            raise UsageError("a notice's data must be a JSON object")
        assert isinstance(task_id, str) and isinstance(subtype, str)
        return task_id, subtype, body

    def _apply(self, batch_id: str, task_id: str, subtype: str, body: dict[str, Any]) -> None:
        def text(key: str) -> str | None:
            value = body.get(key)
            return self._redactor.text(value) if isinstance(value, str) else None

        match subtype:
            case "runner.started":
                self._store.set_task(batch_id, task_id, state="running", prompt=text("prompt"))
            case "runner.session":
                session_id = body.get("session_id")
                if isinstance(session_id, str) and self._sessions.label(
                    session_id, task_id=task_id, batch_id=batch_id
                ):
                    self._store.set_task(batch_id, task_id, session_id=session_id)
            case "runner.finished":
                status, reason = text("status"), text("reason")
                self._store.set_task(batch_id, task_id, state="finished", status=status, reason=reason)
            case _:
                self._store.set_task(batch_id, task_id)
                tasks = [t for t in self._store.tasks(batch_id) if t["task_id"] == task_id]
                session_id = tasks[0]["session_id"] if tasks else None
                if session_id is not None and subtype in _NOTED:
                    note = {"subtype": subtype, "task_id": task_id, "batch_id": batch_id, "data": body}
                    self._sessions.leave_note(session_id, note)

    async def drain(self) -> None:
        """Stop the running batches (their tasks are recorded interrupted; each batch ``stopped``)."""
        tasks = list(self.running.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=10)
