"""Exit codes, one-line errors, and running a coroutine with Ctrl-C as a clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

from agent_fleet.cli._view import first_line
from agent_fleet.errors import AgentFleetError, ProviderUnavailable, UsageError
from agent_fleet.runner import TaskResult, check_provider

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "die",
    "exit_code",
    "handled",
    "preflight",
    "run_async",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
_T = TypeVar("_T")


def die(code: int, message: str = "") -> NoReturn:
    """Print ``message`` (one line) to stderr and leave with ``code``."""
    if message:
        click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(code)


def exit_code(result: TaskResult) -> int:
    if result.ok:
        return EXIT_OK
    return EXIT_UNAVAILABLE if result.fatal else EXIT_FAILED


def preflight(provider: str, options: Any) -> None:
    try:
        check_provider(provider, options)
    except ProviderUnavailable as exc:
        die(EXIT_UNAVAILABLE, exc.message)


# -- running coroutines with Ctrl-C as a clean stop ------------------------------------------------------


def run_async(factory: Callable[[asyncio.Event], Coroutine[Any, Any, _T]], console: Console) -> _T:
    """Run ``factory(stop)``. The first Ctrl-C sets ``stop`` (a clean stop); a second one cancels."""

    async def main() -> _T:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        current = asyncio.current_task()
        presses = 0

        def on_sigint() -> None:
            nonlocal presses
            presses += 1
            if presses == 1:
                console.print("[yellow]stopping: interrupting running turns (Ctrl-C again to force)[/]")
                stop.set()
            elif current is not None:
                current.cancel()

        installed = False
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True
        try:
            return await factory(stop)
        finally:
            if installed:
                loop.remove_signal_handler(signal.SIGINT)

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        die(EXIT_FAILED, "interrupted")


# -- error handling ------------------------------------------------------------------------------------


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Turn library errors into one line and an exit code (never a traceback)."""
    try:
        yield
    except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
        raise
    except UsageError as exc:
        die(EXIT_USAGE, str(exc))
    except ProviderUnavailable as exc:
        die(EXIT_UNAVAILABLE, exc.message)
    except AgentFleetError as exc:
        die(EXIT_FAILED, first_line(str(exc), 400))
    except Exception as exc:
        if os.environ.get("AGENT_FLEET_DEBUG"):
            raise
        die(EXIT_FAILED, f"internal error: {type(exc).__name__}: {exc} (set AGENT_FLEET_DEBUG=1 for details)")
