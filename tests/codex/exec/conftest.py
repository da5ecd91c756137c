"""Fixtures for the codex exec provider tests: options wired to the scripted model, and a fake codex."""

from __future__ import annotations

import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from agent_fleet.codex.options import CodexOptions
from agent_fleet.testing import CodexTestEnv

# A stand-in for the codex binary: answers --version, records argv and stdin, then prints the lines
# of $FAKE_CODEX_SCRIPT (a file of JSON lines and directives) and exits with $FAKE_CODEX_EXIT.
FAKE_CODEX = """\
import json, os, sys, time
if sys.argv[1:] == ["--version"]:
    print("codex-cli 0.163.0")
    sys.exit(0)
prompt = sys.stdin.read()
record = os.environ.get("FAKE_CODEX_RECORD")
if record:
    with open(record, "w") as f:
        json.dump({"argv": sys.argv[1:], "stdin": prompt, "cwd": os.getcwd()}, f)
with open(os.environ["FAKE_CODEX_SCRIPT"]) as f:
    lines = f.read().splitlines()
for line in lines:
    if line.startswith("@sleep "):
        time.sleep(float(line.split()[1]))
    elif line.startswith("@big "):
        sys.stdout.write("x" * int(line.split()[1]) + "\\n")
    elif line.startswith("@stderr "):
        sys.stderr.write(line[len("@stderr "):] + "\\n")
        sys.stderr.flush()
    elif line.startswith("@raw "):
        sys.stdout.write(line[len("@raw "):])
    else:
        sys.stdout.write(line.replace("$PROMPT", json.dumps(prompt)[1:-1]) + "\\n")
    sys.stdout.flush()
sys.exit(int(os.environ.get("FAKE_CODEX_EXIT", "0")))
"""


@pytest.fixture
def exec_options(codex_env: CodexTestEnv) -> CodexOptions:
    """Options for a provider whose codex children talk to the scripted model server."""
    return CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env), skip_git_repo_check=True)


FakeCodex = Callable[..., CodexOptions]


@pytest.fixture
def fake_codex(tmp_path: Path) -> FakeCodex:
    """``fake_codex(lines, exit_code=0)`` -> options running a fake codex that prints ``lines``."""
    binary = tmp_path / "fake-codex"
    binary.write_text(f"#!{sys.executable}\n{FAKE_CODEX}")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)

    def make(lines: list[str], exit_code: int = 0) -> CodexOptions:
        script = tmp_path / "fake-codex-script.txt"
        script.write_text("\n".join(lines) + "\n")
        env = {
            "FAKE_CODEX_SCRIPT": str(script),
            "FAKE_CODEX_EXIT": str(exit_code),
            "FAKE_CODEX_RECORD": str(tmp_path / "fake-codex-record.json"),
        }
        return CodexOptions(codex_bin=binary, env=env)

    return make
