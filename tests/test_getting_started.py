"""Getting started's "From Python" runs as written (like a doctest), against the scripted model: the
task runs, its final message and files changed are printed, the denied command never runs."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from agent_fleet.testing import CodexTestEnv, Reply, ScriptedModelServer, apply_patch, exec_command

ROOT = Path(__file__).resolve().parents[1]


def python_example() -> str:
    text = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    section = text.split("## From Python", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match is not None, "no python block under From Python"
    return match.group(1)


def test_the_example_is_short_and_denies_a_command() -> None:
    code = python_example()
    lines = [line for line in code.splitlines() if line.strip() and not line.startswith(("import", "from"))]
    assert len(lines) <= 10, code
    assert "run_task(" in code and "disallow_patterns" in code and "files_changed" in code


def _toml(config: dict[str, object]) -> str:
    """The scripted model's codex config as a config.toml (the example uses codex's own config)."""
    out, tables = [], []
    for key, value in config.items():
        if isinstance(value, dict):
            body = "\n".join(f"{k} = {json.dumps(v)}" for k, v in value.items())
            tables.append(f"[{key}]\n{body}\n")
        else:
            out.append(f"{key} = {json.dumps(value)}")
    return "\n".join(out) + "\n\n" + "\n".join(tables)


@pytest.mark.e2e
def test_from_python_runs_as_written(
    scripted_model: ScriptedModelServer, codex_env: CodexTestEnv, tmp_path: Path
) -> None:
    (codex_env.codex_home / "config.toml").write_text(_toml(dict(codex_env.config)))
    work = tmp_path / "project"
    (work / "build").mkdir(parents=True)
    scripted_model.enqueue(
        Reply(items=(apply_patch("*** Begin Patch\n*** Add File: fixed.py\n+x = 1\n*** End Patch\n"),)),
        Reply(items=(exec_command("rm -rf build"),)),
        Reply.text("Fixed: fixed.py holds the fix. (My rm -rf was declined.)"),
    )
    script = tmp_path / "example.py"
    script.write_text(python_example())
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=work,
        # a user has a credential; the scripted provider of config.toml takes its own key
        env={**codex_env.full_env(), "OPENAI_API_KEY": "sk-not-used-by-the-scripted-provider"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "succeeded Fixed: fixed.py holds the fix. (My rm -rf was declined.)",
        "changed: fixed.py",
    ]
    assert (work / "build").is_dir(), "the denied command ran"
    assert (work / "fixed.py").read_text() == "x = 1\n"
