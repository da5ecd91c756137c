"""``agent-fleet login`` and ``logout``: codex's account, through the app-server's ``account/*`` methods.

``login --api-key`` reads an OpenAI API key from stdin (never from the command line, where it would be
in the shell history and the process list); ``login`` alone starts a ChatGPT device-code login: it
prints the URL to open and the one-time code, then waits until the login completed. ``logout`` makes
codex forget its stored credential. Both act on the ``CODEX_HOME`` codex uses (``$CODEX_HOME`` or
``~/.codex``), like ``codex login``.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import click
from rich.console import Console

from agent_fleet.cli._commands import cli
from agent_fleet.cli._exits import EXIT_OK, die, handled, run_async
from agent_fleet.cli._options import parse_config_overrides
from agent_fleet.codex import CodexOptions, CodexProvider
from agent_fleet.errors import UsageError

__all__: list[str] = []


def _read_key() -> str:
    if sys.stdin is None or sys.stdin.isatty():
        raise UsageError(
            "login --api-key reads the key from stdin: printenv OPENAI_API_KEY | agent-fleet login --api-key"
        )
    key = sys.stdin.read().strip()
    if not key:
        raise UsageError("login --api-key: no key on stdin")
    return key


@cli.command("login")
@click.option("--api-key", "api_key", is_flag=True, help="Read an OpenAI API key from stdin and store it.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=900.0,
    show_default=True,
    help="Seconds to wait for a ChatGPT login to be completed in the browser.",
)
@click.option("-c", "config", multiple=True, metavar="KEY=VALUE", help="Codex config override (repeatable).")
def login_command(api_key: bool, timeout: float, config: tuple[str, ...]) -> None:
    """Log codex in: with an API key from stdin (--api-key), else with ChatGPT (device code)."""
    with handled():
        options = CodexOptions(config=parse_config_overrides(config))
        key = _read_key() if api_key else None
        console = Console(highlight=False, soft_wrap=True)

        async def go(stop: asyncio.Event) -> Any:
            async with CodexProvider(options) as provider:
                if key is not None:
                    await provider.login_api_key(key)
                else:
                    login = await provider.login_chatgpt_device_code()
                    console.print(f"Open {login.verification_url} and enter the code: {login.user_code}")
                    console.print("waiting for the login to complete (Ctrl-C to give up)...")
                    waiting = asyncio.ensure_future(login.wait(timeout))
                    stopped = asyncio.ensure_future(stop.wait())
                    await asyncio.wait({waiting, stopped}, return_when=asyncio.FIRST_COMPLETED)
                    if not waiting.done():
                        waiting.cancel()
                        await login.cancel()
                        raise UsageError("login stopped before it completed")
                    stopped.cancel()
                    try:
                        waiting.result()
                    except TimeoutError:
                        await login.cancel()
                        raise UsageError(f"the login was not completed within {timeout:g}s") from None
                return await provider.account()

        account = run_async(go, console)
        console.print(f"logged in: {account.describe()}")
        die(EXIT_OK)


@cli.command("logout")
@click.option("-c", "config", multiple=True, metavar="KEY=VALUE", help="Codex config override (repeatable).")
def logout_command(config: tuple[str, ...]) -> None:
    """Log codex out: it forgets its stored credential (API key or ChatGPT tokens)."""
    with handled():
        options = CodexOptions(config=parse_config_overrides(config))

        async def go(stop: asyncio.Event) -> None:
            async with CodexProvider(options) as provider:
                await provider.logout()

        run_async(go, Console(stderr=True))
        click.echo("logged out")
        die(EXIT_OK)
