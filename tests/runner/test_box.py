"""The fleet's own directories (``runner._box``): private, outside the trees the agents work in."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agent_fleet.errors import UsageError
from agent_fleet.runner import _box

from .conftest import git, make_repo


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_state_directory_follows_xdg_and_ignores_a_relative_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert _box.state_dir() == tmp_path / "state" / "agent-fleet"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    assert _box.state_dir() == tmp_path / "home" / ".local" / "state" / "agent-fleet"
    monkeypatch.delenv("XDG_STATE_HOME")
    assert _box.state_dir() == tmp_path / "home" / ".local" / "state" / "agent-fleet"


def test_private_dir_makes_0700_tightens_ours_and_refuses_links(tmp_path: Path) -> None:
    made = _box.private_dir(tmp_path / "a" / "b")
    assert made.is_dir() and _mode(made) == 0o700
    loose = tmp_path / "loose"
    loose.mkdir(mode=0o777)
    os.chmod(loose, 0o777)
    _box.private_dir(loose)
    assert _mode(loose) == 0o700
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match="symbolic link"):
        _box.private_dir(tmp_path / "link")
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError):
        _box.private_dir(tmp_path / "file")


def test_a_box_is_private_and_gives_each_task_its_own_fresh_temp_dir(tmp_path: Path) -> None:
    box = _box.Box.open(tmp_path / "boxes", "out")
    assert box.root.parent == tmp_path / "boxes" and box.root.name.startswith("out-")
    assert _mode(tmp_path / "boxes") == 0o700 and _mode(box.root) == 0o700
    one, two = box.temp_dir("t1"), box.temp_dir("t2")
    assert one != two and _mode(one) == 0o700 and _mode(two) == 0o700
    assert _mode(box.root / "tmp") == 0o700
    (one / "left.txt").write_text("scratch")
    again = box.temp_dir("t1")  # a task run again starts with an empty one
    assert again == one and not any(again.iterdir())
    wt = box.worktree("t1")
    assert wt.parent == box.root / "worktrees" and _mode(wt.parent) == 0o700
    box.drop_temp("t1")
    box.close()
    assert box.root.exists(), "t2's temp dir is still there"
    box.drop_temp("t2")
    box.close()
    assert not box.root.exists()
    assert _box.Box.reopen(str(box.root)) is None


def test_a_new_box_goes_under_the_state_dir_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    box = _box.Box.open(None, "b")
    assert box.root.parent == tmp_path / "xdg" / "agent-fleet" / "boxes"
    assert _mode(tmp_path / "xdg" / "agent-fleet") == 0o700
    record = _box.default_record_dir()
    assert record.parent == tmp_path / "xdg" / "agent-fleet" / "batches" and not record.exists()
    assert _mode(record.parent) == 0o700


async def test_the_record_may_not_lie_in_a_tree_the_agents_work_in_unless_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = make_repo(tmp_path / "repo")
    await _box.check_record_place(tmp_path / "out", [repo])  # beside it: fine
    for inside in (repo, repo / "runs", repo / "a" / "b"):
        with pytest.raises(UsageError, match="inside the git working tree"):
            await _box.check_record_place(inside, [repo])
    (repo / ".gitignore").write_text("runs/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore runs")
    await _box.check_record_place(repo / "runs", [repo])  # not made yet, and ignored
    await _box.check_record_place(repo / "runs" / "b1", [repo])
    with pytest.raises(UsageError):
        await _box.check_record_place(repo, [repo])  # the tree itself can never be ignored
    monkeypatch.chdir(repo)
    with pytest.raises(UsageError):  # a relative path is taken from the current directory
        await _box.check_record_place(Path("elsewhere"), [repo])


def test_the_box_may_not_lie_in_a_working_tree(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    _box.check_outside(tmp_path / "boxes", [repo], "the box")
    with pytest.raises(UsageError, match="the box"):
        _box.check_outside(repo / ".state" / "boxes", [repo], "the box")


async def test_ray_tasks_are_grouped_by_the_tree_they_share(tmp_path: Path) -> None:
    from agent_fleet.runner._admit import ray_trees
    from agent_fleet.runner.batch import BatchTask

    repo = make_repo(tmp_path / "repo")
    (repo / "sub").mkdir()
    plain = tmp_path / "plain"
    plain.mkdir()
    tasks = [
        BatchTask(id="a", prompt="p"),  # the default directory: the repository
        BatchTask(id="b", prompt="p", cwd=repo / "sub"),
        BatchTask(id="c", prompt="p", cwd=plain),
    ]
    trees, repos = await ray_trees(tasks, repo)
    assert trees == {repo.resolve(): ["a", "b"], plain.absolute(): ["c"]}
    assert repos == {repo.resolve()}
