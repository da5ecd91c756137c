"""``agent-fleet serve``: build a ``ServeConfig`` from the flags and run the daemon until SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import shlex
from pathlib import Path
from typing import Any

import click

from agent_fleet.cli._commands import cli
from agent_fleet.cli._exits import handled
from agent_fleet.cli._options import (
    ALLOW,
    ALLOW_ESCALATION,
    ALLOW_HOST,
    ALLOW_MCP,
    DENY,
    permission_config,
    provider_options,
)
from agent_fleet.errors import UsageError
from agent_fleet.runner import PROVIDER_NAMES
from agent_fleet.runner._pricing import load_prices


def _options(provider: str, config: tuple[str, ...]) -> dict[str, Any]:
    """Options for ``provider`` and for every other kind the ``-c`` overrides apply to (a session or
    batch may ask for another kind: it gets the daemon's overrides, not a bare provider)."""
    options = {provider: provider_options(provider, config)}
    for other in PROVIDER_NAMES:
        if other != provider:
            with contextlib.suppress(UsageError):  # -c does not apply to it: its defaults
                options[other] = provider_options(other, config)
    return options


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0 picks a free port."
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File holding the bearer token (default: generated in the state dir; required off loopback).",
)
@click.option(
    "--state-dir", type=click.Path(file_okay=False, path_type=Path), help="Sessions, batches, the token."
)
@click.option(
    "--allow-root",
    "allow_roots",
    multiple=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="A directory sessions may work in (repeatable; default: the current directory).",
)
@click.option("--provider", type=click.Choice(PROVIDER_NAMES), default="codex", show_default=True)
@click.option("-c", "config", multiple=True, metavar="KEY=VALUE", help="Codex config override (repeatable).")
@ALLOW
@DENY
@ALLOW_HOST
@ALLOW_MCP
@ALLOW_ESCALATION
@click.option(
    "--default-approval",
    type=click.Choice(["allow", "deny", "ask"]),
    default="allow",
    show_default=True,
    help="Decision for commands no rule decides (ask: queue them for a person, see /v1/approvals).",
)
@click.option(
    "--approval-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=300.0,
    show_default=True,
    help="Seconds a deferred approval waits before it is declined.",
)
@click.option(
    "--orphan-timeout",
    type=click.FloatRange(min=0),
    default=300.0,
    show_default=True,
    help="Seconds a running session may go without any client reading its events before its turn is "
    "stopped (it can be continued later); 0: never.",
)
@click.option("--max-body", type=click.IntRange(min=1024), default=1 << 20, show_default=True)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A Host header name to serve besides the loopback names and --host, e.g. a reverse proxy's "
    "public name (repeatable). Any other name is refused (DNS rebinding).",
)
@click.option(
    "--prices",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Price table (TOML or JSON, per model): the dashboard shows each session's cost.",
)
@click.option(
    "--trust-clients",
    is_flag=True,
    help="Let clients ask for what escapes the sandbox and the policy: sandbox danger-full-access, "
    "codex config overrides, MCP servers that start a command, a batch task's env. Off: refused (403).",
)
def serve_command(
    host: str,
    port: int,
    token_file: Path | None,
    state_dir: Path | None,
    allow_roots: tuple[Path, ...],
    provider: str,
    config: tuple[str, ...],
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    allow_host: tuple[str, ...],
    allow_mcp: tuple[str, ...],
    allow_escalation: tuple[str, ...],
    default_approval: str,
    approval_timeout: float,
    orphan_timeout: float,
    max_body: int,
    allowed_hosts: tuple[str, ...],
    prices: Path | None,
    trust_clients: bool,
) -> None:
    """Run the daemon: the provider contract over HTTP (see docs/api.md)."""
    from agent_fleet.serve import Daemon, ServeConfig, default_state_dir

    with handled():
        serve_config = ServeConfig(
            host=host,
            port=port,
            token_file=token_file,
            state_dir=state_dir or default_state_dir(),
            provider=provider,
            options=_options(provider, config),
            permission=permission_config(
                allow, deny, default_approval, allow_host, allow_mcp, allow_escalation
            ),
            allow_roots=tuple(allow_roots),
            approval_timeout=approval_timeout,
            max_body=max_body,
            trust_clients=trust_clients,
            allowed_hosts=allowed_hosts,
            orphan_timeout=orphan_timeout or None,
            prices=load_prices(prices) if prices is not None else None,
        )

        async def main() -> None:
            daemon = Daemon(serve_config)
            for warning in daemon.warnings:
                click.echo(f"warning: {warning}", err=True)
            await daemon.start()
            # Everything imported and built so far lives as long as the daemon: out of the collector's
            # sight, a full collection no longer walks it (the per-event cost halved its noise in
            # bench/serve_overhead.py, which does the same).
            gc.collect()
            gc.freeze()
            click.echo(f"listening on {daemon.url}", err=False)
            click.echo(f"token: in {daemon.token_path}")
            token = shlex.quote(str(daemon.token_path))
            click.echo(f"dashboard: {daemon.url}/  (sign in with the token: cat {token})")
            where = f"--server {daemon.url}"
            click.echo(f'clients: AGENT_FLEET_TOKEN="$(cat {token})" agent-fleet run {where} ...')
            if daemon.store.interrupted:
                click.echo(f"{daemon.store.interrupted} session(s) of a previous run marked interrupted")
            await daemon.wait()

        asyncio.run(main())
