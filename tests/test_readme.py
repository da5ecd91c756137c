"""The README's offline try-out commands work exactly as written (like a doctest)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## Try `run` and `batch` offline"


def tryout_commands() -> list[str]:
    """The command lines of the first ``sh`` block under the try-out heading."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert HEADING in text
    section = text.split(HEADING, 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no sh code block under the try-out heading"
    return [line for line in match.group(1).splitlines() if line.strip()]


def test_the_tryout_block_is_what_the_test_expects() -> None:
    commands = tryout_commands()
    assert len(commands) == 3
    assert all(c.startswith(".venv/bin/python -m agent_fleet.testing ") for c in commands)
    assert "agent-fleet run " in commands[1] and "agent-fleet batch " in commands[2]


def test_the_docs_site_shows_the_same_commands() -> None:
    for page in ("getting-started.md", "how-to/offline.md"):
        text = (ROOT / "docs" / page).read_text(encoding="utf-8")
        assert "\n".join(tryout_commands()) in text, f"docs/{page} drifted from the README's try-out"


@pytest.mark.e2e
def test_readme_tryout_runs_as_written(tmp_path: Path) -> None:
    # A fresh directory with the README's `.venv` (the one running this test), so `tryout/` lands there.
    venv = Path(sys.prefix)
    assert (venv / "bin" / "agent-fleet").is_file(), f"agent-fleet not installed in {venv}"
    (tmp_path / ".venv").symlink_to(venv, target_is_directory=True)
    env = {k: v for k, v in os.environ.items() if k not in ("CODEX_HOME", "OPENAI_API_KEY", "CODEX_API_KEY")}
    for command in tryout_commands():
        proc = subprocess.run(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, f"{command}\n{proc.stdout}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr

    repo = tmp_path / "tryout" / "repo"
    log = subprocess.run(["git", "log", "--oneline"], cwd=repo, capture_output=True, text=True, check=True)
    assert "Add add-a-greeting-and.md" in log.stdout  # the `run` committed on the checked-out branch
    summary = json.loads((tmp_path / "tryout" / "runs" / "summary.json").read_text(encoding="utf-8"))
    tasks = {t["task_id"]: t for t in summary["tasks"]}
    assert set(tasks) == {"greeting", "release-notes", "todo"}
    assert {t["status"] for t in tasks.values()} == {"succeeded"}
    assert tasks["todo"]["followups"] == 1  # the gate sent the forgetful agent back once
    assert {d["rule"] for t in tasks.values() for d in t["declines"]} == {"git-reset-hard"}
    assert (tmp_path / "tryout" / "runs" / "report.html").is_file()
    branches = subprocess.run(
        ["git", "branch", "--list", "agent-fleet/*"], cwd=repo, capture_output=True, text=True, check=True
    )
    assert len(branches.stdout.split()) == 3
