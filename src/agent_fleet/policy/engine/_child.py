"""Judging large requests in a child process, so the event loop of the process that asked never waits.

Why a process: a judgement holds the GIL in steps no thread can interrupt (a tree-sitter parse step,
``ast.parse``, freeing a large syntax tree, and the garbage collections its allocations start, which
walk the asking process's whole heap): in a worker thread those still stall the loop for hundreds of
milliseconds. A child has its own GIL and heap, and its address space is limited, so a request that
would need more than ``MEMORY_LIMIT`` is declined instead of growing the asking process.

Theory of operation: one child (``python -m agent_fleet.policy.engine._child``) is started on first
use and reused; work goes to it as length-prefixed pickles on its standard input (``(id, config,
function, args)``), written by a feeding thread (so the asking thread never blocks on the pipe), and
results come back as length-prefixed pickles on its standard output (``(id, ok, result)``), read by one
reader thread that completes a ``concurrent.futures.Future`` per call. The child runs one call at a
time: ``function(ApprovalPolicy(config), *args)``, where ``function`` is a module-level function named
by reference (``ApprovalPolicy.evaluate`` for one request; a bridge's judgement of a whole request, such
as a permission profile judged part by part) -- the same code as in-process judging. It ends when its
standard input closes (the asking process exits or dies), so it never outlives it. A call that fails,
a child that dies or takes longer than ``TIMEOUT`` gives the caller's ``failed(decline)`` instead of a
result (fails closed: ``policy-error`` or ``too-large``), and the child is started again on the next
call; a fork in the asking process starts a fresh child in the forked one.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import IO, TYPE_CHECKING, Any, TypeVar

from agent_fleet.contract import PermissionConfig
from agent_fleet.policy._types import ApprovalRequest, Decision

if TYPE_CHECKING:
    from agent_fleet.policy.engine import ApprovalPolicy

__all__ = ["MEMORY_LIMIT", "TIMEOUT", "ChildJudge", "child_judge"]

#: What one request may add to the child's address space (``RLIMIT_AS`` above what it holds at start).
MEMORY_LIMIT = 256 * 1024 * 1024
#: Seconds a request may take in the child before it is declined and the child replaced.
TIMEOUT = 60.0
_HEADER = struct.Struct(">I")
T = TypeVar("T")


class _Pending:
    """A call waiting for the child: its future, and what a failure gives instead of a result."""

    __slots__ = ("failed", "future")

    def __init__(self, future: Future[Any], failed: Callable[[Decision], Any]) -> None:
        self.future = future
        self.failed = failed

    def fail(self, decision: Decision) -> None:
        if not self.future.done():
            self.future.set_result(self.failed(decision))


def _evaluate(policy: ApprovalPolicy, request: ApprovalRequest) -> Decision:
    return policy.evaluate(request)


def _as_is(decision: Decision) -> Decision:
    return decision


class ChildJudge:
    """One child process judging requests (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._pending: dict[int, _Pending] = {}
        self._next = 0
        self._timed_out = False
        self._queue: queue.SimpleQueue[tuple[int, bytes] | None] = queue.SimpleQueue()
        self._feeder: threading.Thread | None = None

    def submit(self, config: PermissionConfig | None, request: ApprovalRequest) -> Future[Decision]:
        """A future of the decision for ``request`` under ``config``; never fails (declines instead).
        Returns at once: starting the child and writing to it happen on a thread of its own."""
        return self.call(_evaluate, config, (request,), _as_is)

    def call(
        self,
        function: Callable[..., T],
        config: PermissionConfig | None,
        args: tuple[Any, ...],
        failed: Callable[[Decision], T],
    ) -> Future[T]:
        """A future of ``function(ApprovalPolicy(config), *args)`` run in the child. ``function`` must
        be a module-level function (it travels by name) whose arguments and result pickle; it never
        fails: a call that raises, cannot travel, or whose child dies or runs out of time or memory
        gives ``failed(decline)``. Returns at once."""
        future: Future[T] = Future()
        with self._lock:
            self._next += 1
            ident = self._next
            try:
                frame = pickle.dumps((ident, config, function, args), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # what cannot travel cannot be judged there
                reason = f"the request could not reach the judge: {exc}"
                future.set_result(failed(_decline("policy-error", reason)))
                return future
            self._pending[ident] = _Pending(future, failed)
            self._feed((ident, frame))
        return future

    def warm(self) -> None:
        """Start the child in the background, if it is not started yet (a first large request then
        need not wait for its start). Returns at once."""
        with self._lock:
            if self._feeder is None:
                self._feed(None)

    def _feed(self, item: tuple[int, bytes] | None) -> None:
        """Queue ``item`` (``None``: only start the child) for the feeding thread; under the lock."""
        self._queue.put(item)
        if self._feeder is None:
            self._feeder = threading.Thread(target=self._write, name="agent-fleet-policy-feed", daemon=True)
            self._feeder.start()

    def _write(self) -> None:
        while True:
            item = self._queue.get()
            try:
                with self._lock:
                    process = self._running()
            except Exception as exc:  # no child can start: what is pending is declined, not left waiting
                with self._lock:
                    pending, self._pending = self._pending, {}
                for stranded in pending.values():
                    stranded.fail(_decline("policy-error", f"the judging process could not start: {exc}"))
                continue
            if item is None:
                continue
            ident, frame = item
            try:
                assert process.stdin is not None
                process.stdin.write(_HEADER.pack(len(frame)) + frame)
                process.stdin.flush()
            except (OSError, ValueError):  # the child is gone: its reader fails what is pending
                process.kill()
                continue
            timer = threading.Timer(TIMEOUT, self._expire, args=(ident, process))
            timer.daemon = True
            timer.start()
            with self._lock:
                waiting = self._pending.get(ident)
            if waiting is None:
                timer.cancel()
            else:
                waiting.future.add_done_callback(_canceller(timer))

    def _running(self) -> subprocess.Popen[bytes]:
        process = self._process
        if process is not None and process.poll() is None:
            return process
        process = subprocess.Popen(
            [sys.executable, "-m", "agent_fleet.policy.engine._child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
        )
        self._process = process
        reader = threading.Thread(
            target=self._read, args=(process,), name="agent-fleet-policy-child", daemon=True
        )
        reader.start()
        return process

    def _read(self, process: subprocess.Popen[bytes]) -> None:
        assert process.stdout is not None
        while True:
            try:
                ident, ok, result = _receive(process.stdout)
            except (EOFError, OSError, ValueError, pickle.UnpicklingError):
                break  # the end, or output that is not ours: the child is replaced
            with self._lock:
                waiting = self._pending.pop(ident, None)
            if waiting is None or waiting.future.done():
                continue
            if ok:
                waiting.future.set_result(result)
            else:
                waiting.fail(_decline(*result))
        self._fail(process, "the judging process ended (memory or a crash) before deciding")

    def _expire(self, ident: int, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            waiting = self._pending.get(ident)
            if waiting is None or waiting.future.done():
                return
            self._timed_out = True
        process.kill()  # the reader sees the end and fails what is pending

    def _fail(self, process: subprocess.Popen[bytes], reason: str) -> None:
        """Called by the reader once the child's output has ended."""
        with self._lock:
            if self._timed_out:
                reason = f"the request took longer than {TIMEOUT:.0f} s to judge"
                self._timed_out = False
            if self._process is process:
                self._process = None
            pending, self._pending = self._pending, {}
        for waiting in pending.values():
            waiting.fail(_decline("too-large", reason))
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _canceller(timer: threading.Timer) -> Callable[[Future[Any]], None]:
    def cancel(_: Future[Any]) -> None:
        timer.cancel()

    return cancel


def _decline(rule: str, reason: str) -> Decision:
    return Decision(action="decline", rule=rule, reason=reason)


def _receive(stream: IO[bytes]) -> Any:
    """One length-prefixed pickle from ``stream``; ``EOFError`` at its end."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    frame = stream.read(size)
    if len(frame) < size:
        raise EOFError
    return pickle.loads(frame)


def _send(stream: IO[bytes], message: Any) -> None:
    frame = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(frame)) + frame)
    stream.flush()


_judge: tuple[int, ChildJudge] | None = None
_judge_lock = threading.Lock()


def child_judge() -> ChildJudge:
    """The process's child judge (another one after a fork)."""
    global _judge
    with _judge_lock:
        if _judge is None or _judge[0] != os.getpid():
            _judge = (os.getpid(), ChildJudge())
        return _judge[1]


# --------------------------------------------------------------------------------------------------
# The child.


def _limit_memory() -> None:
    import resource

    with open("/proc/self/statm", encoding="ascii") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = size + MEMORY_LIMIT
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    from agent_fleet.policy.engine import _policy

    _policy(None).evaluate(ApprovalRequest(kind="command", command="ls | cat"))  # loaded before the limit
    with contextlib.suppress(OSError, ValueError):  # no /proc, or no limit: the judge's bounds still hold
        _limit_memory()
    while True:
        try:
            ident, config, function, args = _receive(stdin)
        except EOFError:
            return
        try:
            message = (ident, True, function(_policy(config), *args))
        except MemoryError:
            reason = f"the request needs more than {MEMORY_LIMIT >> 20} MB to judge"
            message = (ident, False, ("too-large", reason))
        except Exception as exc:  # fail closed: the caller's failed() decides what a decline gives
            reason = f"the approval policy failed: {type(exc).__name__}: {exc}"
            message = (ident, False, ("policy-error", reason))
        _send(stdout, message)


def _main() -> None:
    # Results travel on a copy of standard output; anything else printed goes nowhere, so a stray
    # print (a warning, a library's message) cannot break the framing.
    out = os.fdopen(os.dup(1), "wb")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    _serve(sys.stdin.buffer, out)


if __name__ == "__main__":
    _main()
