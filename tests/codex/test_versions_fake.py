"""Versions and error classification against a fake app-server that reports older codex versions."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from agent_fleet import Error, Result, Spec, System
from agent_fleet._codex_binary import MINIMUM_CODEX_VERSION, PINNED_CODEX_VERSION
from agent_fleet.codex import CodexExecProvider, CodexOptions, CodexProvider, find_codex
from agent_fleet.errors import ProviderUnavailable
from agent_fleet.events import Event
from agent_fleet.testing import Reply, ScriptedModelServer

FAKE = Path(__file__).with_name("fake_app_server.py")


def _options(tmp_path: Path, version: str, scenario: list[dict[str, Any]] | None = None) -> CodexOptions:
    wrapper = tmp_path / "fake-codex"
    wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE}\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    env = {"FAKE_SCENARIO": json.dumps(scenario or []), "FAKE_VERSION": version}
    return CodexOptions(codex_bin=wrapper, env=env)


async def test_below_the_minimum_the_provider_refuses_naming_both_versions(tmp_path: Path) -> None:
    provider = CodexProvider(_options(tmp_path, "0.136.0"))
    with pytest.raises(ProviderUnavailable) as info:
        await provider.start()
    await provider.shutdown()
    assert "0.136.0" in str(info.value) and MINIMUM_CODEX_VERSION in str(info.value)
    assert not info.value.retryable
    assert provider.pid is None  # the child was ended


async def test_between_minimum_and_pinned_it_works_and_warns_once(tmp_path: Path) -> None:
    assert MINIMUM_CODEX_VERSION != PINNED_CODEX_VERSION, "a range of one version: nothing lies between"
    version = MINIMUM_CODEX_VERSION
    streams: list[list[Event]] = []
    async with CodexProvider(_options(tmp_path, version)) as provider:
        assert provider.version == version
        for _ in range(2):
            handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
            streams.append([e async for e in handle.events()])
        board = []
        async for notice in provider.notices():
            board.append(notice)
            if isinstance(notice, System) and notice.subtype == "codex_version":
                break
    notices = [[e for e in s if isinstance(e, System) and e.subtype == "codex_version"] for s in streams]
    assert [len(n) for n in notices] == [1, 0]  # once, in the first session's stream
    assert notices[0][0].data["version"] == version and PINNED_CODEX_VERSION in notices[0][0].data["message"]
    assert all(isinstance(s[-1], Result) for s in streams)


async def test_the_pinned_version_says_nothing(tmp_path: Path) -> None:
    async with CodexProvider(_options(tmp_path, PINNED_CODEX_VERSION)) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        events = [e async for e in handle.events()]
        assert provider.version == PINNED_CODEX_VERSION
    assert not [e for e in events if isinstance(e, System) and e.subtype == "codex_version"]


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (401, "auth_failed", False),
        (403, "auth_failed", False),
        (404, "model_not_found", False),
        (503, "server_error", True),
        (429, "rate_limited", True),
    ],
)
async def test_other_with_an_http_status_is_classified_by_the_status(
    tmp_path: Path, status: int, code: str, retryable: bool
) -> None:
    # What codex before 0.163 sends for an HTTP error: the catch-all kind, the status only in the text.
    message = f'unexpected status {status} Whatever: {{"detail": "no"}}'
    error = {"message": message, "codexErrorInfo": "other"}
    failed = {"turn": {"status": "failed", "error": error}}
    scenario = [{"method": "turn/completed", "params": failed, "notify": True}]
    async with CodexProvider(_options(tmp_path, MINIMUM_CODEX_VERSION, scenario)) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=tmp_path))
        events = [e async for e in handle.events()]
    last = events[-1]
    assert isinstance(last, Error) and (last.code, last.retryable) == (code, retryable)
    assert last.data["http_status"] == status


async def test_codex_exec_refuses_an_old_codex_and_runs_one_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    binary = tmp_path / "old-codex"
    binary.write_text("#!/bin/sh\necho codex-cli $FAKE_CODEX_VERSION\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("FAKE_CODEX_VERSION", "0.136.0")
    with pytest.raises(ProviderUnavailable) as info:
        await CodexExecProvider(CodexOptions(codex_bin=binary)).start()
    assert "0.136.0" in str(info.value) and MINIMUM_CODEX_VERSION in str(info.value)
    monkeypatch.setenv("FAKE_CODEX_VERSION", MINIMUM_CODEX_VERSION)
    between = CodexExecProvider(CodexOptions(codex_bin=binary))
    await between.start()
    assert between.version == MINIMUM_CODEX_VERSION


@pytest.mark.e2e
async def test_codex_exec_between_warns_once_in_its_first_turn(
    codex_options: CodexOptions, scripted_model: ScriptedModelServer, workspace: Path, tmp_path: Path
) -> None:
    # The real binary behind a wrapper that reports the minimum as its version.
    wrapper = tmp_path / "codex"
    wrapper.write_text(
        f'#!/bin/sh\nif [ "$1" = --version ]; then echo codex-cli {MINIMUM_CODEX_VERSION}; exit 0; fi\n'
        f'exec {find_codex()} "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    scripted_model.enqueue(Reply.text("one"), Reply.text("two"))
    options = CodexOptions(
        codex_bin=wrapper, config=codex_options.config, env=codex_options.env, skip_git_repo_check=True
    )
    async with CodexExecProvider(options) as provider:
        handle = await provider.spawn(Spec(prompt="p", cwd=workspace))
        first = [e async for e in handle.events()]
        await handle.send("again")
        second = [e async for e in handle.events()]
        assert provider.version == MINIMUM_CODEX_VERSION
    notices = [
        [e for e in s if isinstance(e, System) and e.subtype == "codex_version"] for s in (first, second)
    ]
    assert [len(n) for n in notices] == [1, 0]
    assert PINNED_CODEX_VERSION in notices[0][0].data["message"]
    assert isinstance(first[-1], Result) and isinstance(second[-1], Result)
