"""A scratch git repository with one commit, for the demo and the offline try-out."""

from __future__ import annotations

import subprocess
from pathlib import Path

__all__ = ["make_repo"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True)


def make_repo(repo: Path, *, who: str) -> None:
    """Create ``repo`` (it must not exist): ``git init``, an identity of its own (``agent-fleet <who>``,
    so no global git configuration is needed, and unsigned commits), a README and an initial commit."""
    repo.mkdir(parents=True)
    _git(repo, "init", "-q")
    for key, value in (
        ("user.name", f"agent-fleet {who}"),
        ("user.email", f"{who.replace(' ', '-')}@agent-fleet.invalid"),
        ("commit.gpgsign", "false"),
    ):
        _git(repo, "config", key, value)
    (repo / "README.md").write_text(f"# {who} repository\n", encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "Initial commit")
