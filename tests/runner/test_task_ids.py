"""Task ids name files and branches: ``run_batch`` (the library) refuses unsafe ones before any work."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agent_fleet import Spec
from agent_fleet.errors import UsageError
from agent_fleet.runner import Task
from agent_fleet.runner.batch import BatchTask, parse_tasks, run_batch, task_id_problem
from agent_fleet.runner.ray_backend import run_batch_ray

BAD = [
    "a..b",
    "x.lock",
    "abc\n",
    "a/b",
    "../up",
    "..",
    "a\x00b",
    "tab\tid",
    "-flag",
    ".hidden",
    "end.",
    "",
    "é",
]
GOOD = ["fix-1", "t0", "A.b_c-d", "v1.2.3", "lockx", "x.locked"]


@pytest.mark.parametrize("task_id", BAD)
def test_unsafe_ids_have_a_problem(task_id: str) -> None:
    assert task_id_problem(task_id) is not None


@pytest.mark.parametrize("task_id", GOOD)
def test_ordinary_ids_have_none(task_id: str, tmp_path: Path) -> None:
    assert task_id_problem(task_id) is None
    # ... and git agrees they make a branch name.
    done = subprocess.run(
        ["git", "check-ref-format", "--branch", f"agent-fleet/{task_id}"], capture_output=True
    )
    assert done.returncode == 0


@pytest.mark.parametrize("task_id", [b for b in BAD if b and "\x00" not in b])
def test_git_would_refuse_or_the_path_would_escape(task_id: str) -> None:
    """The list above is not arbitrary: each one is refused by git or escapes (or hides in) a directory."""
    done = subprocess.run(
        ["git", "check-ref-format", "--branch", f"agent-fleet/{task_id}"], capture_output=True
    )
    assert done.returncode != 0 or "/" in task_id or task_id.startswith(("-", ".")) or not task_id.isascii()


@pytest.mark.parametrize("task_id", BAD)
async def test_run_batch_rejects_before_touching_anything(task_id: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    template = Task(id="t", spec=Spec(prompt="p", cwd=str(tmp_path)))
    with pytest.raises(UsageError, match="task id"):
        await run_batch([BatchTask(id=task_id, prompt="p")], template=template, out_dir=out)
    with pytest.raises(UsageError, match="task id"):
        await run_batch_ray([BatchTask(id=task_id, prompt="p")], template=template, out_dir=out)
    assert not out.exists()


async def test_run_batch_rejects_a_duplicate_id(tmp_path: Path) -> None:
    template = Task(id="t", spec=Spec(prompt="p", cwd=str(tmp_path)))
    tasks = [BatchTask(id="same", prompt="p"), BatchTask(id="same", prompt="q")]
    with pytest.raises(UsageError, match="used twice"):
        await run_batch(tasks, template=template, out_dir=tmp_path / "out")


def test_the_tasks_file_parser_uses_the_same_rule(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"line 1: id 'a\.\.b'"):
        parse_tasks('{"id": "a..b", "prompt": "p"}', base_dir=tmp_path)
    with pytest.raises(UsageError, match="line 1"):
        parse_tasks('{"id": "x.lock", "prompt": "p"}', base_dir=tmp_path)
