"""Pure translation of a ``Spec`` into one ``codex exec --json`` command line.

First turn::

    codex exec --json [-c key=value ...] [-C cwd] [-m model] [--sandbox S]
        [--dangerously-bypass-approvals-and-sandbox] [--skip-git-repo-check]
        [--output-schema FILE] [--image=PATH ...] -

Follow-up / resume turn (``exec resume`` takes no ``-C`` and no ``--sandbox``: the working directory is
the child's cwd and the sandbox goes in as ``-c sandbox_mode=...``)::

    codex exec resume --json [-c key=value ...] [-m model]
        [--dangerously-bypass-approvals-and-sandbox] [--skip-git-repo-check]
        [--output-schema FILE] [--image=PATH ...] <thread_id> -

The prompt always goes on stdin (``-``), never on the command line. ``-c`` values merge, later winning:
``options.config``, then what the spec's fields translate to, then ``spec.config``; the session's box
(``_box``: its writable roots, ``/tmp`` and codex's ``TMPDIR`` excluded, ``TMPDIR`` for the agent's
commands) goes over them. An unset ``Spec.sandbox`` is ``workspace-write``. Base instructions
go in a file named by ``model_instructions_file`` (codex has no ``base_instructions`` config key; it
reports that key as ignored); the caller writes that file and the output-schema file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from agent_fleet._codex_toml import config_args
from agent_fleet._provider.prompt import apply_mode
from agent_fleet.codex._box import SANDBOX_DEFAULT, Box
from agent_fleet.codex.options import CodexOptions
from agent_fleet.codex.translate import ENV_SET_KEY, env_set
from agent_fleet.contract import Spec, Untranslated
from agent_fleet.errors import UsageError

__all__ = ["ExecCommand", "Untranslated", "build_command"]

_MCP_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecCommand:
    """One turn's process: ``argv``, the child's ``cwd``, the prompt bytes for stdin, and the spec
    fields that were not translated."""

    argv: list[str]
    cwd: str | None
    stdin: bytes
    untranslated: tuple[Untranslated, ...] = ()


def _is_url(value: str) -> bool:
    return value.startswith(("http://", "https://", "data:"))


def resolve_cwd(spec: Spec, options: CodexOptions) -> str | None:
    """``spec.cwd``, else ``options.cwd``, as an absolute path; ``None`` inherits the parent's."""
    raw = spec.cwd if spec.cwd is not None else options.cwd
    return None if raw is None else str(Path(raw).expanduser().resolve())


def build_command(
    binary: str | os.PathLike[str],
    spec: Spec,
    options: CodexOptions,
    *,
    prompt: str | None = None,
    session_id: str | None = None,
    schema_file: str | None = None,
    instructions_file: str | None = None,
    images: bool = True,
    box: Box | None = None,
) -> ExecCommand:
    """The command for one turn of ``spec``.

    ``prompt`` overrides ``spec.prompt`` (follow-ups); ``session_id`` makes it an ``exec resume``.
    ``schema_file`` / ``instructions_file`` are paths the caller wrote ``spec.output_schema`` /
    ``spec.base_instructions`` to. ``images=False`` leaves the spec's images out (follow-ups).
    ``box``: the session's box (made by the caller, who removes it).
    Raises ``UsageError`` for values that cannot be expressed (bad MCP server name, bad config value).
    """
    if spec.output_schema is not None and schema_file is None:
        raise UsageError("build_command: spec.output_schema is set but no schema_file was given")
    if spec.base_instructions is not None and instructions_file is None:
        raise UsageError("build_command: spec.base_instructions is set but no instructions_file was given")
    if session_id is not None and (not session_id or session_id.startswith("-")):
        raise UsageError(f"invalid codex session id {session_id!r}")
    resume = session_id is not None
    untranslated: list[Untranslated] = []
    derived: dict[str, Any] = {}
    flags: list[str] = []
    cwd = resolve_cwd(spec, options)

    for f in fields(Spec):
        name = f.name
        value = getattr(spec, name)
        match name:
            case (
                "prompt"
                | "mode"
                | "timeout"
                | "idle_timeout"
                | "config"
                | "output_schema"
                | "base_instructions"
            ):
                pass  # stdin / handled by the provider / merged below / caller-written files
            case "cwd":
                if cwd is not None and not resume:
                    flags += ["-C", cwd]
            case "model":
                if value is not None:
                    flags += ["-m", value]
            case "developer_instructions":
                if value is not None:
                    derived["developer_instructions"] = value
            case "reasoning_effort":
                if value is not None:
                    derived["model_reasoning_effort"] = value
            case "sandbox":
                mode = value or SANDBOX_DEFAULT
                if resume:
                    derived["sandbox_mode"] = mode
                else:
                    flags += ["--sandbox", mode]
            case "permission":
                if value is not None:
                    untranslated.append(
                        Untranslated(
                            name,
                            "codex exec cannot ask for approvals (its approval policy is 'never'): "
                            "commands are confined by the sandbox only",
                        )
                    )
            case "mcp_servers":
                for server, server_config in value.items():
                    if not isinstance(server, str) or not _MCP_NAME.match(server):
                        raise UsageError(
                            f"invalid MCP server name {server!r} (letters, digits, _ and - only)"
                        )
                    derived[f"mcp_servers.{server}"] = dict(server_config)
            case "images":
                for image in value if images else ():
                    path = os.fspath(image)
                    if _is_url(path):
                        untranslated.append(
                            Untranslated(name, f"codex exec attaches local files only: {path}")
                        )
                    else:
                        # --image=PATH: a bare `-i PATH` would swallow the trailing `-` as another image.
                        flags.append(f"--image={Path(path).expanduser().resolve()}")
            case "answers":
                pass  # codex exec never asks the user: nothing to answer
            case "env":
                pass  # merged below, over the variables the configs set
            case "tools":
                if value:
                    untranslated.append(
                        Untranslated(
                            name,
                            "codex exec cannot call back into Python; use the codex app-server provider",
                        )
                    )
            case "temp_dir":
                pass  # the session's box (``box``)
            case "max_turns" | "max_cost_usd":
                if value is not None:  # not wired yet on this provider
                    untranslated.append(Untranslated(name, "not yet supported by the codex exec provider"))
            case _:  # a new Spec field must be placed deliberately
                untranslated.append(Untranslated(name, "not supported by the codex exec provider"))

    if instructions_file is not None:
        derived["model_instructions_file"] = instructions_file
    if options.dangerously_bypass_approvals_and_sandbox:
        flags.append("--dangerously-bypass-approvals-and-sandbox")
    if options.skip_git_repo_check:
        flags.append("--skip-git-repo-check")
    if schema_file is not None:
        flags += ["--output-schema", schema_file]

    merged = {**options.config, **derived, **spec.config}
    env: Mapping[str, str] = spec.env
    if box is not None and not options.dangerously_bypass_approvals_and_sandbox:
        merged, env = box.thread_config(merged, env)
    if env:
        merged[ENV_SET_KEY] = env_set(env, options.config, spec.config)
    head = ["exec", "resume", "--json"] if resume else ["exec", "--json"]
    tail = [session_id, "-"] if session_id is not None else ["-"]
    argv = [os.fspath(binary), *head, *config_args(merged), *flags, *tail]
    text = apply_mode(spec.prompt if prompt is None else prompt, spec.mode)
    return ExecCommand(argv=argv, cwd=cwd, stdin=text.encode("utf-8"), untranslated=tuple(untranslated))
