"""Durable batches (issue 18): the ledger survives kill -9 and double Ctrl-C; resume; re-run; refusal.

These run the installed ``agent-fleet`` console script as a real subprocess against the scripted model,
so signals and a killed process are real.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_fleet import Spec
from agent_fleet.cli import cli
from agent_fleet.codex import CodexOptions
from agent_fleet.runner import GateConfig, Task
from agent_fleet.runner import batch as batch_module
from agent_fleet.runner._resume import INTERRUPTED_FOLLOWUP
from agent_fleet.runner.batch import BatchEntry, BatchTask, run_batch
from agent_fleet.runner.ledger import Ledger
from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer, scripted_codex_env

from .conftest import git, make_repo
from .scripted import ScriptedAgent, commit, run, write_file

pytestmark = pytest.mark.e2e

SCRIPT = Path(sys.executable).parent / "agent-fleet"


def _tasks_file(path: Path, ids: list[str]) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": i, "prompt": f"[task:{i}] do {i}", "require_commit": True}) + "\n" for i in ids
        )
    )
    return path


def _ledger(out: Path, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    if not (out / "batch.db").exists():
        return []
    db = sqlite3.connect(f"file:{out / 'batch.db'}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(sql, args).fetchall()
    except sqlite3.OperationalError:  # its tables are not created yet
        return []
    finally:
        db.close()


def _wait_for(what: str, check: Callable[[], bool], proc: subprocess.Popen[str], limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while not check():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the batch exited ({proc.returncode}) before {what}:\n{out}\n{err}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


def _sleeping(out: Path, ids: list[str]) -> bool:
    """Each task is running with its session recorded and its `sleep` command started."""
    rows = dict(_ledger(out, "SELECT id, session_id FROM tasks WHERE state = 'running'"))
    if not all(rows.get(i) for i in ids):
        return False
    return all("sleep 30" in (out / f"{i}.jsonl").read_text() for i in ids if (out / f"{i}.jsonl").exists())


def _kill_providers(out: Path, owner: int) -> None:
    for (pid,) in _ledger(out, "SELECT pid FROM pids WHERE owner = ?", owner):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)


def _batch(env: CodexTestEnv, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(SCRIPT), "batch", *args, *env.codex_args()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env.full_env(),
        start_new_session=True,  # a signal for the batch alone, as a terminal's Ctrl-C would be
    )


# -- kill -9, then --resume ------------------------------------------------------------------------------


def test_kill_9_then_resume_finishes_with_every_history_intact(
    repo: Path, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    finish = [write_file("x.txt", "after resume"), commit("resumed work")]
    scripted_model.responder = ScriptedAgent(
        {
            "a": [[write_file("a.txt", "a"), commit("task a")]],
            "b": [[run("sleep 30")], finish],
            "c": [[run("sleep 30")], finish],
            "d": [[write_file("d.txt", "d"), commit("task d")]],
        }
    )
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["a", "b", "c", "d"])
    out = tmp_path / "out"
    flags = ["-j", "2", "--worktrees", "--cwd", str(repo), "--sandbox", "workspace-write"]
    proc = _batch(codex_env, str(tasks), "--out", str(out), *flags)
    try:
        _wait_for("b and c sleeping", lambda: _sleeping(out, ["b", "c"]), proc)
        proc.kill()  # SIGKILL: no cleanup of any kind
        proc.communicate(timeout=30)
    finally:
        _kill_providers(out, proc.pid)
    states = dict(_ledger(out, "SELECT id, state FROM tasks"))
    assert states == {"a": "finished", "b": "running", "c": "running", "d": "queued"}
    sessions = dict(_ledger(out, "SELECT id, session_id FROM tasks WHERE id IN ('b', 'c')"))

    # A plain batch into the same --out refuses, and changes nothing.
    again = _batch(codex_env, str(tasks), "--out", str(out), *flags)
    _, err = again.communicate(timeout=60)
    assert again.returncode == 2, err
    assert "already holds a batch" in err and "--resume" in err and "Traceback" not in err
    assert dict(_ledger(out, "SELECT id, state FROM tasks")) == states

    resumed = _batch(codex_env, "--resume", str(out))  # the recorded settings (-j, --worktrees, ...) apply
    stdout, stderr = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, stdout + stderr
    summary = json.loads((out / "summary.json").read_text())
    by_id = {t["task_id"]: t for t in summary["tasks"]}
    assert {i: t["status"] for i, t in by_id.items()} == dict.fromkeys("abcd", "succeeded")
    assert {i: t["runs"] for i, t in by_id.items()} == {"a": 1, "b": 2, "c": 2, "d": 1}
    for i in ("b", "c"):
        assert by_id[i]["session_id"] == sessions[i], "the interrupted session was resumed, not replaced"
        assert by_id[i]["resumed_from"] == sessions[i]
        history = [state for (state,) in _ledger(out, "SELECT state FROM history WHERE task_id = ?", i)]
        assert history == ["running", "session", "running", "session", "finished"]
        transcript = [json.loads(line) for line in (out / f"{i}.jsonl").read_text().splitlines()]
        started = [r for r in transcript if r.get("subtype") == "runner.started"]
        assert len(started) == 2, "the transcript kept the first run and appended the second"
        assert git(repo, "log", "-1", "--format=%s", f"agent-fleet/{i}") == "resumed work"
    resumed_requests = [r for r in scripted_model.requests if INTERRUPTED_FOLLOWUP in json.dumps(r.body)]
    assert {
        ("[task:b]" in json.dumps(r.body), "[task:c]" in json.dumps(r.body)) for r in resumed_requests
    } == {
        (True, False),
        (False, True),
    }, "each resumed turn carried the interruption notice in the same conversation as its first prompt"
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1, (
        "worktrees reused, then removed"
    )
    assert git(repo, "log", "-1", "--format=%s", "agent-fleet/a") == "task a"


# -- one run of an --out at a time --------------------------------------------------------------------------


def test_a_second_run_of_the_same_out_is_refused_while_the_first_holds_it(
    repo: Path, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent(
        {"a": [[run("sleep 30")], [write_file("a.txt", "a"), commit("task a")]], "b": [[run("sleep 30")]]}
    )
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["a", "b"])
    out = tmp_path / "out"
    flags = ["-j", "1", "--worktrees", "--cwd", str(repo)]
    first = _batch(codex_env, str(tasks), "--out", str(out), *flags)
    try:
        _wait_for("a sleeping", lambda: _sleeping(out, ["a"]), first)
        first.kill()  # it dies holding the lock, with a running and b queued
        first.communicate(timeout=30)
    finally:
        _kill_providers(out, first.pid)
    resumed = _batch(codex_env, "--resume", str(out))  # a dead holder does not block
    try:
        _wait_for("b sleeping", lambda: _sleeping(out, ["b"]), resumed)
        for args in (["--resume", str(out)], ["--resume", str(out), "--rerun", "failed"]):
            second = _batch(codex_env, *args)
            _, err = second.communicate(timeout=60)
            assert second.returncode == 2, err
            assert f"is in use by another batch (pid {resumed.pid})" in err and "Traceback" not in err
        states = dict(_ledger(out, "SELECT id, state FROM tasks"))
        assert states == {"a": "finished", "b": "running"}, "the refused runs changed nothing"
    finally:
        resumed.kill()
        resumed.communicate(timeout=30)
        _kill_providers(out, resumed.pid)


# -- --rerun failed ------------------------------------------------------------------------------------


def test_rerun_failed_runs_only_the_failed_tasks_again(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent(
        {
            "ok": [[write_file("ok.txt", "ok"), commit("ok")]],
            "bad": [[write_file("bad.txt", "no commit")]],  # fails --require-commit, no follow-ups
        }
    )
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["ok", "bad"])
    out = tmp_path / "out"
    first = CliRunner().invoke(
        cli,
        [
            "batch",
            str(tasks),
            "--out",
            str(out),
            "--cwd",
            str(repo),
            "--worktrees",
            "--max-followups",
            "0",
            *cli_env,
        ],
        catch_exceptions=False,
    )
    assert first.exit_code == 1, first.output
    summary = json.loads((out / "summary.json").read_text())
    assert {t["task_id"]: t["status"] for t in summary["tasks"]} == {"ok": "succeeded", "bad": "failed"}

    # --resume alone: nothing is left to run, the record stays as it is.
    same = CliRunner().invoke(cli, ["batch", "--resume", str(out), *cli_env], catch_exceptions=False)
    assert same.exit_code == 1
    assert json.loads((out / "summary.json").read_text())["counts"] == {"succeeded": 1, "failed": 1}

    scripted_model.responder = ScriptedAgent({"bad": [[write_file("bad.txt", "now"), commit("bad fixed")]]})
    before = len(scripted_model.requests)
    rerun = CliRunner().invoke(
        cli, ["batch", "--resume", str(out), "--rerun", "failed", *cli_env], catch_exceptions=False
    )
    assert rerun.exit_code == 0, rerun.output
    by_id = {t["task_id"]: t for t in json.loads((out / "summary.json").read_text())["tasks"]}
    assert by_id["bad"]["status"] == "succeeded" and by_id["bad"]["runs"] == 2
    assert by_id["ok"]["runs"] == 1
    assert git(repo, "log", "-1", "--format=%s", "agent-fleet/bad") == "bad fixed", "re-run on its branch"
    assert all("[task:bad]" in json.dumps(r.body) for r in scripted_model.requests[before:])


def test_rerun_needs_resume(tmp_path: Path) -> None:
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["a"])
    result = CliRunner().invoke(cli, ["batch", str(tasks), "--rerun", "failed"])
    assert result.exit_code == 2 and "--rerun goes with --resume" in result.stderr
    result = CliRunner().invoke(cli, ["batch", "--resume", str(tmp_path / "nothing")])
    assert result.exit_code == 2 and "holds no batch to resume" in result.stderr


# -- double Ctrl-C ---------------------------------------------------------------------------------------


def _interrupt(
    server: ScriptedModelServer, root: Path, second_after: float | None
) -> tuple[float, int, str, dict[str, Any], Path, Path]:
    """Start a batch of three sleeping tasks and a queued one, press Ctrl-C (twice, ``second_after``
    seconds apart, unless None); the seconds from the last press to the exit (inf and -9 for a hang),
    the exit code, stdout, summary.json, the out directory and the repository."""
    repo = make_repo(root / "repo")
    env = scripted_codex_env(server, root / "codex-home")
    ids = [f"{root.name}-{n}" for n in range(3)]
    tasks = _tasks_file(root / "tasks.jsonl", [*ids, f"{root.name}-queued"])
    out = root / "out"
    proc = _batch(env, str(tasks), "--out", str(out), "-j", "3", "--worktrees", "--cwd", str(repo))
    try:
        _wait_for("three tasks sleeping", lambda: _sleeping(out, ids), proc, limit=90)
        proc.send_signal(signal.SIGINT)
        if second_after is not None:
            time.sleep(second_after)
            proc.send_signal(signal.SIGINT)
        pressed = time.monotonic()
        try:
            stdout, _ = proc.communicate(timeout=30 if second_after is not None else 60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            return float("inf"), -9, "", {}, out, repo
        took = time.monotonic() - pressed
    finally:
        _kill_providers(out, proc.pid)
    return took, proc.returncode, stdout, json.loads((out / "summary.json").read_text()), out, repo


@pytest.mark.alone
@pytest.mark.timeout(600)
def test_20_double_ctrl_c_runs_never_hang_and_leave_a_true_summary(
    scripted_model: ScriptedModelServer, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent(
        {f"r{n}-{k}": [[run("sleep 30")]] for n in range(20) for k in range(3)}
    )
    gaps = [0.02 + 0.01 * (n % 4) for n in range(20)]  # 0.02 .. 0.05 s between the presses
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = list(pool.map(lambda n: _interrupt(scripted_model, tmp_path / f"r{n}", gaps[n]), range(20)))
    hung = [n for n, run_ in enumerate(runs) if run_[1] == -9]
    assert not hung, f"runs {hung} hung"
    print("seconds from the second Ctrl-C to exit:", sorted(round(r[0], 2) for r in runs))
    for took, code, _, summary, out, repo in runs:
        assert code == 130
        assert took < 2.0, f"left {took:.2f}s after the second Ctrl-C"
        by_id = {t["task_id"]: t for t in summary["tasks"]}
        assert len(by_id) == 3
        (queued,) = summary["not_started"]["task_ids"]
        assert queued.endswith("queued") and "not started" in summary["not_started"]["reason"]
        assert not (out / f"{queued}.jsonl").exists()
        for task_id, entry in by_id.items():
            transcript = out / f"{task_id}.jsonl"
            # it ran: the summary says so, with the session it had and where its work is
            assert entry["state"] in ("interrupted", "running") and entry["status"] == "cancelled"
            sessions = [
                json.loads(line)["data"]["session_id"]
                for line in transcript.read_text().splitlines()
                if '"runner.session"' in line
            ]
            assert sessions and entry["session_id"] == sessions[-1]
            assert entry["branch"] == f"agent-fleet/{task_id}"
            assert task_id in git(repo, "branch", "--list", entry["branch"])
            listed = git(repo, "worktree", "list", "--porcelain")
            worktree = entry["worktree"]
            if worktree is not None and worktree["kept"]:
                assert Path(worktree["path"]).is_dir() and f"worktree {worktree['path']}" in listed
            else:
                assert f"/{task_id}\n" not in listed + "\n", "a worktree left on disk is reported"


# -- one Ctrl-C -------------------------------------------------------------------------------------------

#: Seconds from the first Ctrl-C to the process's exit (issue 18: "Ctrl-C exits within 2 s"): running
#: turns interrupted, worktrees settled, the summary and the report written, the provider shut down.
FIRST_CTRL_C_LIMIT = 2.0


@pytest.mark.alone
@pytest.mark.timeout(300)
def test_one_ctrl_c_stops_cleanly_with_130_within_a_bound_and_a_true_summary(
    scripted_model: ScriptedModelServer, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent(
        {f"o{n}-{k}": [[run("sleep 30")]] for n in range(4) for k in range(3)}
    )
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = list(pool.map(lambda n: _interrupt(scripted_model, tmp_path / f"o{n}", None), range(4)))
    print("seconds from the Ctrl-C to exit:", sorted(round(r[0], 2) for r in runs))
    for took, code, stdout, summary, out, _ in runs:
        assert code == 130, stdout
        assert took < FIRST_CTRL_C_LIMIT, f"left {took:.2f}s after the Ctrl-C"
        assert "continue it with: agent-fleet batch --resume" in stdout
        assert summary["stopped"] == "stopped by the user" and not summary.get("forced")
        states = dict(_ledger(out, "SELECT id, state FROM tasks"))
        (queued,) = summary["not_started"]["task_ids"]
        assert states[queued] == "queued" and "not started" in summary["not_started"]["reason"]
        for entry in summary["tasks"]:
            task_id = entry["task_id"]
            # a clean stop: each running turn was interrupted and recorded so, with its session
            assert entry["state"] == states[task_id] == "interrupted" and entry["status"] == "cancelled"
            assert entry["session_id"] and entry["branch"] == f"agent-fleet/{task_id}"


# -- a session that cannot be resumed --------------------------------------------------------------------


async def test_an_interrupted_task_whose_session_is_gone_starts_afresh(
    repo: Path, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent({"a": [[write_file("a.txt", "a"), commit("task a")]]})
    out = tmp_path / "out"
    out.mkdir()
    ledger = Ledger.create(out, [])
    ledger.add([("a", 1, {"id": "a", "prompt": "[task:a] write a.txt and commit", "cwd": str(repo)})])
    ledger.start("a", branch=None, worktree=None, transcript=str(out / "a.jsonl"))
    ledger.session("a", "00000000-0000-0000-0000-000000000000")  # a session codex never had
    ledger.close()  # the process "died" here
    template = Task(spec=Spec(prompt="-", sandbox="workspace-write"), gate=GateConfig(require_commit=True))
    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
    result = await run_batch(None, template=template, out_dir=out, options=options, resume=True)
    (entry,) = result.entries
    assert entry.result.status == "succeeded", entry.result.reason
    assert entry.result.session_id not in (None, "00000000-0000-0000-0000-000000000000")
    records = [json.loads(line) for line in (out / "a.jsonl").read_text().splitlines()]
    failed = [r for r in records if r.get("subtype") == "runner.resume_failed"]
    assert failed and failed[0]["data"]["session_id"] == "00000000-0000-0000-0000-000000000000"
    assert not any(INTERRUPTED_FOLLOWUP in json.dumps(r.body) for r in scripted_model.requests)


async def test_a_task_that_cannot_run_any_more_fails_alone(
    scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent({})
    dirs = {name: tmp_path / name for name in ("a", "b", "c")}
    for d in dirs.values():
        d.mkdir()
    tasks = [
        BatchTask(id=name, prompt=f"[task:{name}] go", cwd=d, line=n + 1)
        for n, (name, d) in enumerate(dirs.items())
    ]

    def on_result(entry: BatchEntry) -> None:
        if entry.result.task_id == "a":
            dirs["b"].rmdir()  # b's directory disappears after the batch checked it

    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
    result = await run_batch(
        tasks,
        template=Task(spec=Spec(prompt="-")),
        out_dir=tmp_path / "out",
        jobs=1,
        options=options,
        on_result=on_result,
    )
    statuses = {e.result.task_id: (e.result.status, e.result.error_code) for e in result.entries}
    assert statuses == {"a": ("succeeded", None), "b": ("failed", "usage_error"), "c": ("succeeded", None)}
    assert "line 2: working directory" in result.entries[1].result.reason


async def test_the_ledger_counts_a_retried_turn_as_two_attempts(
    scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent({"r": [[Reply.http_error(500, "upstream broke")], []]})
    template = Task(spec=Spec(prompt="-"), retry_delay=0.01)
    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
    out = tmp_path / "out"
    result = await run_batch(
        [BatchTask(id="r", prompt="[task:r] go", cwd=tmp_path)],
        template=template,
        out_dir=out,
        options=options,
    )
    assert result.entries[0].result.status == "succeeded", result.entries[0].result.reason
    ledger = Ledger.open(out)
    (row,) = ledger.rows()
    ledger.close()
    assert (row.runs, row.attempts) == (1, 2)
    assert json.loads((out / "summary.json").read_text())["tasks"][0]["attempts"] == 2


async def test_a_task_that_cannot_be_built_fails_alone(
    scripted_model: ScriptedModelServer,
    codex_env: CodexTestEnv,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Building a task's Task happens after it started: whatever that raises (a fault injected here, as
    # every known bad setting is refused up front) used to stop every worker and leave it "running".
    real = batch_module.build_task

    def build(t: BatchTask, template: Task, cwd: Path) -> Task:
        if t.id == "b":
            raise ValueError("an injected fault")
        return real(t, template, cwd)

    monkeypatch.setattr(batch_module, "build_task", build)
    scripted_model.responder = ScriptedAgent({})
    tasks = [BatchTask(id=i, prompt=f"[task:{i}] go", cwd=tmp_path, line=n + 1) for n, i in enumerate("abc")]
    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
    out = tmp_path / "out"
    result = await run_batch(
        tasks, template=Task(spec=Spec(prompt="-")), out_dir=out, jobs=1, options=options
    )
    statuses = {e.result.task_id: (e.result.status, e.result.error_code) for e in result.entries}
    assert statuses == {"a": ("succeeded", None), "b": ("failed", "usage_error"), "c": ("succeeded", None)}
    assert result.entries[1].result.reason == "line 2: the task's settings cannot run: an injected fault"
    assert dict(_ledger(out, "SELECT id, state FROM tasks")) == dict.fromkeys("abc", "finished")


async def test_a_resume_records_an_entry_that_no_longer_reads_as_a_task_failed_and_runs_the_rest(
    scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    scripted_model.responder = ScriptedAgent({})
    out = tmp_path / "out"
    out.mkdir()
    ledger = Ledger.create(out, [])
    ledger.add(
        [
            ("bad", 1, {"id": "bad", "prompt": "[task:bad] go", "cwd": str(tmp_path), "timeout": -1}),
            ("good", 2, {"id": "good", "prompt": "[task:good] go", "cwd": str(tmp_path)}),
            ("odd", 3, ["not", "an", "object"]),  # type: ignore[list-item]
        ]
    )
    ledger.start("bad", branch=None, worktree=None, transcript=str(out / "bad.jsonl"))
    ledger.close()  # the process "died" with "bad" running
    options = CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))
    template = Task(spec=Spec(prompt="-"))
    for _ in range(2):  # and a second resume does not trip over it either
        result = await run_batch(None, template=template, out_dir=out, options=options, resume=True)
        statuses = {e.result.task_id: (e.result.status, e.result.error_code) for e in result.entries}
        assert statuses == {
            "bad": ("failed", "usage_error"),
            "good": ("succeeded", None),
            "odd": ("failed", "usage_error"),
        }
    assert "'timeout' must be a finite number of seconds > 0" in result.entries[0].result.reason
    assert "expected a JSON object" in result.entries[2].result.reason
    assert dict(_ledger(out, "SELECT id, state FROM tasks")) == dict.fromkeys(
        ("bad", "good", "odd"), "finished"
    )


def test_a_kill_9_mid_retry_leaves_a_true_attempt_count(
    repo: Path, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    # The first turn fails retryably; the retry runs a long command; the process is killed during it.
    scripted_model.responder = ScriptedAgent(
        {"k": [[Reply.http_error(500, "upstream broke")], [run("sleep 30")]]}
    )
    tasks = _tasks_file(tmp_path / "tasks.jsonl", ["k"])
    out = tmp_path / "out"
    proc = _batch(codex_env, str(tasks), "--out", str(out), "--cwd", str(repo), "--retry-delay", "0.01")
    try:
        _wait_for("the retry sleeping", lambda: _sleeping(out, ["k"]), proc)
        assert "runner.retry" in (out / "k.jsonl").read_text()
        proc.kill()
        proc.communicate(timeout=30)
    finally:
        _kill_providers(out, proc.pid)
    assert _ledger(out, "SELECT state, runs, attempts FROM tasks") == [("running", 1, 2)]
