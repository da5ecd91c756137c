"""The report page rendered from a summary document (hermetic) and ``agent-fleet report``."""

from __future__ import annotations

import json
import re
from pathlib import Path

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


def test_values_are_text_and_the_page_references_nothing_outside() -> None:
    page = render_report(_summary())
    assert page.count("<script>") == 1, "only the page's own script"
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page and "<img" not in page
    assert "make &lt;all&gt;" in page and "&lt;/pre&gt;" in page
    assert (
        not re.search(r"(src|href)=\"(https?:)?//", page) and "http://" not in page and "https://" not in page
    )
    assert "@import" not in page and "url(" not in page
    assert 'data-task="a" data-status="succeeded"' in page and 'data-task="b" data-status="cancelled"' in page
    assert "cost" not in page.split("<tbody>")[0], "no cost column without prices"


def test_a_price_table_adds_the_cost_column() -> None:
    prices = PriceTable.from_mapping(
        {"currency": "EUR", "models": {"gpt-5.5": {"input": 1.0, "output": 100.0}}}
    )
    page = render_report(_summary(), prices=prices)
    header = page.split("<tbody>")[0]
    assert '<th class="num">cost</th>' in header
    assert "0.0040 EUR" in page  # (1,000 * 1 + 30 * 100) / 1e6


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
