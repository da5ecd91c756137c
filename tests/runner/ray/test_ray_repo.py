"""What an attempt may change, without a cluster: in a shared repository an attempt works on its own
branch and only the driver moves the task's branch; a push is of the accepted commit, from any node."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agent_fleet.errors import UsageError
from agent_fleet.runner import Redactor
from agent_fleet.runner._git import GitError
from agent_fleet.runner._ray_pool import ActorPool, where
from agent_fleet.runner._ray_repo import NodeRepos, publish_branch

from ..conftest import git, make_repo

TASK = "agent-fleet/t1"


def _commit_on(worktree: Path, name: str) -> str:
    (worktree / f"{name}.txt").write_text(name)
    git(worktree, "add", "-A")
    git(worktree, "commit", "-q", "-m", name)
    return git(worktree, "rev-parse", "HEAD")


async def test_an_abandoned_attempt_never_moves_the_tasks_branch(repo: Path, tmp_path: Path) -> None:
    start = git(repo, "rev-parse", "HEAD")
    first = NodeRepos(tmp_path / "node-a", Redactor())
    second = NodeRepos(tmp_path / "node-b", Redactor())
    dead_tree, live_tree = tmp_path / "node-a" / "t1", tmp_path / "node-b" / "t1"
    base = await first.add_attempt_worktree(
        repo, dead_tree, TASK, "agent-fleet-attempts/t1/r.1", start=start, reuse=False
    )
    assert base is None  # a new task: from the start commit
    await second.add_attempt_worktree(
        repo, live_tree, TASK, "agent-fleet-attempts/t1/r.2", start=start, reuse=False
    )
    accepted = _commit_on(live_tree, "accepted")
    await publish_branch(repo, TASK, accepted, base=None, attempt_branch=None)
    # The abandoned attempt goes on and commits: only its own branch moves.
    abandoned = _commit_on(dead_tree, "abandoned")
    assert git(repo, "rev-parse", TASK) == accepted
    assert git(repo, "rev-parse", "agent-fleet-attempts/t1/r.1") == abandoned
    # Were it published after all (a stale attempt), the task's branch is not where it started: refused.
    with pytest.raises(GitError):
        await publish_branch(repo, TASK, abandoned, base=None, attempt_branch=None)
    assert git(repo, "rev-parse", TASK) == accepted
    # Publishing the accepted commit again changes nothing (a retried publish).
    await publish_branch(repo, TASK, accepted, base=None, attempt_branch=None)
    assert git(repo, "rev-parse", TASK) == accepted


async def test_a_new_task_whose_branch_exists_is_refused_and_a_resumed_one_continues_it(
    repo: Path, tmp_path: Path
) -> None:
    start = git(repo, "rev-parse", "HEAD")
    git(repo, "branch", TASK)
    node = NodeRepos(tmp_path / "node", Redactor())
    with pytest.raises(GitError, match="already exists"):
        await node.add_attempt_worktree(
            repo, tmp_path / "w1", TASK, "agent-fleet-attempts/t1/r.1", start=start, reuse=False
        )
    # Resumed: the attempt starts from the task's branch, and publishing moves it forward from there.
    earlier = _commit_on(_worktree(repo, tmp_path / "earlier", TASK), "earlier run")
    git(repo, "worktree", "remove", str(tmp_path / "earlier"))
    base = await node.add_attempt_worktree(
        repo, tmp_path / "w2", TASK, "agent-fleet-attempts/t1/r.2", start=start, reuse=True
    )
    assert base == earlier
    tip = _commit_on(tmp_path / "w2", "resumed run")
    git(repo, "worktree", "remove", str(tmp_path / "w2"))
    await publish_branch(repo, TASK, tip, base=base, attempt_branch="agent-fleet-attempts/t1/r.2")
    assert git(repo, "log", "--format=%s", TASK).splitlines() == ["resumed run", "earlier run", "initial"]
    assert git(repo, "branch", "--list", "agent-fleet-attempts/*") == ""  # the accepted attempt's is gone


def _worktree(repo: Path, path: Path, branch: str) -> Path:
    git(repo, "worktree", "add", "-q", str(path), branch)
    return path


async def test_a_push_of_the_accepted_commit_from_another_node_uses_the_bundle(tmp_path: Path) -> None:
    seed = make_repo(tmp_path / "seed")
    start = git(seed, "rev-parse", "HEAD")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(seed), str(origin))
    url = f"file://{origin}"
    ran_it = NodeRepos(tmp_path / "ran", Redactor())
    clone = await ran_it.clone(url, start)
    await ran_it.add_worktree(
        clone, tmp_path / "wt", TASK, start=start, reset=False, reuse=False, stale=None, earlier=None
    )
    tip = _commit_on(tmp_path / "wt", "work")
    bundle = await ran_it.bundle(clone, TASK, start)
    assert bundle is not None
    # The node that ran it is lost: another node, which never had the commit, pushes it from the bundle.
    other = NodeRepos(tmp_path / "other", Redactor())
    pushed = await other.push_tip(url, TASK, start, tip, bundle)
    assert pushed.pushed and pushed.commit == tip, pushed
    assert git(origin, "rev-parse", TASK) == tip
    # A push cut short is tried again: the remote has the commit already, so it succeeds.
    again = await ran_it.push_tip(url, TASK, start, tip, None)
    assert again.pushed, again
    # A different commit would not be forced over it.
    git(tmp_path / "wt", "reset", "-q", "--hard", start)
    other_tip = _commit_on(tmp_path / "wt", "something else")
    refused = await ran_it.push_tip(url, TASK, start, other_tip, None)
    assert not refused.pushed and "never force-pushes" in str(refused.error)
    assert git(origin, "rev-parse", TASK) == tip


def _pool(exclude: list[str]) -> ActorPool:
    return ActorPool(
        None,
        batch_id="b",
        jobs=1,
        provider_name="codex",
        options=None,
        start_timeout=1.0,
        work_root=None,
        fence_timeout=10.0,
        exclude=exclude,
    )


NODES: list[dict[str, Any]] = [
    {
        "NodeID": "aaaaaaaa1111",
        "NodeManagerHostname": "gpu-1",
        "NodeManagerAddress": "10.0.0.1",
        "Alive": True,
    },
    {
        "NodeID": "bbbbbbbb2222",
        "NodeManagerHostname": "gpu-2",
        "NodeManagerAddress": "10.0.0.2",
        "Alive": True,
    },
    {
        "NodeID": "cccccccc3333",
        "NodeManagerHostname": "gpu-3",
        "NodeManagerAddress": "10.0.0.3",
        "Alive": True,
    },
    {
        "NodeID": "dddddddd4444",
        "NodeManagerHostname": "gpu-4",
        "NodeManagerAddress": "10.0.0.4",
        "Alive": False,
    },
]


def test_exclude_node_matches_an_id_prefix_a_host_name_or_an_address() -> None:
    pool = _pool(["aaaaaa", "gpu-2"])
    assert [n["NodeID"] for n in pool._leave_out(NODES)] == ["cccccccc3333"]
    assert [(e.hostname, e.reason) for e in pool.excluded] == [
        ("gpu-1", "left out by --exclude-node"),
        ("gpu-2", "left out by --exclude-node"),
    ]
    assert [n["NodeID"] for n in _pool(["10.0.0.3"])._leave_out(NODES)] == ["aaaaaaaa1111", "bbbbbbbb2222"]
    with pytest.raises(UsageError, match="'gpu-9' names no Ray node"):
        _pool(["gpu-9"])._leave_out(NODES)
    with pytest.raises(UsageError, match="names no Ray node"):
        _pool(["aaa"])._leave_out(NODES)  # a prefix too short to name a node
    # A node gone since (a resumed batch keeps its --exclude-node): nothing to leave out, no error.
    assert len(_pool(["gpu-4"])._leave_out(NODES)) == 3
    with pytest.raises(UsageError, match="leaves no Ray node"):
        _pool(["gpu-1", "gpu-2", "gpu-3"])._leave_out(NODES)


def test_a_node_is_named_first_in_its_messages() -> None:
    assert where("aaaaaaaa1111bbbb", "gpu-1") == "Ray node gpu-1 (aaaaaaaa1111)"
    assert where("aaaaaaaa1111bbbb") == "Ray node (aaaaaaaa1111)"
