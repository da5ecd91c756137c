"""Lazy import of ``claude-agent-sdk``: ``agent_fleet.claude`` imports without it, spawning needs it."""

from __future__ import annotations

import importlib
from types import ModuleType

from agent_fleet.errors import ProviderUnavailable

INSTALL_HINT = "pip install 'agent-fleet[claude]'"


def require_sdk() -> ModuleType:
    """The ``claude_agent_sdk`` module; ``ProviderUnavailable`` naming the extra when it is missing."""
    try:
        return importlib.import_module("claude_agent_sdk")
    except ImportError as exc:
        raise ProviderUnavailable(
            f"the Claude provider needs the claude-agent-sdk package ({exc}); "
            f"install it with: {INSTALL_HINT}",
            tried=["import claude_agent_sdk"],
        ) from exc
