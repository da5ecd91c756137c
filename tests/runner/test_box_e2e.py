"""Issue #27 on the runner side, end to end (real codex, scripted model): the record lives outside the
repository, and tasks sharing a working tree are told so and credited only with their own work."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.testing import ScriptedModelServer

from .conftest import git
from .scripted import ScriptedAgent, commit, write_file

pytestmark = pytest.mark.e2e


def _tasks(path: Path, *lines: dict[str, object]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def _committed_paths(repo: Path) -> set[str]:
    """Every path any commit of any branch ever touched."""
    return {p for p in git(repo, "log", "--all", "--name-only", "--format=").splitlines() if p}


def test_a_batch_run_from_a_repository_leaves_its_record_outside_it(
    repo: Path,
    scripted_model: ScriptedModelServer,
    cli_env: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    scripted_model.responder = ScriptedAgent({"t1": [[write_file("work.txt", "done"), commit("the work")]]})
    tasks = _tasks(
        tmp_path / "tasks.jsonl",
        {"id": "t1", "prompt": "[task:t1] write work.txt, git add -A and commit", "require_commit": True},
    )
    monkeypatch.chdir(repo)  # no --out, no --cwd: the operator runs it from the repository
    result = CliRunner().invoke(cli, ["batch", str(tasks), *cli_env], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0].startswith("record: ") and lines[-1] == lines[0], "printed at start and in the final line"
    record = Path(lines[0].removeprefix("record: "))
    assert record.parent == state / "agent-fleet" / "batches"
    summary = json.loads((record / "summary.json").read_text())
    assert [t["status"] for t in summary["tasks"]] == ["succeeded"]
    assert (record / "t1.jsonl").is_file() and (record / "batch.db").is_file()
    # The agent's `git add -A && git commit` took its work and nothing of the batch's.
    assert git(repo, "log", "-1", "--format=%s") == "the work"
    assert _committed_paths(repo) == {"README.md", "work.txt"}
    assert git(repo, "status", "--porcelain", "--ignored") == "", "nothing written into the tree"
    assert summary["tasks"][0]["files_changed"] == ["work.txt"]
    assert summary["tasks"][0]["shared_tree"] is False
    # The task's box (its temporary directory) is gone with the batch.
    assert not any((state / "agent-fleet" / "boxes").iterdir())


def test_an_out_inside_the_tree_is_refused_unless_git_ignores_it(
    repo: Path,
    scripted_model: ScriptedModelServer,
    cli_env: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    scripted_model.responder = ScriptedAgent({"t1": [[write_file("work.txt", "done"), commit("the work")]]})
    tasks = _tasks(tmp_path / "tasks.jsonl", {"id": "t1", "prompt": "[task:t1] work and commit"})
    args = ["batch", str(tasks), "--cwd", str(repo), *cli_env]
    refused = CliRunner().invoke(cli, [*args, "--out", str(repo / "runs")], catch_exceptions=False)
    assert refused.exit_code == 2, refused.output
    assert "inside the git working tree" in refused.output and "have git ignore it" in refused.output
    assert not (repo / "runs").exists() and not scripted_model.requests, "refused before anything ran"
    (repo / ".gitignore").write_text("runs/\n")
    git(repo, "add", ".gitignore")
    git(repo, "commit", "-q", "-m", "ignore the batch records")
    done = CliRunner().invoke(cli, [*args, "--out", str(repo / "runs" / "b1")], catch_exceptions=False)
    assert done.exit_code == 0, done.output
    assert (repo / "runs" / "b1" / "summary.json").is_file()
    assert git(repo, "status", "--porcelain") == ""
    assert _committed_paths(repo) == {"README.md", ".gitignore", "work.txt"}


def test_tasks_sharing_a_tree_are_warned_and_credited_with_their_own_files_only(
    repo: Path,
    scripted_model: ScriptedModelServer,
    cli_env: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    ids = ["a", "b", "c"]
    scripted_model.responder = ScriptedAgent({i: [[write_file(f"{i}.txt", f"work of {i}")]] for i in ids})
    tasks = _tasks(tmp_path / "tasks.jsonl", *({"id": i, "prompt": f"[task:{i}] write {i}.txt"} for i in ids))
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["batch", str(tasks), "-j", "3", "--cwd", str(repo), "--out", str(out), *cli_env]
    )
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.output.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1, result.output
    assert re.search(rf"3 tasks share the working tree {re.escape(str(repo.resolve()))}", warnings[0])
    first_task_line = next(i for i, line in enumerate(result.output.splitlines()) if line.startswith("["))
    assert result.output.splitlines().index(warnings[0]) < first_task_line, "warned at start"
    summary = json.loads((out / "summary.json").read_text())
    assert sorted(git(repo, "status", "--porcelain").split()) == ["??", "??", "??", "a.txt", "b.txt", "c.txt"]
    for task in summary["tasks"]:
        mine = f"{task['task_id']}.txt"
        assert task["shared_tree"] is True
        assert task["files_changed"] == [mine], task["files_changed"]
        assert mine in task["diff"] and all(f"{o}.txt" not in task["diff"] for o in ids if f"{o}.txt" != mine)
    report = (out / "report.html").read_text()
    assert "shared its working tree with other tasks" in report
    transcript = [json.loads(line) for line in (out / "a.jsonl").read_text().splitlines()]
    assert any(r.get("subtype") == "runner.shared_tree" and r["data"]["tasks"] == 3 for r in transcript)
