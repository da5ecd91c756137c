"""``run_demo``: a real task end to end, offline, through the real codex binary and a scripted model.

Nothing here talks to a real model or reads the user's credentials: codex runs with a temporary
``CODEX_HOME`` and is pointed (config overrides) at agent-fleet's built-in ``ScriptedModelServer`` on
loopback, whose replies are fixed in ``DEMO_SCRIPT``. Everything else is real: codex's tools, its
sandbox (``workspace-write``), the approval policy, git, the gate and the transcript.

The scripted agent, in a fresh git repository:

1. adds ``greeting.txt`` with ``apply_patch`` (inside the workspace: accepted);
2. runs ``cat greeting.txt`` (harmless: accepted, runs in the sandbox);
3. runs ``git reset --hard`` (declined by the built-in rule ``git-reset-hard``; codex reports the
   rejection to the model);
4. commits with ``git add -A && git commit``, asking to run outside the sandbox (``workspace-write``
   keeps ``.git`` read-only); the policy accepts it;
5. says it is done. The ``--require-commit`` gate then passes.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from agent_fleet.codex import CodexOptions
from agent_fleet.contract import Spec
from agent_fleet.runner._types import EventSink
from agent_fleet.runner.gate import GateConfig
from agent_fleet.runner.task import Task, TaskResult, run_task
from agent_fleet.testing import (
    CustomToolCall,
    ReasoningItem,
    Reply,
    ScriptedModelServer,
    Text,
    scripted_codex_env,
)
from agent_fleet.testing._repo import make_repo, shell_call

__all__ = ["DEMO_PROMPT", "DEMO_SCRIPT", "DemoResult", "run_demo"]

DEMO_PROMPT: Final = "Add a greeting file to this repository and commit it."
_USAGE: Final = {"input_tokens": 1200, "output_tokens": 60}
_PATCH: Final = "*** Begin Patch\n*** Add File: greeting.txt\n+Hello from agent-fleet!\n*** End Patch\n"


DEMO_SCRIPT: Final[tuple[Reply, ...]] = (
    Reply(
        items=(
            ReasoningItem(summary="Plan: add greeting.txt, check it, commit."),
            CustomToolCall(name="apply_patch", input=_PATCH),
        ),
        usage=_USAGE,
    ),
    Reply(items=(shell_call("cat greeting.txt"),), usage=_USAGE),
    Reply(items=(shell_call("git reset --hard"),), usage=_USAGE),
    Reply(items=(shell_call("git add -A && git commit -q -m 'Add greeting'", escalate=True),), usage=_USAGE),
    Reply(
        items=(
            Text(
                text="Added greeting.txt and committed it. "
                "(My `git reset --hard` was declined by the approval policy.)"
            ),
        ),
        usage=_USAGE,
    ),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoResult:
    result: TaskResult
    workdir: Path
    repo: Path
    transcript: Path
    log: str


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)
    return proc.stdout


async def run_demo(
    *,
    workdir: str | os.PathLike[str] | None = None,
    on_event: EventSink | None = None,
    stop: asyncio.Event | None = None,
) -> DemoResult:
    """Run the scripted demo task in ``workdir`` (a new temporary directory by default), left in place.

    Raises ``ProviderUnavailable`` only through the result (``result.fatal``), like ``run_task``.
    """
    base = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="agent-fleet-demo-"))
    repo = base / "repo"
    await asyncio.to_thread(make_repo, repo, who="demo")
    transcript = base / "transcript.jsonl"
    async with ScriptedModelServer(DEMO_SCRIPT) as server:
        env = scripted_codex_env(server, base / "codex-home")
        options = CodexOptions(config=dict(env.config), env=dict(env.env), codex_home=env.codex_home)
        task = Task(
            id="demo",
            spec=Spec(prompt=DEMO_PROMPT, cwd=repo, sandbox="workspace-write", timeout=120),
            gate=GateConfig(require_commit=True),
            max_followups=1,
        )
        result = await run_task(task, options=options, on_event=on_event, transcript=transcript, stop=stop)
    log = await asyncio.to_thread(_git, repo, "log", "--oneline")
    return DemoResult(result=result, workdir=base, repo=repo, transcript=transcript, log=log)
