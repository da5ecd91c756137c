"""``agent-fleet --version`` and ``doctor`` report the codex binary's version against the supported range."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_fleet import __version__
from agent_fleet._codex_binary import MINIMUM_CODEX_VERSION, PINNED_CODEX_VERSION
from agent_fleet.cli import cli


def _codex(tmp_path: Path, version: str) -> Path:
    path = tmp_path / "codex"
    path.write_text(f"#!/bin/sh\necho codex-cli {version}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize(
    ("version", "state"),
    [
        (PINNED_CODEX_VERSION, "the tested version"),
        ("9.0.0", "not the tested version"),
        ("0.100.0", "TOO OLD: agent-fleet will not run it"),
    ],
)
def test_version_names_agent_fleet_and_codex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, state: str | None
) -> None:
    monkeypatch.setenv("CODEX_BIN", str(_codex(tmp_path, version)))
    result = CliRunner().invoke(cli, ["--version"], catch_exceptions=False)
    assert result.exit_code == 0
    assert f"agent-fleet {__version__}" in result.stdout
    assert f"codex {version} (" in result.stdout and f"supported {MINIMUM_CODEX_VERSION} to" in result.stdout
    assert f"; {state};" in result.stdout


def test_version_without_codex_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_BIN", str(tmp_path / "nope"))
    result = CliRunner().invoke(cli, ["--version"], catch_exceptions=False)
    assert result.exit_code == 0 and "codex: $CODEX_BIN points at" in result.stdout


def test_doctor_fails_a_codex_below_the_minimum(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_BIN", str(_codex(tmp_path, "0.100.0")))
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    result = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False)
    assert result.exit_code == 1
    assert f"FAIL  codex: {tmp_path / 'codex'} is codex 0.100.0, older than" in result.stdout
    assert MINIMUM_CODEX_VERSION in result.stdout and "skipped: no usable codex" in result.stdout


@pytest.mark.parametrize(
    ("version", "note"),
    [
        (PINNED_CODEX_VERSION, ")"),
        (
            MINIMUM_CODEX_VERSION,
            f"; not the tested {PINNED_CODEX_VERSION}, supported from {MINIMUM_CODEX_VERSION})",
        ),
    ],
)
def test_doctor_reports_the_binary_s_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, version: str, note: str
) -> None:
    monkeypatch.setenv("CODEX_BIN", str(_codex(tmp_path, version)))
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    result = CliRunner().invoke(cli, ["doctor"], catch_exceptions=False)
    assert f"  ok  codex: {tmp_path / 'codex'} (version {version}{note}" in result.stdout
