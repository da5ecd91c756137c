"""Exit codes, one-line errors, and running a coroutine with Ctrl-C as a clean stop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console

from agent_fleet.cli._describe import first_line
from agent_fleet.errors import AgentFleetError, ProviderUnavailable, UsageError
from agent_fleet.runner import TaskResult, check_provider

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "Interrupts",
    "die",
    "exit_code",
    "handled",
    "preflight",
    "run_async",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention for a run ended by Ctrl-C
#: After the second Ctrl-C the run has this long to end cleanly before the process leaves by force.
FORCE_AFTER = 1.5
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


@dataclass(slots=True)
class Interrupts:
    """Ctrl-C presses seen by ``run_async``. ``on_force`` runs (on a timer thread) when the run has not
    ended ``FORCE_AFTER`` seconds after the second press, just before the process leaves with 130: it
    must be quick and must not need the event loop (the batch writes its summary from the ledger)."""

    presses: int = 0
    on_force: Callable[[], None] | None = None
    forced: threading.Timer | None = None

    def force(self) -> None:
        try:
            if self.on_force is not None:
                self.on_force()
        finally:
            sys.stderr.write("error: interrupted (the run did not stop in time; left by force)\n")
            sys.stderr.flush()
            os._exit(EXIT_INTERRUPTED)


def run_async(
    factory: Callable[[asyncio.Event], Coroutine[Any, Any, _T]],
    console: Console,
    interrupts: Interrupts | None = None,
) -> _T:
    """Run ``factory(stop)``. The first Ctrl-C sets ``stop`` (a clean stop); a second one cancels, and
    the process leaves (exit 130) within ``FORCE_AFTER`` seconds whatever the run does."""
    seen = interrupts if interrupts is not None else Interrupts()

    async def main() -> _T:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        current = asyncio.current_task()

        def on_sigint() -> None:
            seen.presses += 1
            if seen.presses == 1:
                console.print("[yellow]stopping: interrupting running turns (Ctrl-C again to force)[/]")
                stop.set()
            elif seen.presses == 2:
                seen.forced = threading.Timer(FORCE_AFTER, seen.force)
                seen.forced.daemon = True
                seen.forced.start()
                if current is not None:
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
        die(EXIT_INTERRUPTED, "interrupted")
    finally:
        if seen.forced is not None:
            seen.forced.cancel()


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
