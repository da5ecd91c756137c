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
- ``config`` -> ``settings`` (inline Claude Code settings JSON, the highest user-controlled layer); a
  ``sandbox`` key there is a ``UsageError``: the sandbox is ``Spec.sandbox``'s;
- ``sandbox`` -> the settings' ``sandbox`` section (``claude._sandbox``): Claude Code's own OS sandbox,
  ``workspace-write`` when unset, its network from ``permission.allowed_hosts``;
- ``temp_dir`` -> the CLI's ``CLAUDE_CODE_TMPDIR`` and ``TMPDIR`` and a writable root of the sandbox
  (the provider makes a private one when it is None);
- ``max_turns`` -> ``max_turns`` (``--max-turns``: model round trips per turn); ``max_cost_usd`` ->
  ``max_budget_usd`` (``--max-budget-usd``: Claude Code counts it for the whole CLI process, i.e. from
  ``spawn``/``resume`` on, across turns);
- ``permission``, ``timeout``, ``idle_timeout`` -> local (approval bridge, turn timers);
- ``tools`` -> local: an in-process MCP server named ``agent_fleet`` (``claude._tools``).

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
from agent_fleet.claude import _sandbox
from agent_fleet.claude._sandbox import SessionTemp
from agent_fleet.claude.options import ClaudeOptions
from agent_fleet.contract import Spec, Untranslated
from agent_fleet.errors import UsageError

__all__ = ["ClaudePlan", "Untranslated", "plan_session", "user_content"]

#: Makes the CLI consult ``can_use_tool`` for whatever its rules would prompt for; a PreToolUse hook
#: answering "ask" (see ``handle``) turns every other tool call into a prompt too.
PERMISSION_MODE: Final = "default"
#: ``Spec.sandbox`` when it is unset: a Claude session always has a workspace (its working directory).
SANDBOX_DEFAULT: Final = "workspace-write"
#: The in-process MCP server that serves ``Spec.tools`` (``claude._tools``); Claude names its tools
#: ``mcp__agent_fleet__<name>``.
TOOLS_SERVER: Final = "agent_fleet"

EFFORTS: Final = frozenset({"low", "medium", "high", "xhigh", "max"})
EFFORT_ALIASES: Final = {"minimal": "low", "none": "low"}


@dataclass(frozen=True, slots=True, kw_only=True)
class ClaudePlan:
    """``options``: ``ClaudeAgentOptions`` keyword arguments (callbacks are added by the handle);
    ``content``: the first user message's content; ``cwd``: the resolved working directory;
    ``sandbox``: the ``Spec.sandbox`` in force; ``no_os_sandbox``: why the session runs without Claude
    Code's sandbox (``danger-full-access``, or a sandbox that cannot start where the caller allowed
    that), None when it runs inside it."""

    options: dict[str, Any]
    content: str | list[dict[str, Any]]
    cwd: str
    local: tuple[str, ...] = ()
    untranslated: tuple[Untranslated, ...] = ()
    sandbox: str = SANDBOX_DEFAULT
    no_os_sandbox: str | None = None


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


def plan_session(
    spec: Spec,
    options: ClaudeOptions,
    *,
    session_id: str,
    resume: bool,
    temp: SessionTemp | None = None,
    sandbox_unavailable: str | None = None,
    fork_of: str | None = None,
) -> ClaudePlan:
    """Translate ``spec`` for a new session with id ``session_id``, or the resumption of one, or (with
    ``fork_of``) a new session ``session_id`` that starts with a copy of session ``fork_of``'s history
    (``--resume fork_of --fork-session --session-id session_id``).

    ``temp``: the session's temporary directories (``claude._sandbox.session_temp``; the provider makes
    them); ``sandbox_unavailable``: why Claude Code's sandbox cannot start here, passed only where the
    caller allowed running without it (``ClaudeOptions.sandbox_optional``)."""
    cwd = str(Path(spec.cwd if spec.cwd is not None else os.getcwd()).expanduser().resolve())
    opts: dict[str, Any] = {
        "cwd": cwd,
        "permission_mode": PERMISSION_MODE,
        "include_partial_messages": True,  # TextDelta events
        # No settings file is loaded unless the caller names its source (ClaudeOptions.setting_sources):
        # a repository's .claude/settings.json could otherwise run hooks outside the approval policy.
        "setting_sources": list(options.setting_sources),
    }
    if fork_of is not None:
        opts.update(resume=fork_of, fork_session=True, session_id=session_id)
    elif resume:
        opts["resume"] = session_id
    else:
        opts["session_id"] = session_id
    if options.cli_path is not None:
        opts["cli_path"] = os.fspath(options.cli_path)
    env = {**(options.env or {}), **spec.env}
    if temp is not None:
        # The CLI keeps its own temporary files there and gives its sandboxed commands a directory of
        # its own inside it as TMPDIR; unsandboxed children (hooks, MCP servers) get it as TMPDIR.
        env.update(CLAUDE_CODE_TMPDIR=temp.cli, TMPDIR=temp.cli)
    if env:
        # The CLI process's environment, which Claude Code's tools (Bash) inherit: the session's own
        # variables over the provider's, the session's temporary directory over both.
        opts["env"] = env
    if options.extra_args:
        opts["extra_args"] = dict(options.extra_args)
    local: list[str] = []
    untranslated: list[Untranslated] = []
    settings: dict[str, Any] = {}
    sandbox = spec.sandbox or SANDBOX_DEFAULT
    no_os_sandbox: str | None = None

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
                if sandbox == "danger-full-access":
                    no_os_sandbox = "Spec.sandbox is danger-full-access"
                elif sandbox_unavailable is not None:
                    no_os_sandbox = sandbox_unavailable
                hosts = spec.permission.allowed_hosts if spec.permission is not None else ()
                section, left_out = _sandbox.settings(
                    "danger-full-access" if no_os_sandbox else sandbox,
                    cwd=cwd,
                    temp_dirs=temp.roots if temp is not None else (),
                    allowed_hosts=hosts,
                )
                settings["sandbox"] = section
                if left_out and not no_os_sandbox:
                    untranslated.append(
                        Untranslated(
                            "permission.allowed_hosts",
                            f"Claude Code's sandbox cannot express {', '.join(map(repr, left_out))} (only a "
                            "host, '*', or '*.' before a domain, with an optional port): sandboxed commands "
                            "cannot reach those hosts",
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
                if "sandbox" in value:
                    raise UsageError(
                        "Spec.config: Claude Code's 'sandbox' settings come from Spec.sandbox and "
                        "PermissionConfig.allowed_hosts; remove the 'sandbox' key"
                    )
                settings = {**dict(value), **settings}
            case "env":
                pass  # the CLI process's environment, above
            case "max_turns":
                if value is not None:
                    opts["max_turns"] = value
            case "max_cost_usd":
                if value is not None:
                    opts["max_budget_usd"] = value
            case "temp_dir":
                local.append(name)  # made by the provider when None; the CLI's environment, above
            case _:  # a new Spec field must be placed deliberately
                untranslated.append(Untranslated(name, "not supported by the Claude provider"))

    opts["settings"] = json.dumps(settings)
    opts["system_prompt"] = _system_prompt(spec.base_instructions, spec.developer_instructions)
    content = user_content(apply_mode(spec.prompt, spec.mode), tuple(spec.images))
    return ClaudePlan(
        options=opts,
        content=content,
        cwd=cwd,
        local=tuple(local),
        untranslated=tuple(untranslated),
        sandbox=sandbox,
        no_os_sandbox=no_os_sandbox,
    )
