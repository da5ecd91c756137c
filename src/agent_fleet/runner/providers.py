"""Choosing and checking a provider by name: ``codex`` (app-server), ``codex-exec`` and ``claude``.

``check_provider`` is the upfront check a run makes before any work (no worktree, no child process):
the binary is found and, for codex, a credential source is present unless the config overrides point
codex at another model provider (a ``model_provider`` key). ``make_provider`` imports the exec and
Claude providers lazily, so a missing optional dependency is a clear ``ProviderUnavailable``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any, Final, Literal, cast

from agent_fleet.codex import CodexOptions, CodexProvider, credential_sources, find_codex
from agent_fleet.contract import Provider
from agent_fleet.errors import AuthenticationError, ProviderUnavailable, UsageError

__all__ = ["PROVIDER_NAMES", "ProviderName", "check_provider", "make_provider", "uses_custom_model_provider"]

ProviderName = Literal["codex", "codex-exec", "claude"]
PROVIDER_NAMES: Final[tuple[str, ...]] = ("codex", "codex-exec", "claude")

_LAZY: Final[dict[str, tuple[str, str]]] = {
    "codex-exec": ("agent_fleet.codex.exec", "CodexExecProvider"),
    "claude": ("agent_fleet.claude", "ClaudeProvider"),
}


def uses_custom_model_provider(config: Mapping[str, Any]) -> bool:
    """True when the codex config overrides choose a model provider (then no OpenAI credential is needed)."""
    return "model_provider" in config


def _lazy_class(name: str) -> type[Any]:
    module_name, attr = _LAZY[name]
    try:
        module = importlib.import_module(module_name)
        return cast(type[Any], getattr(module, attr))
    except (ImportError, AttributeError) as exc:
        raise ProviderUnavailable(
            f"the {name} provider is not available in this installation ({module_name}.{attr}: {exc})"
        ) from exc


def check_provider(name: str, options: CodexOptions | None = None) -> str:
    """Check ``name`` can run; return a short description of what will be used (never a secret).

    Raises ``UsageError`` for an unknown name, ``ProviderUnavailable`` when the binary or module is
    missing, ``AuthenticationError`` when no credential source is present.
    """
    if name not in PROVIDER_NAMES:
        raise UsageError(f"unknown provider {name!r}: choose one of {', '.join(PROVIDER_NAMES)}")
    if name == "claude":
        _lazy_class(name)
        return "claude (claude-agent-sdk)"
    if name == "codex-exec":
        _lazy_class(name)
    opts = options or CodexOptions()
    binary = find_codex(opts.codex_bin)
    if uses_custom_model_provider(opts.config):
        return f"{binary} (model provider {opts.config['model_provider']!r} from the config overrides)"
    env = opts.child_env()
    sources = credential_sources(opts.codex_home, environ=env)
    if not sources:
        raise AuthenticationError(
            "no OpenAI credential found: set OPENAI_API_KEY or CODEX_API_KEY, or run `codex login` "
            "(or choose another model provider with -c model_provider=...)"
        )
    return f"{binary} (credential: {sources[0].name})"


def make_provider(name: str, options: CodexOptions | None = None) -> Provider:
    """A new, not yet started provider called ``name``. ``options`` apply to the codex providers."""
    if name == "codex":
        return CodexProvider(options)
    if name == "codex-exec":
        return cast(Provider, _lazy_class(name)(options))
    if name == "claude":
        return cast(Provider, _lazy_class(name)())
    raise UsageError(f"unknown provider {name!r}: choose one of {', '.join(PROVIDER_NAMES)}")
