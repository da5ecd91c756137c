"""Containment of file changes, on a real temporary tree."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest

from agent_fleet.contract import PermissionConfig
from agent_fleet.policy import ApprovalPolicy, ApprovalRequest, check_paths


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    work = tmp_path / "work"
    (work / "src").mkdir(parents=True)
    (work / "src" / "a.py").write_text("x = 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s\n")
    extra = tmp_path / "extra"
    extra.mkdir()
    (work / "escape").symlink_to(outside)
    (work / "escape_file").symlink_to(outside / "secret")
    (work / "dangling").symlink_to(outside / "not-yet")
    (work / "inner_link").symlink_to(work / "src")
    (tmp_path / "link_to_work").symlink_to(work)
    return {"work": work, "outside": outside, "extra": extra, "root": tmp_path}


def _decide(
    paths: list[str],
    cwd: Path | str | None,
    roots: Sequence[str] = (),
    default: Literal["allow", "deny"] = "allow",
) -> tuple[str, str | None]:
    policy = ApprovalPolicy(PermissionConfig(default=default))
    request = ApprovalRequest(kind="file_change", paths=paths, cwd=cwd, writable_roots=roots)
    decision = policy.evaluate(request)
    return decision.action, decision.rule


@pytest.mark.parametrize(
    ("paths", "expected"),
    [
        (["src/a.py"], ("allow_for_session", None)),
        (["src/new.py", "README.md"], ("allow_for_session", None)),
        (["src/../src/a.py"], ("allow_for_session", None)),
        (["new/dir/deep/file.txt"], ("allow_for_session", None)),  # not-yet-existing subdirectories
        (["inner_link/a.py"], ("allow_for_session", None)),  # symlink that stays inside
        (["."], ("allow_for_session", None)),
        (["../outside/secret"], ("decline", "path-escape")),
        (["src/../../outside/x"], ("decline", "path-escape")),
        (["new/../../escaped"], ("decline", "path-escape")),
        (["escape/secret"], ("decline", "path-escape")),  # symlinked directory pointing outside
        (["escape_file"], ("decline", "path-escape")),  # symlinked file pointing outside
        (["dangling"], ("decline", "path-escape")),  # dangling symlink pointing outside
        (["src/a.py", "escape/x"], ("decline", "path-escape")),  # one bad path is enough
        (["/etc/passwd"], ("decline", "path-escape")),
        ([""], ("decline", "path-escape")),
        (["bad\0name"], ("decline", "path-escape")),
    ],
)
def test_containment(tree: dict[str, Path], paths: list[str], expected: tuple[str, str | None]) -> None:
    assert _decide(paths, tree["work"]) == expected


def test_absolute_paths(tree: dict[str, Path]) -> None:
    work, extra, outside = tree["work"], tree["extra"], tree["outside"]
    assert _decide([str(work / "src" / "a.py")], work) == ("allow_for_session", None)
    assert _decide([str(outside / "x")], work) == ("decline", "path-escape")
    assert _decide([str(extra / "x")], work, [str(extra)]) == ("allow_for_session", None)
    assert _decide([str(extra / "x")], work, ["../extra"]) == ("allow_for_session", None)
    assert _decide([str(extra) + "-sibling/x"], work, [str(extra)]) == ("decline", "path-escape")


def test_symlinked_cwd(tree: dict[str, Path]) -> None:
    linked = tree["root"] / "link_to_work"
    assert _decide(["src/a.py", "new.txt"], linked) == ("allow_for_session", None)
    assert _decide([str(linked / "src" / "a.py")], tree["work"]) == ("allow_for_session", None)
    assert _decide([str(tree["work"] / "x")], linked) == ("allow_for_session", None)
    assert _decide(["escape/secret"], linked) == ("decline", "path-escape")


def test_no_cwd(tree: dict[str, Path]) -> None:
    assert _decide(["src/a.py"], None) == ("decline", "path-escape")
    assert _decide([str(tree["extra"] / "x")], None, [str(tree["extra"])]) == ("allow_for_session", None)
    # Nothing to contain: the default decides.
    assert _decide([], None) == ("allow_for_session", None)
    assert _decide([], None, default="deny") == ("decline", "default-deny")


def test_default_deny_applies_after_containment(tree: dict[str, Path]) -> None:
    assert _decide(["src/a.py"], tree["work"], default="deny") == ("decline", "default-deny")
    assert _decide(["../x"], tree["work"], default="deny") == ("decline", "path-escape")


def test_user_patterns_do_not_apply_to_file_changes(tree: dict[str, Path]) -> None:
    policy = ApprovalPolicy(PermissionConfig(allow_patterns=("^git ",), disallow_patterns=(".*",)))
    request = ApprovalRequest(kind="file_change", paths=["src/a.py"], cwd=tree["work"])
    assert policy.evaluate(request).action == "allow_for_session"


def test_check_paths_helper(tree: dict[str, Path]) -> None:
    assert check_paths(["src/a.py"], tree["work"]) is None
    assert check_paths([], None) is None
    decision = check_paths([Path("escape") / "secret"], os.fspath(tree["work"]))
    assert decision is not None
    assert (decision.action, decision.rule) == ("decline", "path-escape")
    assert "outside" in (decision.reason or "")
