"""The Ray backend without a cluster: the missing extra, argument checks, redaction on the node."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_fleet import Plan, PlanStep, Result, Spec, System, TokenUsage
from agent_fleet.cli import cli
from agent_fleet.errors import ProviderUnavailable, UsageError
from agent_fleet.runner import Redactor, Task
from agent_fleet.runner._ray_node import redact_event
from agent_fleet.runner._ray_repo import keep_bundle
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
    for flags in (["--push"], ["--push", "--backend", "ray"]):
        result = CliRunner().invoke(cli, ["batch", str(tasks), *flags])
        assert result.exit_code == 2 and "--push needs --backend ray and --repo-url" in result.output
    for flags in (["--exclude-node", "gpu-1"], ["--fence-timeout", "5"]):
        result = CliRunner().invoke(cli, ["batch", str(tasks), *flags])
        assert result.exit_code == 2 and "need --backend ray" in result.output, result.output
    result = CliRunner().invoke(cli, ["batch", str(tasks), "--backend", "ray", "--fence-timeout", "0"])
    assert result.exit_code == 2 and "--fence-timeout" in result.output


async def test_push_and_per_task_providers_are_checked_before_any_work(repo: Path, tmp_path: Path) -> None:
    tasks = [BatchTask(id="a", prompt="p")]
    with pytest.raises(UsageError, match="push, exclude_nodes and fence_timeout need backend='ray'"):
        await run_batch(tasks, template=_template(repo), out_dir=tmp_path / "o", push=True)
    with pytest.raises(UsageError, match="need backend='ray'"):
        await run_batch(tasks, template=_template(repo), out_dir=tmp_path / "o", exclude_nodes=["n"])
    with pytest.raises(UsageError, match="--push needs --repo-url"):
        await run_batch(tasks, template=_template(repo), out_dir=tmp_path / "o", backend="ray", push=True)
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


def test_cli_passes_push_to_the_batch_and_records_it_for_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}

    async def fake_run_batch(tasks: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise UsageError("stop here")  # the wiring is what is under test

    monkeypatch.setattr("agent_fleet.cli._commands.run_batch", fake_run_batch)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "a", "prompt": "p"}) + "\n")
    url = f"file://{tmp_path / 'origin'}"
    args = [
        "batch",
        str(tasks),
        "--backend",
        "ray",
        "--repo-url",
        url,
        "--push",
        "--out",
        str(tmp_path / "o"),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and "stop here" in result.output
    assert seen["push"] is True and seen["repo_url"] == url
    assert seen["meta"]["cli"]["push"] is True  # `--resume OUT` pushes too
    result = CliRunner().invoke(
        cli, [*args, "--exclude-node", "gpu-1", "--exclude-node", "10.0.0.2", "--fence-timeout", "4.5"]
    )
    assert result.exit_code == 2 and "stop here" in result.output
    assert seen["exclude_nodes"] == ("gpu-1", "10.0.0.2") and seen["fence_timeout"] == 4.5
    assert seen["meta"]["cli"]["exclude_nodes"] == ["gpu-1", "10.0.0.2"]  # and a resume keeps them


def test_a_later_bundle_never_overwrites_an_earlier_one(tmp_path: Path) -> None:
    first = keep_bundle(tmp_path, "t.1", b"first run")
    assert first == tmp_path / "t.1.bundle" and first.read_bytes() == b"first run"
    assert keep_bundle(tmp_path, "t.1", b"first run") == first  # the same again: nothing to keep aside
    assert not (tmp_path / "earlier-bundles").exists()
    keep_bundle(tmp_path, "t.1", b"second run")
    keep_bundle(tmp_path, "t.1", b"third run")
    assert first.read_bytes() == b"third run"
    history = tmp_path / "earlier-bundles"
    assert sorted(p.name for p in history.iterdir()) == ["t.1.1.bundle", "t.1.2.bundle"]
    assert (history / "t.1.1.bundle").read_bytes() == b"first run"
    assert (history / "t.1.2.bundle").read_bytes() == b"second run"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier-bundles", "t.1.bundle"]


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


def test_a_node_excluded_is_a_batch_notice_the_live_view_prints_without_a_task_row() -> None:
    import io

    from rich.console import Console

    from agent_fleet.cli._view import Progress, describe
    from agent_fleet.runner._types import notice

    excluded = notice(
        "",
        "node_excluded",
        node_id="aaaaaaaa1111",
        hostname="gpu-1",
        where="Ray node gpu-1 (aaaaaaaa1111)",
        reason="its provider failed: codex app-server exited\nstderr tail ...",
        running=["t1", "t2"],
    )
    said = describe(excluded)
    assert said == (
        "Ray node gpu-1 (aaaaaaaa1111) excluded: its provider failed: codex app-server exited; "
        "its running tasks go elsewhere: t1, t2"
    )
    buffer = io.StringIO()
    progress = Progress(Console(file=buffer, width=200), json_output=False, batch=True)
    progress.on_event(excluded)
    assert progress.rows == {}
    assert said in buffer.getvalue()
    stream = io.StringIO()
    as_json = Progress(Console(file=io.StringIO()), json_output=True, batch=True, out=stream)
    as_json.on_event(excluded)
    record = json.loads(stream.getvalue())
    assert (record["task_id"], record["subtype"]) == ("", "runner.node_excluded") and as_json.rows == {}
