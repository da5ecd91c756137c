"""``agent-fleet serve`` as a process: SIGTERM drains, a restart keeps the history, a crashed daemon's
running sessions come back interrupted and can be resumed (real codex binary, scripted model)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_fleet._codex_toml import config_args
from agent_fleet.testing import CodexTestEnv, RecordedRequest, Reply, ScriptedModelServer

from .conftest import TOKEN, read_events

pytestmark = pytest.mark.e2e  # runs the real binary

Start = Callable[[], Awaitable[tuple[asyncio.subprocess.Process, str]]]


@pytest.fixture
async def start_daemon(
    codex_env: CodexTestEnv, tmp_path: Path, token_file: Path, workspace: Path
) -> AsyncIterator[Start]:
    procs: list[asyncio.subprocess.Process] = []

    async def start() -> tuple[asyncio.subprocess.Process, str]:
        argv = [str(Path(sys.executable).parent / "agent-fleet"), "serve", "--port", "0"]
        argv += ["--state-dir", str(tmp_path / "state"), "--token-file", str(token_file)]
        argv += ["--allow-root", str(workspace), *config_args(codex_env.config)]
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, **codex_env.env},
            start_new_session=True,  # its own process group: a crash test kills the daemon and its child
        )
        procs.append(proc)
        assert proc.stdout is not None
        async with asyncio.timeout(30):
            line = (await proc.stdout.readline()).decode()
        assert line.startswith("listening on http://127.0.0.1:"), line
        return proc, line.split()[-1]

    yield start
    for proc in procs:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()


def _client(url: str) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)


async def test_sigterm_drains_and_a_restart_serves_the_history(
    start_daemon: Start, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("finished answer"), Reply.text("never", delay=30))
    proc, url = await start_daemon()
    async with _client(url) as http:
        done = (await http.post("/v1/sessions", json={"prompt": "one", "cwd": str(workspace)})).json()
        finished = await read_events(http, done["session_id"])
        slow = (await http.post("/v1/sessions", json={"prompt": "two", "cwd": str(workspace)})).json()
        await scripted_model.wait_for_request()
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await proc.wait() == 0
    proc, url = await start_daemon()
    async with _client(url) as http:
        sessions = {s["session_id"]: s for s in (await http.get("/v1/sessions")).json()["sessions"]}
        assert sessions[done["session_id"]]["state"] == "idle"
        assert sessions[slow["session_id"]]["state"] == "stopped"  # drained: interrupted and recorded
        assert await read_events(http, done["session_id"]) == finished  # the same ids and records
        stopped = await read_events(http, slow["session_id"])
        assert stopped[-1][1]["type"] == "Error" and stopped[-1][1]["code"] == "cancelled"
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await proc.wait() == 0


async def test_a_crashed_daemons_running_session_is_interrupted_and_can_be_resumed(
    start_daemon: Start, scripted_model: ScriptedModelServer, workspace: Path
) -> None:
    scripted_model.enqueue(Reply.text("never", delay=30))
    proc, url = await start_daemon()
    async with _client(url) as http:
        sid = (
            await http.post("/v1/sessions", json={"prompt": "remember token-77", "cwd": str(workspace)})
        ).json()["session_id"]
        await scripted_model.wait_for_request()
    os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()
    scripted_model.enqueue(Reply.text("it was token-77"))
    proc, url = await start_daemon()
    async with _client(url) as http:
        state = (await http.get(f"/v1/sessions/{sid}")).json()
        assert state["state"] == "interrupted"
        resumed = await http.post(
            "/v1/sessions", params={"resume": sid}, json={"prompt": "what was it?", "cwd": str(workspace)}
        )
        assert resumed.status_code == 201, resumed.text
        assert resumed.json()["session_id"] == sid
        events = await read_events(http, sid, after=resumed.json()["last_event_id"])
        assert events[-1][1]["type"] == "Result" and events[-1][1]["text"] == "it was token-77"
        assert (await http.get(f"/v1/sessions/{sid}")).json()["state"] == "idle"
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await proc.wait() == 0


async def _cli(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "agent-fleet"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=env,
        cwd=cwd,
    )
    async with asyncio.timeout(60):
        out, _ = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_run_and_batch_with_server_use_the_daemon(
    start_daemon: Start, scripted_model: ScriptedModelServer, workspace: Path, tmp_path: Path
) -> None:
    scripted_model.responder = lambda request: Reply.text("answered by the daemon")
    proc, url = await start_daemon()
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "OPENAI_API_KEY")}
    code, out = await _cli(
        "run",
        "--server",
        url,
        "--json",
        "--cwd",
        str(workspace),
        "say hi",
        env={**env, "AGENT_FLEET_TOKEN": TOKEN},
        cwd=workspace,
    )
    assert code == 0, out
    assert "answered by the daemon" in out
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"id": "a", "prompt": "one"}\n{"id": "b", "prompt": "two"}\n')
    code, out = await _cli(
        "batch",
        str(tasks),
        "--server",
        url,
        "--cwd",
        str(workspace),
        "--out",
        str(tmp_path / "out"),
        env={**env, "AGENT_FLEET_TOKEN": TOKEN},
        cwd=workspace,
    )
    assert code == 0, out
    async with _client(url) as http:
        sessions = (await http.get("/v1/sessions")).json()["sessions"]
    assert len(sessions) == 3  # every session ran on the daemon
    code, out = await _cli("run", "--server", url, "--cwd", str(workspace), "say hi", env=env, cwd=workspace)
    assert code != 0
    assert "AGENT_FLEET_TOKEN" in out and "Traceback" not in out
    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(20):
        assert await proc.wait() == 0


async def _batch_until(http: httpx.AsyncClient, batch_id: str, done: Callable[[dict[str, Any]], bool]) -> Any:
    """The batch's description once ``done`` holds for it (polled: the API has no batch stream)."""
    async with asyncio.timeout(60):
        while True:
            batch = (await http.get(f"/v1/batches/{batch_id}")).json()
            if done(batch):
                return batch
            await asyncio.sleep(0.1)


def _slow_then_quick(slow: list[bool]) -> Callable[[RecordedRequest], Reply]:
    """Tasks answer at once, except the one whose prompt says "slow" while ``slow[0]`` is true."""

    def respond(request: RecordedRequest) -> Reply:
        if slow[0] and any("slow" in text for text in request.user_texts()):
            return Reply.text("never", delay=30)
        return Reply.text("done")

    return respond


@pytest.mark.parametrize("how", ["kill", "term"])
async def test_a_batch_cut_off_with_its_daemon_is_listed_so_and_resume_finishes_it(
    start_daemon: Start, scripted_model: ScriptedModelServer, workspace: Path, how: str
) -> None:
    slow = [True]
    scripted_model.responder = _slow_then_quick(slow)
    proc, url = await start_daemon()
    tasks = [{"id": "quick", "prompt": "a quick task"}, {"id": "slow", "prompt": "a slow task"}]
    async with _client(url) as http:
        response = await http.post(
            "/v1/batches", json={"tasks": tasks, "spec": {"cwd": str(workspace)}, "jobs": 2}
        )
        assert response.status_code == 201, response.text
        batch_id = response.json()["batch_id"]
        await _batch_until(
            http, batch_id, lambda b: b["states"].get("finished") == 1 and b["states"].get("running") == 1
        )
    if how == "kill":
        os.killpg(proc.pid, signal.SIGKILL)
        await proc.wait()
    else:
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await proc.wait() == 0
    slow[0] = False
    proc, url = await start_daemon()
    async with _client(url) as http:
        [listed] = (await http.get("/v1/batches")).json()["batches"]
        assert listed["batch_id"] == batch_id
        assert listed["state"] == ("interrupted" if how == "kill" else "stopped"), listed
        assert listed["states"] == {"finished": 1, "finished:succeeded": 1, "interrupted": 1}
        assert (await http.post(f"/v1/batches/{batch_id}/resume", json={"rerun": "all"})).status_code == 400
        resumed = await http.post(f"/v1/batches/{batch_id}/resume", json={})
        assert resumed.status_code == 200, resumed.text
        again = await http.post(f"/v1/batches/{batch_id}/resume", json={})
        assert again.status_code == 400 and "running" in again.json()["error"]["message"]
        done = await _batch_until(http, batch_id, lambda b: b["state"] != "running")
        assert done["state"] == "succeeded", done
        assert {t["task_id"]: t["runs"] for t in done["summary"]["tasks"]} == {"quick": 1, "slow": 2}
        assert all(t["status"] == "succeeded" for t in done["summary"]["tasks"])
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(20):
            assert await proc.wait() == 0
