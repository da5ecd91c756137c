"""Pure translation of a ``Spec`` into codex app-server requests.

``plan_spawn(spec)`` decides, for every ``Spec`` field, where it goes: the ``thread/start`` params, the
``turn/start`` params, the MCP config edits, handled locally by the provider (approval bridge, turn
timer, the session's box), or not translated (with a reason). A table test pins that every field lands
somewhere. An unset ``Spec.sandbox`` is ``workspace-write`` (a codex session always has a workspace);
the box (``_box``: writable roots, ``/tmp`` excluded, ``TMPDIR``, the tripwire) goes into the thread's
config when the provider passes one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agent_fleet._provider.prompt import apply_mode
from agent_fleet.codex._box import SANDBOX_DEFAULT
from agent_fleet.contract import Spec, Untranslated

if TYPE_CHECKING:
    from agent_fleet.codex._box import Box
    from agent_fleet.tools import Tool

__all__ = [
    "APPROVAL_POLICY",
    "ENV_SET_KEY",
    "SpawnPlan",
    "Untranslated",
    "declared_writable_roots",
    "dynamic_tool",
    "env_set",
    "plan_spawn",
    "turn_input",
]

# Every thread asks before running anything codex does not itself know to be harmless, so the approval
# bridge sees every such command. The unsandboxed retry this policy brings is stopped by the box's
# tripwire (``_box``).
APPROVAL_POLICY = "untrusted"


@dataclass(frozen=True, slots=True, kw_only=True)
class SpawnPlan:
    """What ``spawn``/``resume`` send: ``thread_params`` (thread/start; thread/resume and thread/fork
    add threadId), ``turn_params`` (turn/start without threadId), the fields the provider handles
    itself (``local``) and those it cannot honour (``untranslated``)."""

    thread_params: dict[str, Any]
    turn_params: dict[str, Any]
    local: tuple[str, ...] = ()
    untranslated: tuple[Untranslated, ...] = ()


def _is_url(value: str) -> bool:
    return value.startswith(("http://", "https://", "data:"))


def turn_input(
    text: str, images: tuple[str | os.PathLike[str], ...] | list[Any] = ()
) -> list[dict[str, Any]]:
    """The ``input`` array of a turn: the text, then each image (URL or local path)."""
    items: list[dict[str, Any]] = [{"type": "text", "text": text}]
    for image in images:
        value = os.fspath(image)
        if _is_url(value):
            items.append({"type": "image", "url": value})
        else:
            items.append({"type": "localImage", "path": str(Path(value).expanduser().resolve())})
    return items


#: codex's setting for variables set in the environment of the commands it runs (a config key path).
ENV_SET_KEY = "shell_environment_policy.set"


def env_set(env: Mapping[str, str], *configs: Mapping[str, Any]) -> dict[str, str]:
    """``Spec.env`` over the ``shell_environment_policy.set`` of ``configs`` (later ones win), written as
    a dotted key or a nested table: a key path override replaces the whole table, so the variables
    those configs set must be carried along or they would be lost for the session."""
    merged: dict[str, str] = {}
    for config in configs:
        policy = config.get("shell_environment_policy")
        for table in (policy.get("set") if isinstance(policy, Mapping) else None, config.get(ENV_SET_KEY)):
            if isinstance(table, Mapping):
                merged.update({str(k): str(v) for k, v in table.items()})
    merged.update(env)
    return merged


def _thread_config(
    config: Mapping[str, Any],
    servers: Mapping[str, Mapping[str, Any]],
    env: Mapping[str, str],
    base_config: Mapping[str, Any],
) -> dict[str, Any]:
    """The thread's own config overrides: ``Spec.config`` plus ``Spec.mcp_servers`` under
    ``mcp_servers`` and ``Spec.env`` under ``shell_environment_policy.set`` (over the provider's own,
    ``base_config``). Per thread, so two sessions may define the same server name differently."""
    out = dict(config)
    if servers:
        mine = out.get("mcp_servers")
        merged = dict(mine) if isinstance(mine, Mapping) else {}
        merged.update({name: dict(server) for name, server in servers.items()})
        out["mcp_servers"] = merged
    if env:
        out[ENV_SET_KEY] = env_set(env, base_config, config)
    return out


_ROOTS_KEY = ("sandbox_workspace_write", "writable_roots")


def _roots_in(config: Mapping[str, Any]) -> list[str] | None:
    """``sandbox_workspace_write.writable_roots`` of one config (nested or as a dotted key), if set."""
    dotted = ".".join(_ROOTS_KEY)
    if dotted in config:
        value = config[dotted]
    else:
        table = config.get(_ROOTS_KEY[0])
        if not isinstance(table, Mapping) or _ROOTS_KEY[1] not in table:
            return None
        value = table[_ROOTS_KEY[1]]
    if not isinstance(value, list | tuple):
        return []
    return [
        os.path.expanduser(os.fspath(v)) for v in value if isinstance(v, str | os.PathLike) and os.fspath(v)
    ]


def declared_writable_roots(*configs: Mapping[str, Any]) -> tuple[str, ...]:
    """The writable roots a session declares: ``sandbox_workspace_write.writable_roots`` of the first of
    ``configs`` (most specific first: the thread's, then the app-server's ``-c`` overrides) that sets
    it. The user's own ``config.toml`` is not read: only what agent-fleet passes counts."""
    for config in configs:
        roots = _roots_in(config)
        if roots is not None:
            return tuple(roots)
    return ()


def dynamic_tool(tool: Tool) -> dict[str, Any]:
    """A ``Spec.tools`` entry as a ``thread/start`` ``dynamicTools`` spec."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "inputSchema": tool.input_schema,
    }


def plan_spawn(spec: Spec, base_config: Mapping[str, Any] | None = None, box: Box | None = None) -> SpawnPlan:
    """Translate ``spec`` into app-server requests. Pure: no I/O beyond path normalisation.
    ``base_config``: the provider's own config (``CodexOptions.config``), whose variables ``Spec.env``
    adds to. ``box``: the session's box, whose sandbox settings and variables join the thread's config."""
    thread: dict[str, Any] = {"approvalPolicy": APPROVAL_POLICY}
    turn: dict[str, Any] = {}
    local: list[str] = []
    untranslated: list[Untranslated] = []

    for f in fields(Spec):
        name = f.name
        value = getattr(spec, name)
        match name:
            case "prompt" | "mode" | "images":
                pass  # combined into the turn input below
            case "cwd":
                if value is not None:
                    thread["cwd"] = str(Path(value).expanduser().resolve())
            case "model":
                if value is not None:
                    thread["model"] = value
            case "base_instructions":
                if value is not None:
                    thread["baseInstructions"] = value
            case "developer_instructions":
                if value is not None:
                    thread["developerInstructions"] = value
            case "reasoning_effort":
                if value is not None:
                    turn["effort"] = value
            case "sandbox":
                thread["sandbox"] = value or SANDBOX_DEFAULT
            case "permission" | "timeout" | "idle_timeout":
                local.append(name)  # approval bridge / turn timer
            case "answers":
                if value:
                    local.append(name)  # the handle answers questions with them
            case "mcp_servers":
                pass  # the thread's config, below
            case "output_schema":
                if value is not None:
                    turn["outputSchema"] = dict(value)
            case "config" | "env":
                pass  # the thread's config, below
            case "tools":
                if value:  # experimental; answered by the handle on item/tool/call
                    thread["dynamicTools"] = [dynamic_tool(tool) for tool in value]
            case "temp_dir":
                local.append(name)  # the session's box (``_box``)
            case "max_turns" | "max_cost_usd":
                if value is not None:  # not wired yet on this provider
                    untranslated.append(Untranslated(name, "not yet supported by the codex app-server"))
            case _:  # a new Spec field must be placed deliberately
                untranslated.append(Untranslated(name, "not supported by the codex app-server provider"))

    own, env = box.thread_config(spec.config, spec.env) if box is not None else (dict(spec.config), spec.env)
    config = _thread_config(own, spec.mcp_servers, env, base_config or {})
    if config:
        thread["config"] = config
    turn["input"] = turn_input(apply_mode(spec.prompt, spec.mode), list(spec.images))
    return SpawnPlan(
        thread_params=thread,
        turn_params=turn,
        local=tuple(local),
        untranslated=tuple(untranslated),
    )
