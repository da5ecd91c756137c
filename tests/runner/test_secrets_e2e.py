"""Secrets never reach what ``agent-fleet batch`` writes: real codex, scripted model. The agent prints
every secret shape (a command's output, a command line, its final message streamed word by word) and
the gate prints them again; the ``--json`` stream, the transcript and ``summary.json`` hold none of
them, and every ordinary look-alike comes through unchanged."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import ScriptedModelServer, Text

from ..secrets_corpus import LOOKALIKES, SECRETS
from .scripted import ScriptedAgent, run

pytestmark = pytest.mark.e2e


def test_batch_json_transcript_and_summary_hold_no_secret(
    repo: Path, scripted_model: ScriptedModelServer, cli_env: list[str], tmp_path: Path
) -> None:
    looks = "\n".join(LOOKALIKES)
    secrets = [text for name, (text, _) in SECRETS.items() if name != "pem_cut"]
    every = "\n".join([*secrets, SECRETS["pem_cut"][0]])  # a cut-off key block runs to the end: last
    (repo / "corpus.txt").write_text(looks + "\n" + every + "\n")
    one_line = " ".join(shlex.quote(text) for text in secrets if "\n" not in text)
    scripted_model.responder = ScriptedAgent(
        {"s": [[run("cat corpus.txt"), run(f"true {one_line}"), Text(text=looks + "\n" + every)]]}
    )
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"id": "s", "prompt": "[task:s] show the corpus", "gate_cmd": "cat corpus.txt; exit 1"})
    )
    out = tmp_path / "out"
    args = ["batch", str(tasks), "--cwd", str(repo), "--json", "--out", str(out), "--max-followups", "0"]
    result = CliRunner().invoke(cli, [*args, *cli_env], catch_exceptions=False)
    assert result.exit_code == 1, result.output  # the gate failed, as scripted
    written = {
        "--json": result.stdout,
        "transcript": (out / "s.jsonl").read_text(),
        "summary": (out / "summary.json").read_text(),
    }
    for where, text in written.items():
        # The file as written, and its strings decoded (JSON escapes backslashes and quotes).
        decoded = [json.loads(line) for line in text.splitlines()] if where != "summary" else json.loads(text)
        strings = json.dumps(decoded, ensure_ascii=False).encode().decode("unicode_escape", errors="replace")
        for name, (_, secret) in SECRETS.items():
            assert secret not in text and secret not in strings, (where, name)
    for where in ("--json", "transcript"):
        records = [json.loads(line) for line in written[where].splitlines()]
        outputs = "\n".join(r.get("output", "") for r in records if r["type"] == "ToolResult")
        assert all(look in outputs for look in LOOKALIKES), where  # the corpus did come through
        message = next(r["text"] for r in records if r["type"] == "AssistantMessage")
        assert message.startswith(looks), where
        deltas = "".join(r["text"] for r in records if r["type"] == "TextDelta")
        assert deltas.startswith(looks), where
