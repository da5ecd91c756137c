"""TaskRecorder, build_summary and price tables: pure, from synthetic events."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agent_fleet.errors import UsageError
from agent_fleet.events import Diff, Error, Result, System, TokenUsage, ToolResult, ToolUse
from agent_fleet.runner import GateCheck, GateResult, TaskEvent, TaskResult, _git
from agent_fleet.runner._pricing import PriceTable, load_prices
from agent_fleet.runner._record import OUTPUT_TAIL, TaskRecorder, command_text
from agent_fleet.runner._summary import build_summary, task_record
from agent_fleet.runner.batch import BatchEntry, BatchResult

from .conftest import git, make_repo

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs" / "summary.schema.json").read_text())
T0 = 1_800_000_000.0


def _feed(recorder: TaskRecorder, items: list[tuple[float, str, Any]]) -> None:
    for at, source, event in items:
        recorder.observe(TaskEvent(task_id=recorder.task_id, source=source, event=event, time=T0 + at))  # type: ignore[arg-type]


def _runner(subtype: str, **data: Any) -> System:
    return System(subtype=f"runner.{subtype}", data=data)


def _recorded() -> TaskRecorder:
    recorder = TaskRecorder(task_id="t")
    _feed(
        recorder,
        [
            (0.0, "runner", _runner("started", prompt="fix it", provider="codex", model=None)),
            (0.1, "agent", System(subtype="session", data={"model": "gpt-5.5"})),
            (1.0, "agent", ToolUse(id="c1", name="shell", input={"command": "/bin/bash -lc 'make test'"})),
            (
                1.0,
                "agent",
                ToolUse(
                    id="a1",
                    name="approval",
                    input={"kind": "command", "command": "make test"},
                    synthetic=True,
                ),
            ),
            (1.0, "agent", ToolResult(id="a1", status="acceptForSession", synthetic=True)),
            (2.5, "agent", ToolResult(id="c1", output="x" * 10_000 + "END", exit_code=1, status="failed")),
            (3.0, "agent", ToolUse(id="c2", name="shell", input={"command": ["git", "push", "--force"]})),
            (
                3.0,
                "agent",
                ToolUse(
                    id="a2",
                    name="approval",
                    input={"kind": "command", "command": "git push --force"},
                    synthetic=True,
                ),
            ),
            (3.0, "agent", ToolResult(id="a2", status="decline", is_error=True, synthetic=True)),
            (
                3.0,
                "agent",
                System(
                    subtype="approval_denied",
                    data={
                        "rule": "git-force-push",
                        "reason": "rewrites history",
                        "kind": "command",
                        "command": "git push --force",
                    },
                ),
            ),
            (3.1, "agent", ToolResult(id="c2", status="declined", is_error=True)),
            (3.5, "agent", TokenUsage(input_tokens=1000, cached_input_tokens=400, output_tokens=50)),
            (4.0, "agent", Result(session_id="s1", text="done")),
            (4.0, "runner", _runner("gate_started", command="pytest -q", require_commit=False)),
            (5.0, "runner", _runner("gate", passed=False, summary="pytest failed", checks=[])),
            (5.0, "runner", _runner("followup", number=1, limit=2, prompt="the gate failed: fix it")),
            (6.0, "agent", Error(code="turn_failed", message="model went away")),
            (6.5, "runner", _runner("finished", status="failed")),
        ],
    )
    return recorder


def test_recorder_keeps_commands_declines_model_and_a_timeline() -> None:
    record = _recorded().record()
    assert record["prompt"] == "fix it" and record["provider"] == "codex"
    assert record["model"] == "gpt-5.5", "the session's model wins over the planned (None)"
    first, second = record["commands"]
    assert first["command"] == "make test" and first["exit_code"] == 1 and first["status"] == "failed"
    assert len(first["output_tail"]) == OUTPUT_TAIL and first["output_tail"].endswith("END")
    assert second["command"] == "git push --force" and second["exit_code"] is None
    assert record["declines"] == [
        {
            "rule": "git-force-push",
            "reason": "rewrites history",
            "command": "git push --force",
            "about": {"kind": "command", "command": "git push --force"},
            "at": T0 + 3.0,
        }
    ]
    assert record["approvals"] == 2
    assert record["followups"] == [{"number": 1, "prompt": "the gate failed: fix it", "at": T0 + 5.0}]
    assert record["errors"] == [{"code": "turn_failed", "message": "model went away", "at": T0 + 6.0}]
    spans = [
        (s["kind"], round(s["start"] - T0, 3), round(s["end"] - T0, 3), s["status"])
        for s in record["timeline"]
    ]
    assert spans == [
        ("turn", 0.0, 4.0, "completed"),
        ("tool", 1.0, 2.5, "failed"),
        ("approval", 1.0, 1.0, "acceptForSession"),
        ("tool", 3.0, 3.1, "declined"),
        ("approval", 3.0, 3.0, "decline"),
        ("gate", 4.0, 5.0, "failed"),
        ("turn", 5.0, 6.0, "turn_failed"),
    ]
    assert record["session_id"] == "s1" and record["started_at"] == T0 and record["finished_at"] == T0 + 6.5


def test_command_text_unwraps_a_shell() -> None:
    assert command_text("/bin/bash -lc 'git status'") == "git status"
    assert command_text(["ls", "-la", "a b"]) == "ls -la 'a b'"
    assert command_text("echo 'unclosed") == "echo 'unclosed"


def _result(**kw: Any) -> TaskResult:
    base: dict[str, Any] = {
        "task_id": "t",
        "status": "failed",
        "reason": "the gate never passed",
        "duration": 6.5,
        "usage": TokenUsage(input_tokens=1000, cached_input_tokens=400, output_tokens=50, total_tokens=1050),
        "final_text": "done",
        "gate": GateResult(
            checks=(
                GateCheck(
                    name="command",
                    passed=False,
                    detail="pytest failed",
                    output="E assert 1 == 2",
                    exit_code=1,
                ),
            )
        ),
        "transcript": Path("rel/t.jsonl"),
    }
    return TaskResult(**{**base, **kw})


def test_summary_normalises_times_and_prices_tokens() -> None:
    record = task_record(_result(), recorded=_recorded().record(), branch="agent-fleet/t", worktree="/wt/t")
    prices = PriceTable.from_mapping(
        {"models": {"gpt-5.5": {"input": 2.0, "cached_input": 0.5, "output": 10.0}}}
    )
    summary = build_summary(
        [
            record,
            task_record(_result(task_id="u", status="cancelled", usage=None, gate=None), prompt="later"),
        ],
        started_at=T0 - 1,
        finished_at=T0 + 7,
        duration=8.0,
        prices=prices,
    )
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)
    t, u = summary["tasks"]
    assert t["started_at"] == "2027-01-15T08:00:00.000+00:00" and t["model"] == "gpt-5.5"
    assert t["timeline"][0] == {
        "kind": "turn",
        "name": "turn 1",
        "start": 1.0,
        "end": 5.0,
        "status": "completed",
    }
    assert t["commands"][0]["duration"] == 1.5 and t["commands"][0]["started_at"].endswith("01.000+00:00")
    assert t["gate"]["output_tail"] == "E assert 1 == 2" and t["gate"]["runs"] == 1
    assert t["transcript"] == str(Path("rel/t.jsonl").resolve())
    assert t["worktree"] == {"path": "/wt/t", "kept": False} and t["branch"] == "agent-fleet/t"
    assert t["tokens"] == {
        "input": 1000,
        "cached_input": 400,
        "output": 50,
        "reasoning_output": 0,
        "total": 1050,
    }
    assert t["cost"] == pytest.approx((600 * 2.0 + 400 * 0.5 + 50 * 10.0) / 1e6)
    assert u["prompt"] == "later" and u["cost"] is None and u["tokens"] is None and u["model"] is None
    assert summary["counts"] == {"failed": 1, "cancelled": 1}
    assert summary["cost"] == t["cost"] and summary["currency"] == "USD"
    assert summary["tokens"]["input"] == 1000


def test_batch_summary_is_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "very-secret-value-123")
    entry = BatchEntry(
        result=_result(final_text="the token is very-secret-value-123"), prompt="use sk-abcdefghijklmnop"
    )
    summary = BatchResult(entries=(entry,), duration=1.0, started_at=T0).to_dict()
    text = json.dumps(summary)
    assert "very-secret-value-123" not in text and "sk-abcdefghijklmnop" not in text
    jsonschema.Draft202012Validator(SCHEMA).validate(summary)


def test_price_table_from_toml_and_json(tmp_path: Path) -> None:
    toml = tmp_path / "prices.toml"
    toml.write_text(
        'currency = "EUR"\n[models."gpt-5.5"]\ninput = 1.25\noutput = 10\n'
        '[models."*"]\ninput = 1\noutput = 2\n'
    )
    table = load_prices(toml)
    assert table.currency == "EUR"
    tokens = {"input": 1_000_000, "cached_input": 0, "output": 1_000_000}
    assert table.cost("gpt-5.5", tokens) == 11.25
    assert table.cost("other", tokens) == 3.0, "the '*' entry prices unlisted models"
    assert table.cost("gpt-5.5", None) is None
    js = tmp_path / "prices.json"
    js.write_text(json.dumps({"models": {"m": {"input": 1, "output": 1, "cached_input": 0}}}))
    assert load_prices(js).cost("m", {"input": 10, "cached_input": 10, "output": 0}) == 0.0
    assert load_prices(js).cost("unknown", tokens) is None, "no price, no guess"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("models = 3", "no [models"),
        ("[models]\nm = 3", "model 'm': expected a table of prices"),
        ("[models.m]\ninput = 1", "'input' and 'output' prices are required"),
        ("[models.m]\ninput = -1\noutput = 1", "must not be negative"),
        ('[models.m]\ninput = "cheap"\noutput = 1', "'input' must be a number"),
        ("[models.m]\ninput = 1\noutput = 1\nextra = 2", "unknown key(s) extra"),
        ("color = 1\n[models.m]\ninput = 1\noutput = 1", "unknown key(s) color"),
        ("[models", "is not valid"),
        ("", "no [models"),
    ],
)
def test_bad_price_tables_are_usage_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(UsageError, match=re.escape(message)):
        load_prices(path)


def test_missing_price_table_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read the price table"):
        load_prices(tmp_path / "nope.toml")


async def test_final_diff_has_commits_edits_and_new_files(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    start = git(repo, "rev-parse", "HEAD")
    (repo / "committed.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    (repo / "README.md").write_text("test repo\nedited\n")
    (repo / "new.txt").write_text("fresh\nlines\n")
    (repo / "blob.bin").write_bytes(b"\0\1\2")
    diff = await _git.final_diff(repo, start)
    assert "+one" in diff and "+edited" in diff
    assert "+++ b/new.txt\n@@ -0,0 +1,2 @@\n+fresh\n+lines" in diff
    assert "Binary file (3 bytes)" in diff
    assert git(repo, "status", "--porcelain").count("??") == 2, "the index is untouched"
    assert len(await _git.final_diff(repo, start, limit=20)) <= 20 + len("\n... (cut)")


async def test_changed_files_lists_commits_edits_and_new_files_from_the_top(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    start = git(repo, "rev-parse", "HEAD")
    (repo / "sub").mkdir()
    (repo / "sub" / "committed.txt").write_text("one\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "c")
    (repo / "README.md").write_text("edited\n")
    (repo / "sub" / "new.txt").write_text("fresh\n")
    names = await _git.changed_files(repo / "sub", start)  # asked from a subdirectory: from the top
    assert sorted(names) == ["README.md", "sub/committed.txt", "sub/new.txt"]


def _patch(item: str, *paths: str, move: str | None = None) -> ToolUse:
    changes = [{"path": p, "kind": "add", "diff": "+x"} for p in paths]
    if move is not None:
        changes[0].update(kind="update", move_path=move)
    return ToolUse(id=item, name="apply_patch", input={"changes": changes})


def test_files_changed_are_what_the_session_did_and_each_turn_keeps_its_diff() -> None:
    recorder = TaskRecorder(task_id="t", root="/work/repo")
    turn1 = "diff --git a/one.txt b/one.txt\n+1\n"
    turn2 = "diff --git a/two.txt b/two.txt\n+2\n"
    _feed(
        recorder,
        [
            (0.0, "runner", _runner("started", prompt="p", provider="codex")),
            (
                1.0,
                "agent",
                _patch("p1", "/work/repo/one.txt", "/work/repo/old.txt", move="/work/repo/new.txt"),
            ),
            (1.1, "agent", ToolResult(id="p1", status="completed")),
            (1.2, "agent", _patch("p2", "/work/repo/refused.txt")),
            (1.3, "agent", ToolResult(id="p2", status="declined", is_error=True)),
            (1.4, "agent", _patch("p3", "/elsewhere/x.txt")),
            (1.5, "agent", ToolResult(id="p3", status="completed")),
            (1.6, "agent", Diff(diff="diff --git a/one.txt b/one.txt\n", turn_id="T1")),
            (1.7, "agent", Diff(diff=turn1, turn_id="T1")),  # replaces the turn's earlier snapshot
            (2.0, "agent", Result(session_id="s")),
            (3.0, "agent", ToolUse(id="e1", name="Write", input={"file_path": "/work/repo/sub/w.txt"})),
            (3.1, "agent", ToolResult(id="e1")),
            (3.2, "agent", ToolUse(id="e2", name="Edit", input={"file_path": "/work/repo/failed.txt"})),
            (3.3, "agent", ToolResult(id="e2", is_error=True)),
            (3.4, "agent", Diff(diff=turn2, turn_id="T2")),
            (3.5, "review", _patch("r1", "/work/repo/review.txt")),  # a review session's: not the task's
            (3.6, "review", ToolResult(id="r1", status="completed")),
            (4.0, "agent", Result(session_id="s")),
        ],
    )
    record = recorder.record()
    assert record["files_changed"] == [
        "one.txt",
        "new.txt",  # one.txt renamed: both ends
        "old.txt",
        "/elsewhere/x.txt",
        "sub/w.txt",
        "two.txt",
    ]
    assert record["diff"] == turn1 + "\n" + turn2, "every turn's last snapshot, in order"
    assert record["shared_tree"] is False
    recorder.observe(
        TaskEvent(task_id="t", source="runner", event=_runner("shared_tree", tree="/w", tasks=3))
    )
    assert recorder.record()["shared_tree"] is True
    summary = build_summary(
        [task_record(TaskResult(task_id="t", status="succeeded", reason="done"), recorded=recorder.record())],
        started_at=T0,
        finished_at=T0 + 5,
        duration=5.0,
    )
    jsonschema.validate(summary, SCHEMA)
    assert summary["tasks"][0]["files_changed"][0] == "one.txt" and summary["tasks"][0]["shared_tree"] is True
