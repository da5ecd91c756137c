"""The provider registry: entries, options types, reviewers, and plugging in a new provider."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from agent_fleet.claude import ClaudeOptions, ClaudeProvider
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.contract import Capabilities, Handle, Provider, Spec
from agent_fleet.errors import Unsupported, UsageError
from agent_fleet.runner import (
    PROVIDER_NAMES,
    ProviderEntry,
    check_provider,
    make_provider,
    provider_entry,
    register,
)
from agent_fleet.runner import providers as registry


def test_built_in_entries() -> None:
    assert PROVIDER_NAMES == ("codex", "codex-exec", "claude")
    assert provider_entry("codex").options_type is CodexOptions
    assert provider_entry("claude").options_type is ClaudeOptions
    assert [provider_entry(n).reviewer for n in PROVIDER_NAMES] == ["codex", "codex", None]
    assert provider_entry("codex").capabilities().supports_review
    assert not provider_entry("claude").capabilities().supports_review


def test_make_provider_passes_the_entry_s_options() -> None:
    options = ClaudeOptions(model="m")
    provider = make_provider("claude", options)
    assert isinstance(provider, ClaudeProvider) and provider.options is options
    codex = make_provider("codex")
    assert isinstance(codex, CodexProvider) and codex.options == CodexOptions()
    assert codex.pid is None  # not started


def test_wrong_options_type_or_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="takes ClaudeOptions, not CodexOptions"):
        make_provider("claude", CodexOptions())
    with pytest.raises(UsageError, match="unknown provider 'nope'"):
        make_provider("nope")
    with pytest.raises(UsageError, match="unknown provider"):
        check_provider("nope")


@dataclass(frozen=True)
class _EchoOptions:
    greeting: str = "hi"


class _EchoProvider(Provider):
    name = "echo"

    def __init__(self, options: _EchoOptions) -> None:
        self.options = options

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            supports_injection=False,
            supports_resume=False,
            supports_tool_plugins=False,
            supports_output_schema=False,
            supports_reasoning_effort=False,
            needs_permission_config=False,
            emits_subagent_events=False,
            tool_permission_format="none",
        )

    async def spawn(self, spec: Spec) -> Handle:
        raise NotImplementedError

    async def resume(self, session_id: str, spec: Spec) -> Handle:
        raise NotImplementedError

    async def shutdown(self) -> None:
        pass


@pytest.fixture
def echo_entry() -> Iterator[ProviderEntry]:
    entry = ProviderEntry(
        name="echo",
        options_type=_EchoOptions,
        provider_class=f"{__name__}:_EchoProvider",
        check=lambda options: f"echo says {options.greeting}",
    )
    register(entry)
    try:
        yield entry
    finally:
        registry._REGISTRY.pop("echo", None)


async def test_a_new_provider_plugs_in_through_the_registry(echo_entry: ProviderEntry) -> None:
    assert check_provider("echo", _EchoOptions("hello")) == "echo says hello"
    provider = make_provider("echo", _EchoOptions("hello"))
    assert isinstance(provider, _EchoProvider) and provider.options == _EchoOptions("hello")
    # The contract's defaults: no review, no model list, no child process.
    assert provider.pid is None and not provider.capabilities.supports_review
    with pytest.raises(Unsupported):
        await provider.list_models()
    target: Any = None
    with pytest.raises(Unsupported):
        await provider.review(target, cwd=".")
    # ... no session store, no notice stream, no rate limits reported.
    assert provider.rate_limits is None
    with pytest.raises(Unsupported):
        provider.notices()
    with pytest.raises(Unsupported):
        await provider.list_sessions()
    with pytest.raises(Unsupported):
        await provider.read_session("s")
    with pytest.raises(Unsupported):
        await provider.archive_session("s")


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("codex", "codex's sandbox"),
        ("codex-exec", "nothing runs unsandboxed"),
        ("claude", "Claude Code's sandbox"),
    ],
)
def test_every_provider_says_what_its_wall_is(name: str, says: str) -> None:
    """Issue #27: ``Capabilities`` says, per provider, what confines the agent's commands."""
    wall = provider_entry(name).capabilities().os_sandbox
    assert wall is not None and says in wall, wall
