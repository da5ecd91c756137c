"""The Ray backend without a cluster: the missing extra, argument checks, redaction on the node."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet import Plan, PlanStep, Result, Spec, System, TokenUsage
from agent_fleet.cli import cli
from agent_fleet.errors import ProviderUnavailable, UsageError
from agent_fleet.runner import Redactor, Task
from agent_fleet.runner._ray_node import redact_event
from agent_fleet.runner.batch import BatchTask, run_batch

from ..conftest import make_repo


def _template(repo: Path) -> Task:
    return Task(spec=Spec(prompt="-", cwd=repo))


async def test_without_ray_the_error_names_the_extra(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what an installation without the extra sees
    with pytest.raises(ProviderUnavailable, match=r"agent-fleet\[ray\]"):
        await run_batch(
            [BatchTask(id="a", prompt="p")], template=_template(repo), out_dir=tmp_path / "o", backend="ray"
        )


def test_cli_without_ray_exits_3_naming_the_extra(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "p"}) + "\n")
    result = CliRunner().invoke(cli, ["batch", str(tasks), "--backend", "ray", "--cwd", str(repo)])
    assert result.exit_code == 3, result.output
    assert "agent-fleet[ray]" in result.output


async def test_argument_checks(repo: Path, tmp_path: Path) -> None:
    tasks = [BatchTask(id="a", prompt="p")]
    with pytest.raises(UsageError, match="need backend='ray'"):
        await run_batch(tasks, template=_template(repo), out_dir=tmp_path / "o", ray_address="auto")
    with pytest.raises(UsageError, match="unknown batch backend"):
        await run_batch(tasks, template=_template(repo), out_dir=tmp_path / "o", backend="dask")
    origin = make_repo(tmp_path / "origin")
    with pytest.raises(UsageError, match="'cwd' cannot be used with a repository URL"):
        await run_batch(
            [BatchTask(id="a", prompt="p", cwd=repo, line=3)],
            template=_template(repo),
            out_dir=tmp_path / "o",
            backend="ray",
            repo_url=f"file://{origin}",
        )
    with pytest.raises(UsageError, match="cannot read the repository"):
        await run_batch(
            tasks,
            template=_template(repo),
            out_dir=tmp_path / "o",
            backend="ray",
            repo_url=f"file://{tmp_path / 'nowhere'}",
        )


def test_cli_ray_flags_need_the_ray_backend(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "p"}) + "\n")
    result = CliRunner().invoke(cli, ["batch", str(tasks), "--ray-address", "auto"])
    assert result.exit_code == 2 and "need --backend ray" in result.output


async def test_a_task_asking_for_another_provider_is_refused_before_any_work(
    repo: Path, tmp_path: Path
) -> None:
    # Every node runs the batch's one provider: a task asking for another is refused, not run on it.
    with pytest.raises(UsageError, match=r"task 'b' \(line 2\): 'provider' 'claude' is not the batch's"):
        await run_batch(
            [
                BatchTask(id="a", prompt="p", provider="codex"),
                BatchTask(id="b", prompt="p", provider="claude", line=2),
            ],
            template=_template(repo),
            out_dir=tmp_path / "o",
            backend="ray",
        )
    assert not (tmp_path / "o" / "batch.db").exists()


def test_events_are_redacted_on_the_node_with_its_environment() -> None:
    redactor = Redactor({"NODE_API_TOKEN": "node-secret-123"})
    plan = Plan(steps=(PlanStep(step="use node-secret-123", status="pending"),))
    assert redact_event(plan, redactor) == Plan(steps=(PlanStep(step="use [REDACTED]", status="pending"),))
    result = Result(session_id="s", text="key node-secret-123", usage=TokenUsage(total_tokens=3))
    assert redact_event(result, redactor) == Result(
        session_id="s", text="key [REDACTED]", usage=TokenUsage(total_tokens=3)
    )
    system = System(subtype="x", data={"api_key": "abcdef", "note": ["node-secret-123"]})
    assert redact_event(system, redactor).data == {"api_key": "[REDACTED]", "note": ["[REDACTED]"]}
