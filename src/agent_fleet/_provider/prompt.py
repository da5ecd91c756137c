"""Provider-neutral prompt helpers: the ``Spec.mode`` prefix and structured-output parsing."""

from __future__ import annotations

import json
from typing import Any

from agent_fleet.contract import Mode

MODE_PREFIXES: dict[str, str] = {
    "build": "",
    "plan": (
        "[mode: plan] Do not modify files and do not run commands that change state. "
        "Investigate as needed, then answer with a concrete step-by-step plan.\n\n"
    ),
    "chat": "[mode: chat] Answer conversationally. Do not modify files or run commands.\n\n",
}


def apply_mode(prompt: str, mode: Mode) -> str:
    """Prefix ``prompt`` for ``mode`` (``build`` leaves it unchanged)."""
    return MODE_PREFIXES[mode] + prompt


def parse_structured(text: str) -> Any:
    """Parse the final message of a turn run with an output schema; ``None`` when it is not JSON."""
    stripped = text.strip()
    if stripped.startswith("```"):
        # Models sometimes fence JSON even when asked for raw output.
        stripped = stripped.strip("`")
        stripped = stripped.removeprefix("json").strip()
    try:
        return json.loads(stripped)
    except ValueError:
        return None
