from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.codex import CodexOptions
from agent_fleet.testing import CodexTestEnv

from ._git import git


@pytest.fixture
def codex_options(codex_env: CodexTestEnv) -> CodexOptions:
    """Options for a provider whose codex child talks to the scripted model server."""
    return CodexOptions(config=dict(codex_env.config), env=dict(codex_env.env))


@pytest.fixture
def staged_work(tmp_path: Path) -> Path:
    """A repository with one commit and uncommitted work (``work.txt``, staged) that a `git reset --hard`
    would destroy."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "init")
    (repo / "work.txt").write_text("uncommitted change\n")
    git(repo, "add", "work.txt")
    return repo
