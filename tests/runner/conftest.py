from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_fleet.codex import CodexOptions
from agent_fleet.testing import CodexTestEnv


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    git(path, "config", "user.name", "agent-fleet tests")
    git(path, "config", "user.email", "tests@agent-fleet.invalid")
    git(path, "config", "commit.gpgsign", "false")
    (path / "README.md").write_text("test repo\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


@pytest.fixture
def codex_options(codex_env: CodexTestEnv) -> CodexOptions:
    return CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))


@pytest.fixture
def cli_env(codex_env: CodexTestEnv, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Point the CLI at the scripted model: returns the ``-c`` flags; sets CODEX_HOME and the key."""
    for name, value in codex_env.env.items():
        monkeypatch.setenv(name, value)
    return codex_env.codex_args()
