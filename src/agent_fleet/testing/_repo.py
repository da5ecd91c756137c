"""What the demo and the offline try-out share: a scratch git repository with one commit, and the shell
calls their scripted agents make."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agent_fleet.testing._server import FunctionCall

__all__ = ["make_repo", "shell_call"]


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


def shell_call(cmd: str, *, escalate: bool = False) -> FunctionCall:
    """The scripted agent's ``exec_command`` call for ``cmd``; ``escalate`` asks to run it outside the
    sandbox (``workspace-write`` keeps ``.git`` read-only, so a commit needs it)."""
    # login=False: a login shell would source the user's profile, which is slow or noisy on some machines.
    args: dict[str, object] = {"cmd": cmd, "login": False}
    if escalate:
        args["sandbox_permissions"] = "require_escalated"
        args["justification"] = "git needs to write .git to commit"
    return FunctionCall(name="exec_command", arguments=args)
