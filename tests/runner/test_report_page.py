"""The report page rendered from a summary document (hermetic) and ``agent-fleet report``."""

from __future__ import annotations

import base64
import json
import re
import zlib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from agent_fleet.cli import cli
from agent_fleet.events import TokenUsage
from agent_fleet.runner import TaskResult
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.runner._summary import build_summary, task_record
from agent_fleet.runner.report import render_report

HOSTILE = "<script>alert('x')</script> & <img src=x onerror=alert(1)>"


def _summary() -> dict[str, object]:
    usage = TokenUsage(input_tokens=1_000, cached_input_tokens=200, output_tokens=30, total_tokens=1_030)
    records = [
        task_record(
            TaskResult(task_id="a", status="succeeded", reason="ok", usage=usage, final_text=HOSTILE),
            recorded={
                "prompt": HOSTILE,
                "model": "gpt-5.5",
                "commands": [
                    {"command": "make <all>", "exit_code": 0, "status": "completed", "output_tail": "</pre>"}
                ],
                "timeline": [
                    {"kind": "turn", "name": "turn 1", "start": 100.0, "end": 101.0, "status": "ok"}
                ],
            },
        ),
        task_record(TaskResult(task_id="b", status="cancelled", reason="not started"), prompt="later"),
    ]
    return build_summary(records, started_at=100.0, finished_at=102.0, duration=2.0)


def _unpack(page: str, name: str) -> Any:
    """The data the page's script reads from element ``name``: JSON, deflated, base64."""
    found = re.search(f'<script type="application/octet-stream" id="{name}">([^<]*)</script>', page)
    assert found is not None, name
    return json.loads(zlib.decompress(base64.b64decode(found.group(1))))


def _overview(page: str) -> dict[str, Any]:
    loaded: dict[str, Any] = _unpack(page, "overview-data")
    return loaded


def _details(page: str) -> list[dict[str, Any]]:
    blocks = re.findall(r'id="(details-\d+)"', page)
    return [d for b in blocks for d in _unpack(page, b)]


def test_values_are_text_and_the_page_references_nothing_outside() -> None:
    page = render_report(_summary())
    assert page.count("<script>") == 1, "only the page's own script runs"
    assert page.count("</script>") == 4, "the overview's data, the script, the prompts, one block of details"
    assert HOSTILE not in page and "<img" not in page, "no task value is markup"
    # every task value is in packed data the script sets as text; none can close the element it is in
    for name in ("overview-data", "search-data", "details-0"):
        data = page.split(f'id="{name}">', 1)[1].split("</script>", 1)[0]
        assert re.fullmatch(r"[A-Za-z0-9+/=]*", data), name
    assert _unpack(page, "search-data") == ["later", HOSTILE.lower()]
    assert (
        not re.search(r"(src|href)=\"(https?:)?//", page) and "http://" not in page and "https://" not in page
    )
    assert "@import" not in page and "url(" not in page
    overview = _overview(page)
    assert [r[0] for r in overview["rows"]] == ["b", "a"], "the cancelled task before the succeeded one"
    assert overview["cost"] is False, "no cost column without prices"
    details = {d["task_id"]: d for d in _details(page)}
    assert details["a"]["prompt"] == HOSTILE and details["a"]["commands"][0]["output_tail"] == "</pre>"


def test_a_price_table_adds_the_cost_column() -> None:
    prices = PriceTable.from_mapping(
        {"currency": "EUR", "models": {"gpt-5.5": {"input": 1.0, "output": 100.0}}}
    )
    page = render_report(_summary(), prices=prices)
    assert '<span class="c-num" role="columnheader">cost</span>' in page
    overview = _overview(page)
    assert overview["cost"] is True and overview["currency"] == "EUR"
    row = next(r for r in overview["rows"] if r[0] == "a")
    assert row[6] == pytest.approx(0.004)  # (1,000 * 1 + 30 * 100) / 1e6
    assert "0.0040 EUR" in page  # the total, in the page's head


def test_failed_tasks_come_first_and_the_diff_is_counted_per_file() -> None:
    diff = (
        "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -1,2 +1,2 @@\n-old\n+new\n+more\n"
        "diff --git a/y.py b/y.py\n--- a/y.py\n+++ b/y.py\n@@ -1 +0,0 @@\n-gone\n"
    )
    records = [
        task_record(TaskResult(task_id=f"ok{n}", status="succeeded", reason="ok"), prompt="p")
        for n in range(3)
    ]
    records.insert(
        1, task_record(TaskResult(task_id="bad", status="failed", reason="gate"), recorded={"diff": diff})
    )
    records.insert(2, task_record(TaskResult(task_id="late", status="timeout", reason="slow"), prompt="p"))
    page = render_report(build_summary(records, started_at=100.0, finished_at=102.0, duration=2.0))
    rows = _overview(page)["rows"]
    assert [r[0] for r in rows] == ["bad", "late", "ok0", "ok1", "ok2"]
    assert (rows[0][11], rows[0][12]) == (2, 2)  # lines added, removed
    bad = _details(page)[0]
    assert [(f["path"], f["added"], f["removed"]) for f in bad["diff_files"]] == [
        ("x.py", 2, 1),
        ("y.py", 0, 1),
    ]


def test_the_time_axis_has_round_ticks() -> None:
    from agent_fleet.runner._report_data import ticks

    assert ticks(1200.0)[0] == 300 and [label for _, label in ticks(1200.0)[1]][:3] == ["0s", "5m", "10m"]
    assert ticks(7.0)[0] == 2 and ticks(7.0)[1][-1] == (pytest.approx(85.7143, abs=1e-3), "6s")
    assert ticks(3 * 3600.0)[0] == 1800 and ticks(3 * 3600.0)[1][-1][1] == "3h"
    assert all(0 <= pct <= 100 for pct, _ in ticks(0.0)[1])


def test_a_scripted_batch_says_so() -> None:
    summary = _summary()
    assert "SCRIPTED" not in render_report(summary)
    summary["scripted"] = True
    assert "SCRIPTED: agent-fleet's scripted model" in render_report(summary)


def test_report_command_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "batch"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps(_summary()))
    result = CliRunner().invoke(cli, ["report", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "report.html").read_text().startswith("<!DOCTYPE html>")
    assert f"file://{(out / 'report.html').resolve()}" in result.output
    prices = tmp_path / "p.toml"
    prices.write_text('[models."gpt-5.5"]\ninput = 1\noutput = 100\n')
    elsewhere = tmp_path / "page.html"
    result = CliRunner().invoke(
        cli, ["report", str(out / "summary.json"), "-o", str(elsewhere), "--prices", str(prices)]
    )
    assert result.exit_code == 0, result.output
    assert "0.0040 USD" in elsewhere.read_text()


def test_report_command_usage_errors(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "no batch summary" in result.output and "Traceback" not in result.output
    (tmp_path / "summary.json").write_text("[1, 2]")
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "not an agent-fleet batch summary" in result.output
    (tmp_path / "summary.json").write_text(json.dumps({"tasks": [{"task_id": "a", "tokens": 5}]}))
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code == 2 and "has summary schema None" in result.output
    (tmp_path / "summary.json").write_text(json.dumps(_summary()))
    (tmp_path / "bad.toml").write_text("[models.m]\ninput = 1\n")
    result = CliRunner().invoke(cli, ["report", str(tmp_path), "--prices", str(tmp_path / "bad.toml")])
    assert result.exit_code == 2 and "'input' and 'output' prices are required" in result.output
