"""``agent-fleet run`` and ``batch`` in a real terminal (tmux), against the scripted model (issue 33):
``run`` shows what the agent said; ``run --default-approval ask`` asks the person and applies the
answer; the batch ends with one table with totals and the failed gate's last lines."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from agent_fleet.testing import CodexTestEnv, ScriptedModelServer, Text

from .scripted import ScriptedAgent, run
from .terminal import Terminal, terminal, until

__all__ = ["terminal"]  # the fixture

pytestmark = pytest.mark.e2e

SCRIPT = Path(sys.executable).parent / "agent-fleet"
FINAL = "All done: the greeting is in place.\nIt says hello in two languages."


def _run(prompt: str, cwd: Path, codex_env: CodexTestEnv, *extra: str) -> list[str]:
    return [str(SCRIPT), "run", prompt, "-C", str(cwd), *extra, *codex_env.codex_args()]


def test_run_shows_what_the_agent_said(
    terminal: Terminal, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, repo: Path
) -> None:
    scripted_model.responder = ScriptedAgent({"msg": [[run("echo hello > greeting.txt"), Text(text=FINAL)]]})
    terminal.start(_run("[task:msg] write a greeting", repo, codex_env), codex_env.full_env(), width=90)
    assert terminal.wait_exit() == 0, terminal.scrollback()
    out = terminal.scrollback()
    # the whole final message, above the result line, its second line under its first
    assert "agent: All done: the greeting is in place." in out, out
    assert "\n  It says hello in two languages." in out, out
    assert "$ echo hello > greeting.txt" in out
    assert out.index("agent: All done") < out.index("succeeded (")
    assert (repo / "greeting.txt").read_text() == "hello\n"


def test_run_asks_the_person_and_applies_the_answer(
    terminal: Terminal, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, repo: Path
) -> None:
    scripted_model.responder = ScriptedAgent(
        {
            "ask": [
                [
                    run("touch allowed-marker"),
                    run("touch declined-marker"),
                    run("touch session-marker"),
                    Text(text="finished asking"),
                ]
            ]
        }
    )
    command = _run("[task:ask] touch things", repo, codex_env, "--default-approval", "ask")
    terminal.start(command, codex_env.full_env(), width=100, height=30)

    def asked(what: str) -> bool:
        screen = "\n".join(terminal.screen())
        return "approve?" in screen and f"$ {what}" in screen and "[s] allow for this session" in screen

    until("the first question", lambda: asked("touch allowed-marker"))
    terminal.keys("y")
    until("the second question", lambda: asked("touch declined-marker"))
    terminal.keys("n")
    until("the third question", lambda: asked("touch session-marker"))
    terminal.keys("s")
    assert terminal.wait_exit() == 0, terminal.scrollback()
    out = terminal.scrollback()
    assert (repo / "allowed-marker").exists() and (repo / "session-marker").exists()
    assert not (repo / "declined-marker").exists(), "a declined command ran"
    assert "you allowed once: $ touch allowed-marker" in out
    assert "you declined: $ touch declined-marker" in out
    assert "you allowed for this session: $ touch session-marker" in out
    assert "declined: touch declined-marker (terminal-decline" in out
    assert "agent: finished asking" in out


def test_ask_where_nobody_can_answer_is_a_usage_error(
    codex_env: CodexTestEnv, repo: Path, tmp_path: Path
) -> None:
    import subprocess

    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "go"}) + "\n")
    env = codex_env.full_env()
    for argv, expect in (
        (_run("go", repo, codex_env, "--default-approval", "ask"), "needs a person at a terminal"),
        (
            [str(SCRIPT), "batch", str(tasks), "--out", str(tmp_path / "out"), "--default-approval", "ask"],
            "a batch without --server has nobody to ask",
        ),
    ):
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=60
        )
        assert done.returncode == 2, done.stderr
        assert (
            expect in done.stderr
            and "--server URL" in done.stderr
            and "--default-approval deny" in done.stderr
        )
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists(), "nothing was started"


def test_the_batch_ends_with_one_table_with_totals_and_the_failed_gates_last_lines(
    terminal: Terminal, scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    later = [f"later-{n}" for n in range(3)]
    scripted_model.responder = ScriptedAgent(
        {
            "good": [[run("touch ok.txt && sleep 4")]],
            "bad": [[run("echo no ok file here")]],
            **{name: [[run("touch ok.txt")]] for name in later},
        }
    )
    lines = [{"id": name, "prompt": f"[task:{name}] go", "cwd": name} for name in ("good", "bad", *later)]
    for line in lines:
        (tmp_path / str(line["cwd"])).mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = "echo 'FAILED tests/test_app.py::test_greeting'; echo 'tests: 2 failed'"
    gate = f"test -f ok.txt || {{ {report}; exit 1; }}"
    out = tmp_path / "out"
    command = [
        str(SCRIPT), "batch", str(tasks), "--out", str(out), "-j", "1", "--gate-cmd", gate,
        "--max-followups", "0", *codex_env.codex_args(),
    ]  # fmt: skip
    terminal.start(command, codex_env.full_env(), width=120, height=30)
    # while the first task runs, the next ones are shown queued
    until(
        "the queued tasks in the view",
        lambda: " queued " in " ".join(terminal.screen()) and "later-0" in " ".join(terminal.screen()),
    )
    assert terminal.wait_exit(120) == 1, terminal.scrollback()
    screen = "\n".join(terminal.screen())
    text = terminal.scrollback()
    assert text.count("agent-fleet batch") == 1, "one final table, not two: " + text
    header = next(line for line in text.splitlines() if re.match(r"\s*task\s+status", line))
    assert "follow-ups" in header and "tokens" in header
    total = next(line for line in text.splitlines() if line.lstrip().startswith("total 5"))
    assert "4/5 ok" in total and "4 succeeded" in total and "1 failed" in total, total
    assert "failed gates, the last lines of their output" in screen
    assert "tests: 2 failed" in screen and "FAILED tests/test_app.py::test_greeting" in screen
    page = next(line for line in screen.splitlines() if line.startswith("report: "))
    assert page == f"report: {(out / 'report.html').resolve()}"
    assert not re.search(r"^running \d", text, re.MULTILINE), "the live view's header was left behind"
