"""The offline try-out's scripted agent (chosen from the request, not a queue) and its CLI, hermetically."""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from agent_fleet.testing import CustomToolCall, FunctionCall, RecordedRequest, Text
from agent_fleet.testing.__main__ import main
from agent_fleet.testing._tryout import EXAMPLE_TASKS, note_path, tryout_agent


def user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def output() -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": "c", "output": "ok"}


def request(*items: dict[str, Any]) -> RecordedRequest:
    return RecordedRequest(method="POST", path="/v1/responses", headers={}, body={"input": list(items)})


def cmd(reply: Any) -> str:
    (item,) = [i for i in reply.items if isinstance(i, FunctionCall)]
    return str(item.arguments["cmd"])


def test_one_turn_writes_checks_is_declined_commits_then_is_done() -> None:
    context = user("<environment_context>cwd</environment_context>")
    prompt = user("Add a greeting and commit it.")
    first = tryout_agent(request(context, prompt))
    assert first is not None
    assert any(isinstance(i, CustomToolCall) and "add-a-greeting-and.md" in i.input for i in first.items)
    assert note_path("Add a greeting and commit it.") == "add-a-greeting-and.md"
    steps = [tryout_agent(request(context, prompt, *[output()] * n)) for n in (1, 2, 3, 4)]
    assert [cmd(r) for r in steps[:3]] == [
        "cat add-a-greeting-and.md",
        "git reset --hard",
        "git add -A && git commit -q -m 'Add add-a-greeting-and.md'",
    ]
    last = steps[3]
    assert last is not None and isinstance(last.items[0], Text)


def test_forgetful_task_commits_only_in_the_follow_up() -> None:
    prompt = user(str(EXAMPLE_TASKS[2]["prompt"]))
    third = tryout_agent(request(prompt, output(), output(), output()))
    assert third is not None and isinstance(third.items[0], Text)  # done without committing
    followup = tryout_agent(request(prompt, output(), output(), output(), user("The quality gate failed")))
    assert followup is not None and cmd(followup).startswith("git add -A && git commit")


def test_no_prompt_falls_back_to_the_default() -> None:
    assert tryout_agent(request(user("<environment_context/>"))) is None


def test_example_makes_a_repository_and_tasks_and_never_overwrites(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(main, ["example", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    lines = (tmp_path / "t" / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["id"] for line in lines] == ["greeting", "release-notes", "todo"]
    log = subprocess.run(
        ["git", "log", "--oneline"], cwd=tmp_path / "t" / "repo", capture_output=True, text=True
    )
    assert log.returncode == 0 and "Initial commit" in log.stdout
    again = runner.invoke(main, ["example", str(tmp_path / "t")])
    assert again.exit_code == 2 and "already exists" in again.output


def test_serve_runs_the_command_with_the_overrides_and_returns_its_exit_code() -> None:
    probe = (
        "import os, sys; assert os.environ['CODEX_HOME'] and os.environ['AGENT_FLEET_SCRIPTED_API_KEY'];"
        "assert any(a.startswith('model_provider=') for a in sys.argv); sys.exit(7)"
    )
    proc = subprocess.run(
        [sys.executable, "-m", "agent_fleet.testing", "serve", "--", sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 7, proc.stderr
    assert "scripted model at http://127.0.0.1:" in proc.stderr


def test_serve_a_missing_command_is_a_usage_error() -> None:
    result = CliRunner().invoke(main, ["serve", "--", "/nonexistent/agent-fleet"])
    assert result.exit_code == 2 and "cannot run" in result.output


def test_serve_without_a_command_prints_the_wiring_and_stops_on_ctrl_c() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_fleet.testing", "serve"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(5)]
        assert lines[0].startswith("export CODEX_HOME=")
        assert lines[1].startswith("export TMPDIR=") and lines[1].strip().endswith("codex-home-tmp")
        assert lines[2] == "export AGENT_FLEET_SCRIPTED_API_KEY=scripted-dummy-key\n"
        assert lines[3].startswith("# add to agent-fleet run / batch")
        flags = shlex.split(lines[4])
        assert flags[:2] == ["-c", 'model_provider="scripted"']
        home = lines[0].strip().split("=", 1)[1]
        assert Path(home).is_dir()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert not Path(home).exists()  # the temporary CODEX_HOME goes with the server
    finally:
        proc.kill()
        proc.wait()
