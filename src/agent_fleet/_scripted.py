"""Is a run served by ``agent_fleet.testing``'s scripted model? Then everything that names its model
says so (issue 33): a scripted run must never read as a real model's work.

The test kit marks what it wires: a codex model provider named ``SCRIPTED_MODEL_NAME`` (its
``codex_config()``), an environment variable ``SCRIPTED_ENV`` (its Claude Code environment).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["SCRIPTED_ENV", "SCRIPTED_MODEL_NAME", "scripted_label", "served_by_scripted_model"]

SCRIPTED_MODEL_NAME: Final = "agent-fleet scripted model"
SCRIPTED_ENV: Final = "AGENT_FLEET_SCRIPTED_MODEL"


def _model_provider(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    name = config.get("model_provider")
    if not isinstance(name, str):
        return None
    entry = config.get(f"model_providers.{name}")
    if entry is None:
        nested = config.get("model_providers")
        entry = nested.get(name) if isinstance(nested, Mapping) else None
    return entry if isinstance(entry, Mapping) else None


def served_by_scripted_model(options: Any) -> bool:
    """Whether a provider with ``options`` talks to the test kit's scripted model (codex: the model
    provider its config chooses is the kit's; Claude Code: the kit's environment marker is set)."""
    config = getattr(options, "config", None)
    if isinstance(config, Mapping):
        entry = _model_provider(config)
        if entry is not None and entry.get("name") == SCRIPTED_MODEL_NAME:
            return True
    env = getattr(options, "env", None)
    return isinstance(env, Mapping) and bool(env.get(SCRIPTED_ENV))


def scripted_label(model: str | None) -> str:
    """How a scripted run's model is named for people: never as the real model it stands in for."""
    return f"scripted (as {model})" if model else "scripted"
