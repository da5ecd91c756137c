"""No process outlives its provider: four sessions each run a long command under danger-full-access
(codex puts each command in its own process group), then the app-server is SIGKILLed, its provider shut
down, or its handles stopped. Two seconds later no such command is left anywhere on the machine."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.codex.exec import CodexExecProvider
from agent_fleet.contract import Handle, Provider
from agent_fleet.testing import CodexTestEnv, FunctionCall, RecordedRequest, Reply, ScriptedModelServer

from ..procs import sleepers as running

pytestmark = pytest.mark.e2e

TOKEN = re.compile(r"session-(\d+)")


async def wait_for(predicate: Callable[[], bool], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()


def sleeper(marker: str, *, detached: bool = True) -> Callable[[RecordedRequest], Reply | None]:
    """Each session runs ``sleep 61.<marker><n>``; once codex reports it running, the model stalls.

    ``detached``: the sleep is a grandchild of codex in a session of its own that ignores the hangup of
    codex's pty (the shell codex started dies with codex by its parent-death signal; the sleep is
    orphaned). Otherwise it is the command codex runs, which codex keeps as a background terminal."""

    def respond(request: RecordedRequest) -> Reply | None:
        match = TOKEN.search(" ".join(request.user_texts()))
        if match is None:
            return None
        if not request.tool_outputs():
            sleep = f"sleep 61.{marker}{match.group(1)}"
            cmd = f"setsid nohup {sleep} >/dev/null 2>&1 & wait" if detached else sleep
            return Reply(items=(FunctionCall(name="exec_command", arguments={"cmd": cmd, "login": False}),))
        return Reply.text("still waiting", delay=30)

    return respond


async def four_sleeping_sessions(
    provider: Provider, scripted_model: ScriptedModelServer, workspace: Path, marker: str, *, detached: bool
) -> list[Handle]:
    scripted_model.responder = sleeper(marker, detached=detached)
    handles = [
        await provider.spawn(Spec(prompt=f"session-{i} run it", cwd=workspace, sandbox="danger-full-access"))
        for i in range(4)
    ]
    assert await wait_for(lambda: len(running(marker)) == 4, 30), running(marker)
    return handles


async def _sigkill(provider: Provider, handles: list[Handle]) -> None:
    assert isinstance(provider, CodexProvider) and provider.pid is not None
    os.kill(provider.pid, signal.SIGKILL)


async def _shutdown(provider: Provider, handles: list[Handle]) -> None:
    await provider.shutdown()


async def _stop(provider: Provider, handles: list[Handle]) -> None:
    await asyncio.gather(*(h.stop() for h in handles))


@pytest.mark.parametrize(
    ("kind", "end", "detached"),
    [
        ("app-server", _sigkill, True),
        ("app-server", _shutdown, True),
        # A stopped session's commands end; what a command detached from codex is not attributable
        # to a session while the app-server serves others: it ends with the provider (above).
        ("app-server", _stop, False),
        ("exec", _stop, True),
        ("exec", _shutdown, True),
    ],
    ids=["appserver-sigkill", "appserver-shutdown", "appserver-stop", "exec-stop", "exec-shutdown"],
)
async def test_no_command_outlives_the_end(
    kind: str,
    end: Callable[[Provider, list[Handle]], Awaitable[None]],
    detached: bool,
    codex_env: CodexTestEnv,
    scripted_model: ScriptedModelServer,
    workspace: Path,
) -> None:
    marker = str(uuid.uuid4().int % 10**9)  # digits: "sleep 61.<marker><n>" must be a valid duration
    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env), skip_git_repo_check=True)
    provider: Provider = CodexProvider(options) if kind == "app-server" else CodexExecProvider(options)
    async with provider:
        handles = await four_sleeping_sessions(provider, scripted_model, workspace, marker, detached=detached)
        started = time.monotonic()
        await end(provider, handles)
        await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
        assert running(marker) == []


async def test_ctrl_c_of_agent_fleet_batch_leaves_no_command(
    codex_env: CodexTestEnv, scripted_model: ScriptedModelServer, workspace: Path, tmp_path: Path
) -> None:
    marker = str(uuid.uuid4().int % 10**9)  # digits: "sleep 61.<marker><n>" must be a valid duration
    scripted_model.responder = sleeper(marker)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(json.dumps({"id": f"t{i}", "prompt": f"session-{i} run it"}) + "\n" for i in range(4))
    )
    argv = [
        str(Path(sys.executable).with_name("agent-fleet")),
        "batch",
        str(tasks),
        "-j",
        "4",
        "--cwd",
        str(workspace),
    ]
    argv += ["--out", str(tmp_path / "out"), "--sandbox", "danger-full-access", *codex_env.codex_args()]
    cli = await asyncio.create_subprocess_exec(
        *argv, env=codex_env.full_env(), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    try:
        assert await wait_for(lambda: len(running(marker)) == 4, 60), running(marker)
        cli.send_signal(signal.SIGINT)
        started = time.monotonic()
        _, err = await asyncio.wait_for(cli.communicate(), 30)
        await asyncio.sleep(max(0.0, 2.0 - (time.monotonic() - started)))
        assert running(marker) == [], err.decode(errors="replace")[-2000:]
        assert cli.returncode == 130  # stopped by the user (Ctrl-C): tasks interrupted, exit 130
    finally:
        if cli.returncode is None:
            cli.kill()
            await cli.wait()
