"""Exit codes, one-line errors, and running a coroutine with Ctrl-C (SIGINT), SIGTERM and SIGHUP as a
clean stop."""

from __future__ import annotations

import asyncio
import atexit
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
from agent_fleet.errors import AgentFleetError, ProviderUnavailable, StorageError, UsageError
from agent_fleet.runner import TaskResult, check_provider

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_STOPPED",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "STOP_SIGNALS",
    "Interrupts",
    "die",
    "exit_code",
    "handled",
    "leave",
    "preflight",
    "run_async",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, the shell's convention for a run ended by Ctrl-C
#: The batch stopped before its end for a reason that may pass (the model unreachable, the provider
#: process died, a full disk): its record is true and `batch --resume OUT` continues it. 75 is
#: sysexits' EX_TEMPFAIL ("a temporary failure: try again later").
EXIT_STOPPED = 75
#: Signals that stop a run as Ctrl-C does (the first stops cleanly, a second forces); the exit status
#: is 128 + the first one's number (130 SIGINT, 143 SIGTERM, 129 SIGHUP), the shell's convention.
STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: After the second Ctrl-C the run has this long to end cleanly before the process leaves by force.
FORCE_AFTER = 1.0  # (and the forced exit a second at most: within the 2 s the docs promise)
_T = TypeVar("_T")


def die(code: int, message: str = "") -> NoReturn:
    """Print ``message`` (one line) to stderr and leave with ``code``."""
    if message:
        click.echo(f"error: {message}", err=True)
    raise click.exceptions.Exit(code)


def leave(code: str | int | None = 0) -> NoReturn:
    """End the process as ``sys.exit(code)`` would (other threads joined as at exit, atexit handlers
    run, stdio flushed, the same status) but without the interpreter's teardown, which frees every
    module and object one by one: 0.2 s of CPU after a batch on an idle machine, up to a second on a
    loaded one (measured after a second Ctrl-C, whose two-second promise it ate)."""
    # What Python's exit does first: wake the idle thread-pool workers and join every non-daemon thread.
    join_threads = getattr(threading, "_shutdown", None)
    if join_threads is None or threading.current_thread() is not threading.main_thread():
        sys.exit(code)
    join_threads()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:  # sys.exit("message"): printed, status 1
        sys.stderr.write(f"{code}\n")
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`| head`) or stream: nothing more to say there
            if stream is sys.stdout and status == 0:
                status = 120  # what Python's own exit gives when stdout cannot be flushed
    os._exit(status)


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
    """Stop signals seen by ``run_async`` (``STOP_SIGNALS``; ``presses`` counts them, ``signal`` is the
    first). ``on_force`` runs (on a timer thread) when the run has not ended ``FORCE_AFTER`` seconds
    after the second, just before the process leaves with ``exit_code``: it must be quick and must not
    need the event loop (the batch writes its summary from the ledger)."""

    presses: int = 0
    on_force: Callable[[], None] | None = None
    forced: threading.Timer | None = None
    signal: int | None = None

    @property
    def exit_code(self) -> int:
        """128 + the first stop signal's number (130 for Ctrl-C)."""
        return 128 + (self.signal or signal.SIGINT)

    def force(self) -> None:
        try:
            if self.on_force is not None:
                self.on_force()
        finally:
            sys.stderr.write("error: interrupted (the run did not stop in time; left by force)\n")
            sys.stderr.flush()
            os._exit(self.exit_code)


def run_async(
    factory: Callable[[asyncio.Event], Coroutine[Any, Any, _T]],
    console: Console,
    interrupts: Interrupts | None = None,
) -> _T:
    """Run ``factory(stop)``. The first stop signal (Ctrl-C, SIGTERM, SIGHUP) sets ``stop`` (a clean
    stop); a second one cancels, and the process leaves (exit 128 + the first signal's number) within
    ``FORCE_AFTER`` seconds whatever the run does. Once one was seen, later ones are ignored while the
    process finishes (printing, exiting): the exit status stays the one documented, never a death by
    signal."""
    seen = interrupts if interrupts is not None else Interrupts()

    async def main() -> _T:
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        current = asyncio.current_task()

        def on_signal(signum: signal.Signals) -> None:
            seen.presses += 1
            if seen.presses == 1:
                seen.signal = signum
                if signum == signal.SIGINT:
                    console.print("[yellow]stopping: interrupting running turns (Ctrl-C again to force)[/]")
                else:
                    console.print(
                        f"[yellow]stopping ({signum.name}): interrupting running turns "
                        "(send it again, or Ctrl-C, to force)[/]"
                    )
                stop.set()
            elif seen.presses == 2:
                seen.forced = threading.Timer(FORCE_AFTER, seen.force)
                seen.forced.daemon = True
                seen.forced.start()
                if current is not None:
                    current.cancel()

        installed: list[signal.Signals] = []
        for signum in STOP_SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, on_signal, signum)
                installed.append(signum)
        try:
            return await factory(stop)
        finally:
            for signum in installed:
                loop.remove_signal_handler(signum)

    try:
        return asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        seen.presses += 1  # (a Ctrl-C the loop had no handler for any more)
        die(seen.exit_code, "interrupted")
    finally:
        if seen.presses:
            _ignore_stop_signals()
        if seen.forced is not None:
            seen.forced.cancel()


def _ignore_stop_signals() -> None:
    """SIG_IGN for the stop signals: Python restores SIG_DFL for its own handlers at exit, so a late
    second Ctrl-C would otherwise end the process by signal instead of with its exit code."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


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
    except StorageError as exc:  # a full disk: what was recorded stays true
        die(EXIT_STOPPED, f"{exc}; stopped, resumable once there is room")
    except AgentFleetError as exc:
        die(EXIT_FAILED, first_line(str(exc), 400))
    except Exception as exc:
        if os.environ.get("AGENT_FLEET_DEBUG"):
            raise
        die(EXIT_FAILED, f"internal error: {type(exc).__name__}: {exc} (set AGENT_FLEET_DEBUG=1 for details)")
