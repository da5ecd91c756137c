"""A synthetic batch record: a fleet of made-up tasks written through the runner's own ledger, then its
``summary.json`` and ``report.html`` by the code that ends a real batch (``write_records``).

    python -m agent_fleet.testing fleet-report OUT --tasks 50000

For trying and measuring the report page at fleet scale without running a fleet (tests, the report's
screenshot in the docs, ``bench/report_page.py``). Deterministic for a ``seed``. Every task is labelled
scripted: no model ran. The tasks are varied as a real fleet's: most succeed, some fail their gate
(with the gate's output), some end in errors, time out or are cancelled; each has a prompt, reasoning
and messages, commands with output, sometimes a declined command, a diff of a few files and a timeline.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from agent_fleet._redact import Redactor

__all__ = ["synthetic_batch"]

_VERBS = ("Fix", "Add", "Refactor", "Document", "Speed up", "Test", "Rename", "Remove")
_THINGS = (
    "the retry loop in the HTTP client",
    "pagination of the search endpoint",
    "the CSV exporter's quoting",
    "the cache eviction policy",
    "timezone handling in reports",
    "the CLI's --verbose flag",
    "flaky test_upload_resumes",
    "the config loader's defaults",
)
_FILES = (
    "src/app/client.py",
    "src/app/search.py",
    "src/app/export.py",
    "src/app/cache.py",
    "tests/test_app.py",
)
_OUTCOMES = (
    ("succeeded", 84),
    ("failed", 9),
    ("error", 3),
    ("timeout", 2),
    ("cancelled", 2),
)


def _diff(rng: random.Random, files: list[str]) -> str:
    parts = []
    for path in files:
        start = rng.randint(1, 200)
        removed = [f"-    value = compute({n})" for n in range(rng.randint(0, 4))]
        added = [f"+    value = compute_safely({n}, retries=3)" for n in range(rng.randint(1, 8))]
        parts.append(
            f"diff --git a/{path} b/{path}\nindex 3f2a1bc..9d8e7f6 100644\n--- a/{path}\n+++ b/{path}\n"
            f"@@ -{start},{len(removed) + 3} +{start},{len(added) + 3} @@ def handler(request):\n"
            "     request.validate()\n" + "\n".join(removed + added) + "\n     return value\n"
        )
    return "".join(parts)


def _task(n: int, rng: random.Random, status: str, base: float) -> tuple[Any, dict[str, Any]]:
    from agent_fleet.events import TokenUsage
    from agent_fleet.runner import TaskResult
    from agent_fleet.runner.gate import GateCheck, GateResult

    task_id = f"task-{n:05d}"
    prompt = (
        f"[task:{task_id}] {rng.choice(_VERBS)} {rng.choice(_THINGS)}; keep the public API and run the tests."
    )
    start = base + rng.uniform(0, 600)
    took = rng.uniform(20, 400)
    files = rng.sample(_FILES, rng.randint(1, 3))
    commands = []
    at = start + 2
    for command, output, code in (
        ("git status --short", "", 0),
        (
            "python -m pytest -q",
            "....F.\n1 failed, 5 passed in 0.41s" if status == "failed" else "......\n6 passed",
            1 if status == "failed" else 0,
        ),
        (f"ruff check {files[0]}", "All checks passed!", 0),
    )[: rng.randint(1, 3)]:
        commands.append(
            {
                "command": command,
                "cwd": None,
                "started_at": at,
                "finished_at": at + 1.5,
                "exit_code": code,
                "status": "completed",
                "output_tail": output,
            }
        )
        at += rng.uniform(3, 30)
    declines = []
    if rng.random() < 0.1:
        declines.append(
            {
                "rule": "git-reset-hard",
                "reason": "git reset --hard discards uncommitted work",
                "command": "git reset --hard",
                "about": {},
                "at": at,
            }
        )
    what = prompt.split("] ", 1)[1].split(";")[0].lower()
    final = (
        f"Done: {what}. Changed {', '.join(files)}; the tests pass."
        if status == "succeeded"
        else f"I changed {', '.join(files)} but test_edge still fails: the fix needs a decision on {what}."
    )
    messages = [
        {
            "kind": "reasoning",
            "text": f"**Plan**\nRead {files[0]}, find the cause, change it, run the tests.",
            "at": start + 1,
        },
        {"kind": "message", "text": final, "at": start + took - 5},
    ]
    gate_failed = status == "failed"
    gate_output = (
        "collected 6 items\n\ntests/test_app.py ....F.\nFAILED tests/test_app.py::test_edge - assert 1 == 2\n"
        "1 failed, 5 passed in 0.41s"
        if gate_failed
        else "6 passed in 0.38s"
    )
    timeline = [
        {"kind": "turn", "name": "turn 1", "start": start, "end": start + took - 8, "status": "completed"}
    ]
    timeline += [
        {
            "kind": "tool",
            "name": "shell",
            "start": c["started_at"],
            "end": c["finished_at"],
            "status": "completed",
        }
        for c in commands
    ]
    timeline.append(
        {
            "kind": "gate",
            "name": "python -m pytest -q",
            "start": start + took - 7,
            "end": start + took - 1,
            "status": "failed" if gate_failed else "passed",
        }
    )
    reason = {
        "succeeded": "gate passed (python -m pytest -q exited 0)",
        "failed": "the gate never passed: python -m pytest -q exited with code 1",
        "error": "turn failed: server_error: the model API kept failing",
        "timeout": "the task exceeded its timeout of 600s",
        "cancelled": "stopped before it finished",
    }[status]
    gate = GateResult(
        checks=(
            GateCheck(
                name="command",
                passed=not gate_failed,
                detail=reason,
                output=gate_output,
                exit_code=1 if gate_failed else 0,
            ),
        )
    )
    result = TaskResult(
        task_id=task_id,
        status=status,  # type: ignore[arg-type]
        reason=reason,
        duration=took,
        usage=TokenUsage(
            input_tokens=rng.randint(8_000, 90_000),
            cached_input_tokens=rng.randint(0, 6_000),
            output_tokens=rng.randint(400, 6_000),
        ),
        gate=gate if status in ("succeeded", "failed") else None,
        final_text=final if status == "succeeded" else "",
        commands=len(commands),
        declined=len(declines),
        error_code={"error": "server_error", "timeout": "timeout", "cancelled": "cancelled"}.get(status),
        session_id=f"0199{n:08x}-synthetic",
    )
    recorded = {
        "prompt": prompt,
        "provider": "codex",
        "model": "gpt-5.5",
        "scripted": True,
        "started_at": start,
        "finished_at": start + took,
        "session_id": result.session_id,
        "commands": commands,
        "declines": declines,
        "approvals": len(commands),
        "followups": [],
        "gates": [{"passed": not gate_failed, "summary": reason, "at": start + took - 1}],
        "errors": [{"code": "server_error", "message": "503 Service Unavailable", "at": start + took}]
        if status == "error"
        else [],
        "diff": _diff(rng, files) if status != "cancelled" else None,
        "files_changed": files,
        "shared_tree": False,
        "timeline": timeline,
        "messages": messages,
    }
    return result, recorded


class _Verbatim(Redactor):
    """Redacts nothing (the synthetic records are ours and hold no secret)."""

    def text(self, text: str) -> str:
        return text

    def value(self, value: Any) -> Any:
        return value


def synthetic_batch(out: str | Path, tasks: int = 50_000, *, seed: int = 0) -> Path:
    """Write a batch record of ``tasks`` made-up tasks to ``out`` (a new directory): the ledger
    (``batch.db``), ``summary.json`` and ``report.html``. Returns ``out``. Raises ``UsageError`` when
    ``out`` holds a batch already."""
    from agent_fleet.errors import UsageError
    from agent_fleet.runner._ledger_views import write_records
    from agent_fleet.runner._summary import task_record
    from agent_fleet.runner.ledger import Ledger, holds_batch

    where = Path(out)
    if holds_batch(where):
        raise UsageError(f"{str(where)!r} holds a batch record already: choose a new directory")
    where.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    statuses = [s for s, weight in _OUTCOMES for _ in range(weight)]
    base = time.time() - 3600
    entries = [
        (f"task-{n:05d}", n + 1, {"id": f"task-{n:05d}", "prompt": "(synthetic)"}) for n in range(tasks)
    ]
    ledger = Ledger.create(where, entries, meta={"synthetic": True, "run_started_at": base})
    ledger.redactor = _Verbatim()  # made-up records hold no secret: a fleet's redaction is not measured here
    try:
        for n in range(tasks):
            result, recorded = _task(n, rng, rng.choice(statuses), base)
            record = task_record(
                result,
                recorded=recorded,
                branch=f"agent-fleet/{result.task_id}",
                retries=0,
            )
            ledger.start(result.task_id, branch=record["branch"], worktree=None, transcript="")
            ledger.finish(result.task_id, result=record, attempts=1, worktree_kept=None)
        write_records(ledger, started_at=base, duration=1200.0, stopped=None, fatal=False)
    finally:
        ledger.close()
    return where
