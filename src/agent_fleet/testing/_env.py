"""Wiring a codex child to a ScriptedModelServer: config overrides, CODEX_HOME and a dummy key."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet._codex_toml import config_args
from agent_fleet.testing._server import ScriptedModelServer

DEFAULT_ENV_KEY = "AGENT_FLEET_SCRIPTED_API_KEY"


@dataclass(frozen=True, slots=True, kw_only=True)
class CodexTestEnv:
    """Everything a codex child needs to talk to a scripted server instead of a real model.

    ``config`` holds dotted-key overrides (pass as ``CodexOptions.config`` or ``-c`` flags via
    ``codex_args()``); ``env`` holds ``CODEX_HOME`` and the dummy key variable named by ``env_key``.
    """

    server: ScriptedModelServer
    codex_home: Path
    config: Mapping[str, Any]
    env: Mapping[str, str]
    env_key: str = DEFAULT_ENV_KEY
    extra: Mapping[str, Any] = field(default_factory=dict)

    def codex_args(self) -> list[str]:
        """``-c key=value`` arguments for a codex command line."""
        return config_args(self.config)

    def full_env(self) -> dict[str, str]:
        """The current process environment with this test environment layered on top."""
        return {**os.environ, **self.env}


def scripted_codex_env(
    server: ScriptedModelServer,
    codex_home: str | os.PathLike[str],
    *,
    provider: str = "scripted",
    env_key: str = DEFAULT_ENV_KEY,
    model: str | None = "gpt-5.5",
) -> CodexTestEnv:
    """Create ``codex_home`` (a temporary directory, never ``~/.codex``) and return the wiring.

    ``env`` also sets ``TMPDIR`` to a private directory beside the home (``<home>-tmp``): codex refuses
    to create its helper binaries (the ``codex-linux-sandbox`` alias its bubblewrap sandbox runs) under
    the temporary directory, so with a home in ``/tmp`` and a system ``bwrap`` on ``PATH`` every
    sandboxed command failed with ``execvp codex-linux-sandbox``."""
    home = Path(codex_home)
    home.mkdir(parents=True, exist_ok=True)
    tmp = home.with_name(f"{home.name}-tmp")
    tmp.mkdir(mode=0o700, exist_ok=True)
    return CodexTestEnv(
        server=server,
        codex_home=home,
        config=server.codex_config(provider=provider, env_key=env_key, model=model),
        env={"CODEX_HOME": str(home), "TMPDIR": str(tmp), env_key: "scripted-dummy-key"},
        env_key=env_key,
    )
