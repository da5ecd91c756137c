"""The provider registry: one ``ProviderEntry`` per provider name (``codex``, ``codex-exec``, ``claude``).

An entry says what the runner needs to know before it makes a provider: the options type its factory
takes, the factory, the upfront availability check (no worktree, no child process: the binary is found
and, for codex, a credential source is present unless the config overrides point codex at another model
provider), which entry reviews its work, and (through ``capabilities()``) what it can do. The provider
classes are imported lazily, so a missing optional dependency is a clear ``ProviderUnavailable``.

A new provider plugs in with ``register(ProviderEntry(...))``; nothing else in the runner or the CLI
names a provider class.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, cast

from agent_fleet.claude.options import ClaudeOptions
from agent_fleet.codex import CodexOptions, credential_sources, find_codex
from agent_fleet.contract import Capabilities, Provider, Spec
from agent_fleet.errors import AgentFleetError, AuthenticationError, ProviderUnavailable, UsageError

__all__ = [
    "PROVIDER_NAMES",
    "ProviderEntry",
    "ProviderName",
    "approvals_enforced",
    "check_permission_enforced",
    "check_provider",
    "make_provider",
    "os_sandbox",
    "provider_entry",
    "provider_state_dir",
    "register",
    "uses_custom_model_provider",
]

ProviderName = Literal["codex", "codex-exec", "claude"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderEntry:
    """One provider in the registry.

    - ``provider_class``: ``"module:Class"``, imported when first needed; the class takes one argument,
      an ``options_type`` instance or None (its defaults).
    - ``check``: ``check(options) -> description`` (never a secret); raises ``ProviderUnavailable`` or
      ``AuthenticationError``. The default only imports the class.
    - ``reviewer``: the entry whose provider reviews this one's work (``Provider.review``), or None.
    - ``state_dir``: a directory the provider initialises at start; starts sharing one are serialised
      (the Ray backend's node lock). None: no lock needed.
    - ``default_model``: the model its options choose when a ``Spec`` names none, or None.
    """

    name: str
    options_type: type[Any]
    provider_class: str
    check: Callable[[Any], str] | None = None
    reviewer: str | None = None
    state_dir: Callable[[Any], Path | None] | None = None
    default_model: Callable[[Any], str | None] | None = None

    def load(self) -> type[Provider]:
        module_name, _, attr = self.provider_class.partition(":")
        try:
            module = importlib.import_module(module_name)
            return cast(type[Provider], getattr(module, attr))
        except (ImportError, AttributeError) as exc:
            raise ProviderUnavailable(
                f"the {self.name} provider is not available in this installation "
                f"({module_name}.{attr}: {exc})"
            ) from exc

    def options(self, options: Any) -> Any:
        """``options``, or the options type's defaults for None; ``UsageError`` for a wrong type."""
        if options is None:
            return self.options_type()
        if not isinstance(options, self.options_type):
            raise UsageError(
                f"the {self.name} provider takes {self.options_type.__name__}, not {type(options).__name__}"
            )
        return options

    def make(self, options: Any = None) -> Provider:
        """A new, not yet started provider."""
        return self.load()(self.options(options))  # type: ignore[call-arg]

    def capabilities(self) -> Capabilities:
        return self.make().capabilities


_REGISTRY: dict[str, ProviderEntry] = {}


def register(entry: ProviderEntry) -> None:
    """Add (or replace) ``entry`` under its name."""
    _REGISTRY[entry.name] = entry


def provider_entry(name: str) -> ProviderEntry:
    """The entry called ``name``; ``UsageError`` naming the choices for an unknown one."""
    entry = _REGISTRY.get(name)
    if entry is None:
        raise UsageError(f"unknown provider {name!r}: choose one of {', '.join(_REGISTRY)}")
    return entry


def uses_custom_model_provider(config: Mapping[str, Any]) -> bool:
    """True when the codex config overrides choose a model provider (then no OpenAI credential is needed)."""
    return "model_provider" in config


def _check_codex(options: CodexOptions) -> str:
    binary = find_codex(options.codex_bin)
    if uses_custom_model_provider(options.config):
        return f"{binary} (model provider {options.config['model_provider']!r} from the config overrides)"
    sources = credential_sources(options.codex_home, environ=options.child_env())
    if not sources:
        raise AuthenticationError(
            "no OpenAI credential found: set OPENAI_API_KEY or CODEX_API_KEY, or run `codex login` "
            "(or choose another model provider with -c model_provider=...)"
        )
    return f"{binary} (credential: {sources[0].name})"


def _codex_home(options: CodexOptions) -> Path:
    home = options.child_env().get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex").resolve()


def check_provider(name: str, options: Any = None) -> str:
    """Check ``name`` can run with ``options``; return a short description of what will be used.

    Raises ``UsageError`` for an unknown name or wrong options type, ``ProviderUnavailable`` when the
    binary or module is missing, ``AuthenticationError`` when no credential source is present.
    """
    entry = provider_entry(name)
    opts = entry.options(options)
    entry.load()
    if entry.check is None:
        return f"{name} ({entry.provider_class})"
    return entry.check(opts)


def make_provider(name: str, options: Any = None) -> Provider:
    """A new, not yet started provider called ``name`` (``options``: the entry's options type)."""
    return provider_entry(name).make(options)


def provider_state_dir(name: str, options: Any) -> Path | None:
    """The directory whose starts are serialised for ``name`` (see ``ProviderEntry.state_dir``)."""
    entry = provider_entry(name)
    return entry.state_dir(entry.options(options)) if entry.state_dir is not None else None


def default_model(name: str, options: Any) -> str | None:
    """The model ``name``'s ``options`` choose when a ``Spec`` names none (None when unknown)."""
    entry = provider_entry(name)
    return entry.default_model(entry.options(options)) if entry.default_model is not None else None


def _codex_model(options: CodexOptions) -> str | None:
    model = options.config.get("model")  # a `-c model=...` override
    return model if isinstance(model, str) else None


def check_permission_enforced(
    spec: Spec, provider_name: str, capabilities: Capabilities | None = None
) -> None:
    """``UsageError`` when ``spec`` carries approval rules the provider cannot enforce (it never asks for
    approval, e.g. ``codex exec``), naming the providers that can. Rules nobody enforces must not look
    like protection."""
    if spec.permission is None:
        return
    caps = capabilities if capabilities is not None else provider_entry(provider_name).capabilities()
    if caps.enforces_approvals:
        return
    able = [name for name, entry in _REGISTRY.items() if entry.capabilities().enforces_approvals]
    raise UsageError(
        f"the {provider_name} provider cannot enforce approval rules (--allow, --deny, --default-approval, "
        f"--allow-host, --allow-mcp, Spec.permission): it never asks before running a command, so only "
        f"its sandbox guards the run; use a provider that can: {', '.join(able)}"
    )


def approvals_enforced(name: str, provider: Provider | None = None) -> bool | None:
    """Whether ``provider`` (else the entry ``name``) asks for approvals; None when unknown."""
    try:
        caps = provider.capabilities if provider is not None else provider_entry(name).capabilities()
    except AgentFleetError:
        return None
    return caps.enforces_approvals


def os_sandbox(name: str, provider: Provider | None = None) -> dict[str, str | None]:
    """``{"os_sandbox": ...}``: what confines ``provider``'s (else the entry ``name``'s) commands
    (``Capabilities.os_sandbox``, None when nothing does: the approval policy is the only guard), or
    ``{}`` when unknown."""
    try:
        caps = provider.capabilities if provider is not None else provider_entry(name).capabilities()
    except AgentFleetError:
        return {}
    return {"os_sandbox": caps.os_sandbox}


def _env_note(options: ClaudeOptions) -> str:
    where = os.fspath(options.cli_path) if options.cli_path is not None else "claude-agent-sdk"
    return f"claude ({where})"


register(
    ProviderEntry(
        name="codex",
        options_type=CodexOptions,
        provider_class="agent_fleet.codex.appserver:CodexProvider",
        check=_check_codex,
        reviewer="codex",
        state_dir=_codex_home,
        default_model=_codex_model,
    )
)
register(
    ProviderEntry(
        name="codex-exec",
        options_type=CodexOptions,
        provider_class="agent_fleet.codex.exec:CodexExecProvider",
        check=_check_codex,
        reviewer="codex",
        state_dir=_codex_home,
        default_model=_codex_model,
    )
)
register(
    ProviderEntry(
        name="claude",
        options_type=ClaudeOptions,
        provider_class="agent_fleet.claude:ClaudeProvider",
        check=_env_note,
        default_model=lambda options: options.model,
    )
)

PROVIDER_NAMES: Final[tuple[str, ...]] = tuple(_REGISTRY)  # the built-in entries
