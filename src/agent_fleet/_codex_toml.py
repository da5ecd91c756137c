"""Render Python values as TOML inline values for codex ``-c key=<toml>`` overrides."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from agent_fleet.errors import UsageError

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def toml_string(text: str) -> str:
    """A TOML basic string: quotes, backslashes and control characters (incl. DEL) escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch < " " or ch == "\x7f":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def toml_key(key: str) -> str:
    """Quote a single key segment unless it is a bare key."""
    return key if _BARE_KEY.match(key) else toml_string(key)


def toml_value(value: Any) -> str:
    """Render ``value`` (str, int, float, bool, list, tuple, dict) as an inline TOML value.

    Raises ``UsageError`` for types TOML cannot express (None, NaN, objects).
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise UsageError(f"cannot render {value!r} as a TOML value")
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        parts = []
        for k, v in value.items():
            if not isinstance(k, str):
                raise UsageError(f"TOML table keys must be strings, not {k!r}")
            parts.append(f"{toml_key(k)} = {toml_value(v)}")
        return "{" + ", ".join(parts) + "}"
    raise UsageError(f"cannot render {type(value).__name__} value {value!r} as a TOML value")


def config_args(config: Mapping[str, Any]) -> list[str]:
    """``{"a.b": 1}`` -> ``["-c", "a.b=1"]``; keys are dotted paths passed through as given."""
    args: list[str] = []
    for key, value in config.items():
        if not key or key.strip() != key:
            raise UsageError(f"invalid codex config key {key!r}")
        args += ["-c", f"{key}={toml_value(value)}"]
    return args
