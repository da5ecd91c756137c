"""Translation of a ``Spec`` (+ ``ClaudeOptions``) into ``ClaudeAgentOptions`` keyword arguments.

``plan_session(spec, options, ...)`` decides, for every ``Spec`` field, where it goes: an SDK option,
the first user message, handled locally by the handle (approval bridge, turn timer), or not
translated (with a reason, reported to the caller as ``System(subtype="spec_unsupported")``).
The only I/O is reading local image files named in ``Spec.images``.

Where the fields go:

- ``prompt`` + ``mode`` (``apply_mode`` prefix) + ``images`` -> the first user message;
- ``cwd`` -> ``cwd`` (resolved; default: the current directory). Claude Code keeps transcripts per
  working directory, so ``resume`` needs the same ``cwd`` as the first run;
- ``model`` -> ``model`` (else ``ClaudeOptions.model``);
- ``base_instructions`` -> ``system_prompt`` (replaces Claude Code's own system prompt),
  ``developer_instructions`` -> appended to it (to Claude Code's preset prompt when no base is set);
- ``reasoning_effort`` -> ``effort`` (``low``/``medium``/``high``/``xhigh``/``max``; ``minimal`` and
  ``none`` become ``low``; anything else is not translated);
- ``mcp_servers`` -> ``mcp_servers`` (Claude Code's format: ``{"type": "stdio", "command", "args"}``,
  ``{"type": "http"|"sse", "url"}``);
- ``output_schema`` -> ``output_format={"type": "json_schema", "schema": ...}``;
- ``config`` -> ``settings`` (inline Claude Code settings JSON, the highest user-controlled layer);
- ``permission``, ``timeout``, ``idle_timeout`` -> local (approval bridge, turn timers);
- ``tools`` -> local: an in-process MCP server named ``agent_fleet`` (``claude._tools``);
- ``sandbox`` -> not translated: agent-fleet does not configure Claude Code's OS sandbox; every tool
  call still goes through the approval policy.

``ClaudeOptions.setting_sources`` -> ``setting_sources`` (default ``[]``: the CLI loads no user,
project or local settings file, so no repository hook, permission rule or MCP server applies).
"""

from __future__ import annotations

import base64
import json
import mimetypes
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Final

from agent_fleet._provider.prompt import apply_mode
from agent_fleet.claude.options import ClaudeOptions
from agent_fleet.contract import Spec, Untranslated
from agent_fleet.errors import UsageError

__all__ = ["ClaudePlan", "Untranslated", "plan_session", "user_content"]

#: Makes the CLI consult ``can_use_tool`` for whatever its rules would prompt for; a PreToolUse hook
#: answering "ask" (see ``handle``) turns every other tool call into a prompt too.
PERMISSION_MODE: Final = "default"
#: The in-process MCP server that serves ``Spec.tools`` (``claude._tools``); Claude names its tools
#: ``mcp__agent_fleet__<name>``.
TOOLS_SERVER: Final = "agent_fleet"

EFFORTS: Final = frozenset({"low", "medium", "high", "xhigh", "max"})
EFFORT_ALIASES: Final = {"minimal": "low", "none": "low"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudePlan:
    """``options``: ``ClaudeAgentOptions`` keyword arguments (callbacks are added by the handle);
    ``content``: the first user message's content; ``cwd``: the resolved working directory."""

    options: dict[str, Any]
    content: str | list[dict[str, Any]]
    cwd: str
    local: tuple[str, ...] = ()
    untranslated: tuple[Untranslated, ...] = ()


def _image_block(image: str | os.PathLike[str]) -> dict[str, Any]:
    value = os.fspath(image)
    if value.startswith(("http://", "https://")):
        return {"type": "image", "source": {"type": "url", "url": value}}
    if value.startswith("data:"):
        header, _, data = value.partition(",")
        media_type = header.removeprefix("data:").split(";")[0] or "image/png"
        if ";base64" not in header:
            raise UsageError("Spec.images: data: URLs must be base64-encoded")
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    path = Path(value).expanduser()
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"Spec.images: cannot read {path}: {exc}") from exc
    media_type = mimetypes.guess_type(path.name)[0] or "image/png"
    data = base64.b64encode(raw).decode("ascii")
    return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}


def user_content(text: str, images: tuple[str | os.PathLike[str], ...] = ()) -> str | list[dict[str, Any]]:
    """A user message's content: the text alone, or a text block then one image block per image."""
    if not images:
        return text
    return [{"type": "text", "text": text}, *(_image_block(i) for i in images)]


def _system_prompt(base: str | None, developer: str | None) -> str | dict[str, Any]:
    if base is not None:
        return base + (f"\n\n{developer}" if developer else "")
    preset: dict[str, Any] = {"type": "preset", "preset": "claude_code"}
    if developer:
        preset["append"] = developer
    return preset


def plan_session(spec: Spec, options: ClaudeOptions, *, session_id: str, resume: bool) -> ClaudePlan:
    """Translate ``spec`` for a new session with id ``session_id``, or the resumption of one."""
    cwd = str(Path(spec.cwd if spec.cwd is not None else os.getcwd()).expanduser().resolve())
    opts: dict[str, Any] = {
        "cwd": cwd,
        "permission_mode": PERMISSION_MODE,
        "include_partial_messages": True,  # TextDelta events
        # No settings file is loaded unless the caller names its source (ClaudeOptions.setting_sources):
        # a repository's .claude/settings.json could otherwise run hooks outside the approval policy.
        "setting_sources": list(options.setting_sources),
    }
    if resume:
        opts["resume"] = session_id
    else:
        opts["session_id"] = session_id
    if options.cli_path is not None:
        opts["cli_path"] = os.fspath(options.cli_path)
    if options.env or spec.env:
        # The CLI process's environment, which Claude Code's tools (Bash) inherit: the session's own
        # variables over the provider's.
        opts["env"] = {**(options.env or {}), **spec.env}
    if options.extra_args:
        opts["extra_args"] = dict(options.extra_args)
    local: list[str] = []
    untranslated: list[Untranslated] = []

    for f in fields(Spec):
        name = f.name
        value = getattr(spec, name)
        match name:
            case "prompt" | "mode" | "images" | "cwd":
                pass  # the first user message / above
            case "model":
                model = value if value is not None else options.model
                if model is not None:
                    opts["model"] = model
            case "base_instructions" | "developer_instructions":
                pass  # combined below
            case "reasoning_effort":
                if value is not None:
                    effort = EFFORT_ALIASES.get(value, value)
                    if effort in EFFORTS:
                        opts["effort"] = effort
                    else:
                        untranslated.append(
                            Untranslated(name, f"Claude Code knows efforts {sorted(EFFORTS)}, not {value!r}")
                        )
            case "sandbox":
                if value is not None:
                    untranslated.append(
                        Untranslated(
                            name,
                            "the Claude provider does not configure Claude Code's OS sandbox; "
                            "every tool call is still decided by the approval policy",
                        )
                    )
            case "permission" | "timeout" | "idle_timeout":
                local.append(name)  # approval bridge / turn timer
            case "answers":
                if value:
                    local.append(name)  # the handle answers AskUserQuestion with them
            case "mcp_servers":
                if value:
                    if TOOLS_SERVER in value:
                        raise UsageError(
                            f"Spec.mcp_servers: the name {TOOLS_SERVER!r} is kept for Spec.tools"
                        )
                    opts["mcp_servers"] = {str(k): dict(v) for k, v in value.items()}
            case "tools":
                if value:
                    local.append(name)  # an in-process MCP server the handle builds (claude._tools)
            case "output_schema":
                if value is not None:
                    opts["output_format"] = {"type": "json_schema", "schema": dict(value)}
            case "config":
                if value:
                    opts["settings"] = json.dumps(dict(value))
            case "env":
                pass  # the CLI process's environment, above
            case "max_turns" | "max_cost_usd" | "temp_dir":
                if value is not None:  # not wired yet on this provider
                    untranslated.append(Untranslated(name, "not yet supported by the Claude provider"))
            case _:  # a new Spec field must be placed deliberately
                untranslated.append(Untranslated(name, "not supported by the Claude provider"))

    opts["system_prompt"] = _system_prompt(spec.base_instructions, spec.developer_instructions)
    content = user_content(apply_mode(spec.prompt, spec.mode), tuple(spec.images))
    return ClaudePlan(
        options=opts, content=content, cwd=cwd, local=tuple(local), untranslated=tuple(untranslated)
    )
