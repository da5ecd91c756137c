"""``agent-fleet batch --server URL`` against an ``agent-fleet serve`` process (real codex, scripted model):
the batch's box -- each task's temporary directory, and with ``--worktrees`` its worktree -- is made in
the daemon's own state directory, which the daemon's floor takes without an ``--allow-root`` for it
(issue #27: "the same holds for the daemon's batches: make the default layout fit")."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet._codex_toml import config_args
from agent_fleet.testing import CodexTestEnv, RecordedRequest, Reply, ScriptedModelServer, Text

from .conftest import TOKEN

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

_AF = str(Path(sys.executable).parent / "agent-fleet")


def _git(repo: Path, *args: str) -> str:
    import subprocess

    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(workspace: Path) -> Path:
    """A repository under the daemon's --allow-root."""
    path = workspace / "repo"
    path.mkdir()
    for args in (
        ("init", "-q"),
        ("config", "user.name", "agent"),
        ("config", "user.email", "agent@example.invalid"),
        ("config", "commit.gpgsign", "false"),
    ):
        _git(path, *args)
    (path / "README.md").write_text("hello\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "init")
    return path


def _responder(request: RecordedRequest) -> Reply:
    """Each task writes where it ran (its directory and TMPDIR), commits, and is done."""
    from agent_fleet.testing import FunctionCall

    steps = sum(1 for item in request.input if item.get("type") == "function_call_output")

    def run(cmd: str, *, escalate: bool = False) -> FunctionCall:
        args: dict[str, Any] = {"cmd": cmd, "login": False}
        if escalate:
            args.update(sandbox_permissions="require_escalated", justification="commit the work")
        return FunctionCall(name="exec_command", arguments=args)

    if steps == 0:
        return Reply(items=(run('printf "%s\\n%s\\n" "$PWD" "$TMPDIR" > where.txt'),))
    if steps == 1:
        return Reply(items=(run("git add -A && git commit -q -m work", escalate=True),))
    return Reply(items=(Text(text="done"),))


async def _serve(codex_env: CodexTestEnv, state: Path, token_file: Path, root: Path) -> tuple[Any, str]:
    argv = [_AF, "serve", "--port", "0", "--state-dir", str(state), "--token-file", str(token_file)]
    argv += ["--allow-root", str(root), *config_args(codex_env.config)]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, env={**os.environ, **codex_env.env}, start_new_session=True
    )
    assert proc.stdout is not None
    async with asyncio.timeout(30):
        line = (await proc.stdout.readline()).decode()
    assert line.startswith("listening on http://127.0.0.1:"), line
    return proc, line.split()[-1]


@pytest.mark.parametrize("worktrees", [True, False])
async def test_batch_server_boxes_live_in_the_daemons_state_dir(
    codex_env: CodexTestEnv,
    scripted_model: ScriptedModelServer,
    repo: Path,
    tmp_path: Path,
    token_file: Path,
    workspace: Path,
    worktrees: bool,
) -> None:
    scripted_model.responder = _responder
    state = tmp_path / "daemon-state"
    proc, url = await _serve(codex_env, state, token_file, workspace)  # only the workspace is allowed
    tasks = tmp_path / "tasks.jsonl"
    ids = ("a", "b") if worktrees else ("a",)  # without worktrees one task: it has the tree to itself
    tasks.write_text("".join(json.dumps({"id": i, "prompt": f"task {i}"}) + "\n" for i in ids))
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "OPENAI_API_KEY")}
    argv = [_AF, "batch", str(tasks), "--server", url, "--cwd", str(repo), "--out", str(out)]
    argv += ["--max-followups", "0", "-j", "2", *(["--worktrees"] if worktrees else [])]
    try:
        cli = await asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env={**env, "AGENT_FLEET_TOKEN": TOKEN},
        )
        async with asyncio.timeout(240):
            output = (await cli.communicate())[0].decode()
        assert cli.returncode == 0, output
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
            sessions = (await http.get("/v1/sessions")).json()["sessions"]
        assert len(sessions) == len(ids)  # every session ran on the daemon
    finally:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            await proc.wait()

    boxes = (state / "boxes").resolve()
    for task_id in ids:
        ref = f"agent-fleet/{task_id}" if worktrees else "HEAD"
        where, tmpdir = _git(repo, "show", f"{ref}:where.txt").split("\n")[:2]
        assert Path(tmpdir).parent.name == "tmp" and Path(tmpdir).name == task_id, tmpdir
        assert Path(tmpdir).is_relative_to(boxes), (tmpdir, boxes)
        if worktrees:
            assert Path(where).parent.name == "worktrees" and Path(where).name == task_id, where
            assert Path(where).is_relative_to(boxes), (where, boxes)
        else:
            assert where == await asyncio.to_thread(os.path.realpath, repo)
    summary = json.loads((out / "summary.json").read_text())
    assert [t["status"] for t in summary["tasks"]] == ["succeeded"] * len(ids)
    # the boxes are emptied and removed at the end (clean worktrees go, temporary directories always)
    assert not list(boxes.glob("*/tmp/*")) and not list(boxes.glob("*/worktrees/*"))
