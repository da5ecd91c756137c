"""``agent-fleet login`` / ``logout`` (issue 32) and the account in ``doctor``."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from agent_fleet.cli import cli

FAKE = Path(__file__).resolve().parents[1] / "codex" / "fake_app_server.py"


def invoke(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY", "CODEX_BIN"):
        monkeypatch.delenv(name, raising=False)
    codex_home = tmp_path / "home"
    codex_home.mkdir()
    (tmp_path / "home-tmp").mkdir()
    monkeypatch.setenv("CODEX_HOME", str(codex_home))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "home-tmp"))
    return codex_home


@pytest.fixture
def fake_codex(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CODEX_BIN", str(wrapper))


@pytest.mark.e2e
def test_login_with_an_api_key_from_stdin_then_logout(home: Path) -> None:
    result = invoke("login", "--api-key", input="sk-test-cli-key\n")
    assert result.exit_code == 0, result.output
    assert "logged in: API key" in result.stdout and "sk-test-cli-key" not in result.output
    assert "sk-test-cli-key" in (home / "auth.json").read_text()
    doctor = invoke("doctor")
    assert "  ok  account: API key" in doctor.stdout
    result = invoke("logout")
    assert result.exit_code == 0 and "logged out" in result.stdout
    assert (
        "sk-test-cli-key" not in (home / "auth.json").read_text() if (home / "auth.json").exists() else True
    )


def test_login_api_key_needs_a_key_on_stdin(home: Path, fake_codex: None) -> None:
    result = invoke("login", "--api-key", input="")
    assert result.exit_code == 2 and "no key on stdin" in result.stderr


def test_device_code_login_prints_the_code_and_url(home: Path, fake_codex: None) -> None:
    result = invoke("login")
    assert result.exit_code == 0, result.output
    assert "Open https://example.invalid/device and enter the code: ABCD-1234" in result.stdout
    assert "logged in: ChatGPT (me@example.com, plus)" in result.stdout


def test_a_refused_login_exits_3(home: Path, fake_codex: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_LOGIN_FAIL", "1")
    result = invoke("login")
    assert result.exit_code == 3 and "the ChatGPT login failed: denied by the user" in result.stderr
    assert "Traceback" not in result.output
