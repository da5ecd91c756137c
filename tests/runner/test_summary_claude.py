"""summary.json from a Claude batch: the same questions answered for another provider."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import AnthropicReply, ScriptedAnthropicServer, scripted_claude_env

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "summary.schema.json").read_text())


@pytest.mark.e2e
def test_claude_batch_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "c1", "prompt": "write the proof", "cwd": str(work)}) + "\n")
    out = tmp_path / "out"
    with ScriptedAnthropicServer(
        [
            AnthropicReply.bash("echo from-claude > proof.txt"),
            AnthropicReply.bash("git reset --hard"),
            AnthropicReply.text("all done"),
        ]
    ) as server:
        for key, value in scripted_claude_env(server, tmp_path / "claude-home").items():
            monkeypatch.setenv(key, value)
        result = CliRunner().invoke(
            cli, ["batch", str(tasks), "--provider", "claude", "--out", str(out)], catch_exceptions=False
        )
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "summary.json").read_text())
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    (task,) = summary["tasks"]
    assert task["provider"] == "claude" and task["model"], "the model Claude Code reported at init"
    assert task["final_message"] == "all done" and task["prompt"] == "write the proof"
    assert [c["command"] for c in task["commands"]] == ["echo from-claude > proof.txt", "git reset --hard"]
    # Claude Code reports no exit codes, only whether a tool call completed.
    assert [c["status"] for c in task["commands"]] == ["completed", "declined"]
    assert [d["rule"] for d in task["declines"]] == ["git-reset-hard"]
    assert task["tokens"] is not None and task["tokens"]["input"] > 0
    assert (out / "report.html").is_file()
