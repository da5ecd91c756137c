from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from agent_fleet import _codex_binary as binary
from agent_fleet._codex_binary import codex_version, credential_sources, find_codex
from agent_fleet.errors import ProviderUnavailable


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_explicit_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _script(tmp_path / "codex", "echo codex-cli 9.9.9")
    monkeypatch.setenv("CODEX_BIN", "/nonexistent")
    assert find_codex(fake) == fake


def test_explicit_missing_is_an_error_not_a_fallthrough(tmp_path: Path) -> None:
    with pytest.raises(ProviderUnavailable) as info:
        find_codex(tmp_path / "nope")
    assert "nope" in str(info.value)


def test_codex_bin_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _script(tmp_path / "mycodex", "echo codex-cli 1.2.3")
    monkeypatch.setenv("CODEX_BIN", str(fake))
    assert find_codex() == fake


def test_codex_bin_env_broken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEX_BIN", "/nonexistent/codex")
    with pytest.raises(ProviderUnavailable, match=r"\$CODEX_BIN"):
        find_codex()


@pytest.mark.e2e
def test_bundled_binary_is_found_and_pinned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    path = find_codex()
    assert "codex_cli_bin" in str(path)
    assert codex_version(path) == binary.PINNED_CODEX_VERSION


def test_path_fallback_and_nothing_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CODEX_BIN", raising=False)
    monkeypatch.setattr(binary, "_bundled_codex", lambda: None)
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = _script(bindir / "codex", "echo codex-cli 0.0.1")
    monkeypatch.setenv("PATH", str(bindir))
    assert find_codex() == fake
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ProviderUnavailable) as info:
        find_codex()
    text = str(info.value)
    for place in ("$CODEX_BIN", "bundled openai-codex-cli-bin", "codex on PATH"):
        assert place in text
    assert len(info.value.tried) == 3


def test_version_of_broken_binary(tmp_path: Path) -> None:
    broken = _script(tmp_path / "codex", "echo boom >&2; exit 3")
    with pytest.raises(ProviderUnavailable, match="exit 3") as info:
        codex_version(broken)
    assert "boom" in info.value.stderr_tail


def test_credential_sources_order_and_no_values(tmp_path: Path) -> None:
    (tmp_path / "auth.json").write_text(
        json.dumps({"OPENAI_API_KEY": "sk-secret-1", "tokens": {"access_token": "tok-secret-2"}})
    )
    env = {"CODEX_API_KEY": "sk-secret-3", "OPENAI_API_KEY": "sk-secret-4"}
    found = credential_sources(tmp_path, explicit_key="sk-secret-5", environ=env)
    assert [s.name for s in found] == [
        "explicit",
        "CODEX_API_KEY",
        "OPENAI_API_KEY",
        "auth.json:api_key",
        "auth.json:oauth",
    ]
    assert "secret" not in repr(found)


def test_credential_sources_none(tmp_path: Path) -> None:
    assert credential_sources(tmp_path, environ={}) == []
    (tmp_path / "auth.json").write_text("not json")
    assert credential_sources(tmp_path, environ={}) == []


def test_credential_sources_uses_codex_home_env(tmp_path: Path) -> None:
    (tmp_path / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": "x"}))
    found = credential_sources(environ={"CODEX_HOME": os.fspath(tmp_path)})
    assert [s.name for s in found] == ["auth.json:api_key"]


# -- the supported range ---------------------------------------------------------------------------------


def test_the_supported_range_is_declared_once_and_the_pin_matches_it() -> None:
    root = Path(__file__).resolve().parents[1]
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert f'"openai-codex-cli-bin=={binary.PINNED_CODEX_VERSION}"' in pyproject
    fake = (root / "tests" / "codex" / "fake_app_server.py").read_text(encoding="utf-8")
    assert f"'FAKE_VERSION', '{binary.PINNED_CODEX_VERSION}'" in fake
    assert binary._key(binary.MINIMUM_CODEX_VERSION) <= binary._key(binary.PINNED_CODEX_VERSION)  # type: ignore[operator]


@pytest.mark.parametrize("version", ["0.1.0", "0.136.0", "", "codex", "1.2"])
def test_below_the_minimum_or_no_version_is_refused_naming_both(version: str) -> None:
    with pytest.raises(ProviderUnavailable) as info:
        binary.check_codex_version(version, binary="/opt/codex")
    message = str(info.value)
    assert binary.MINIMUM_CODEX_VERSION in message and "/opt/codex" in message
    assert (version or "''") in message
    assert not info.value.retryable


def test_the_pinned_version_is_quiet_and_others_warn() -> None:
    assert binary.check_codex_version(binary.PINNED_CODEX_VERSION) is None
    older = binary.check_codex_version(binary.MINIMUM_CODEX_VERSION)
    if binary.MINIMUM_CODEX_VERSION != binary.PINNED_CODEX_VERSION:
        assert older is not None and "older than" in older and binary.PINNED_CODEX_VERSION in older
    newer = binary.check_codex_version("9.0.0")
    assert newer is not None and "newer than" in newer


def test_prereleases_sort_before_their_release() -> None:
    key = binary._key
    assert key("0.163.0-alpha.2") < key("0.163.0") < key("0.163.1")  # type: ignore[operator]
    assert key("0.99.0") < key("0.100.0")  # type: ignore[operator]


@pytest.mark.parametrize(
    ("agent", "version"),
    [
        ("agent-fleet/0.163.0 (Debian 12.0.0; x86_64) xterm (agent-fleet; 1)", "0.163.0"),
        ("x/0.162.1-alpha.3 (Linux)", "0.162.1-alpha.3"),
        ("fake", None),
        (None, None),
        ("a/b/c (x)", None),
    ],
)
def test_version_from_user_agent(agent: object, version: str | None) -> None:
    assert binary.version_from_user_agent(agent) == version
