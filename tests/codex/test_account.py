"""Logging codex in and out through the app-server (issue 32): an API key against the real binary
(offline: codex only stores it), a ChatGPT device-code login against the fake app-server (the real one
would call OpenAI's auth server, which tests never reach)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import pytest

from agent_fleet.codex import CodexAccount, CodexOptions, CodexProvider
from agent_fleet.errors import AuthenticationError, UsageError

FAKE = Path(__file__).with_name("fake_app_server.py")


def _fake(tmp_path: Path, **env: str) -> CodexOptions:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return CodexOptions(codex_bin=wrapper, env=env)


@pytest.mark.protocol_smoke
@pytest.mark.e2e
async def test_api_key_login_account_and_logout_on_the_real_binary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_API_KEY", "CODEX_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    home, tmp = tmp_path / "home", tmp_path / "home-tmp"
    home.mkdir()
    tmp.mkdir()
    async with CodexProvider(CodexOptions(env={"CODEX_HOME": str(home), "TMPDIR": str(tmp)})) as provider:
        assert (await provider.account()).kind is None
        with pytest.raises(UsageError):
            await provider.login_api_key("  ")
        await provider.login_api_key("sk-test-not-a-real-key")
        account = await provider.account()
        assert (account.kind, account.describe()) == ("apiKey", "API key")
        assert "sk-test-not-a-real-key" in (home / "auth.json").read_text()  # codex stored it
        assert "sk-test" not in repr(account)
        await provider.logout()
        assert (await provider.account()).kind is None


async def test_device_code_login_prints_its_code_and_completes(tmp_path: Path) -> None:
    async with CodexProvider(_fake(tmp_path)) as provider:
        login = await provider.login_chatgpt_device_code()
        assert (login.verification_url, login.user_code) == ("https://example.invalid/device", "ABCD-1234")
        await login.wait(10)
        account = await provider.account()
    assert (
        account == CodexAccount(kind="chatgpt", email="me@example.com", plan="plus", raw=account.raw)
        and account.describe() == "ChatGPT (me@example.com, plus)"
    )


async def test_a_failed_device_code_login_is_an_authentication_error(tmp_path: Path) -> None:
    async with CodexProvider(_fake(tmp_path, FAKE_LOGIN_FAIL="1")) as provider:
        login = await provider.login_chatgpt_device_code()
        with pytest.raises(AuthenticationError, match="denied by the user"):
            await login.wait(10)
        assert (await provider.account()).kind is None
