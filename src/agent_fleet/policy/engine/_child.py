"""Judging large requests in a child process, so the event loop of the process that asked never waits.

Why a process: a judgement holds the GIL in steps no thread can interrupt (a tree-sitter parse step,
``ast.parse``, freeing a large syntax tree, and the garbage collections its allocations start, which
walk the asking process's whole heap): in a worker thread those still stall the loop for hundreds of
milliseconds. A child has its own GIL and heap, and its address space is limited, so a request that
would need more than ``MEMORY_LIMIT`` is declined instead of growing the asking process.

Theory of operation: one child (``python -m agent_fleet.policy.engine._child``) is started on first
use and reused; requests go to it as pickles on its standard input (``(id, config, request)``,
length-prefixed), written by a feeding thread (so the asking thread never blocks on the pipe), and
decisions come back as JSON lines on its standard output, read by one reader thread that completes a
``concurrent.futures.Future`` per request. The child judges one request at a time with
``ApprovalPolicy(config).evaluate``, the same code as in-process judging. It ends when its standard
input closes (the asking process exits or dies), so it never outlives it. A child that dies or takes
longer than ``TIMEOUT`` fails its pending requests closed (``too-large``) and is started again on the
next request; a fork in the asking process starts a fresh child in the forked one.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import IO

from agent_fleet.contract import PermissionConfig
from agent_fleet.policy._types import ApprovalRequest, Decision

__all__ = ["MEMORY_LIMIT", "TIMEOUT", "ChildJudge", "child_judge"]

#: What one request may add to the child's address space (``RLIMIT_AS`` above what it holds at start).
MEMORY_LIMIT = 256 * 1024 * 1024
#: Seconds a request may take in the child before it is declined and the child replaced.
TIMEOUT = 60.0
_HEADER = struct.Struct(">I")


class ChildJudge:
    """One child process judging requests (see the module docstring). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._pending: dict[int, Future[Decision]] = {}
        self._next = 0
        self._timed_out = False
        self._queue: queue.SimpleQueue[tuple[int, bytes] | None] = queue.SimpleQueue()
        self._feeder: threading.Thread | None = None

    def submit(self, config: PermissionConfig | None, request: ApprovalRequest) -> Future[Decision]:
        """A future of the decision for ``request`` under ``config``; never fails (declines instead).
        Returns at once: starting the child and writing to it happen on a thread of its own."""
        future: Future[Decision] = Future()
        with self._lock:
            self._next += 1
            ident = self._next
            try:
                frame = pickle.dumps((ident, config, request), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # a request that cannot travel cannot be judged there
                future.set_result(_decline("policy-error", f"the request could not reach the judge: {exc}"))
                return future
            self._pending[ident] = future
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
                for failed in pending.values():
                    failed.set_result(_decline("policy-error", f"the judging process could not start: {exc}"))
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
                waiting.add_done_callback(_canceller(timer))

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
        for line in process.stdout:
            try:
                ident, action, rule, reason = json.loads(line)
                decision = Decision(action=action, rule=rule, reason=reason)
            except (ValueError, TypeError):
                continue
            with self._lock:
                future = self._pending.pop(ident, None)
            if future is not None and not future.done():
                future.set_result(decision)
        self._fail(process, "the judging process ended (memory or a crash) before deciding")

    def _expire(self, ident: int, process: subprocess.Popen[bytes]) -> None:
        with self._lock:
            future = self._pending.get(ident)
            if future is None or future.done():
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
        for future in pending.values():
            if not future.done():
                future.set_result(_decline("too-large", reason))
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def _canceller(timer: threading.Timer) -> Callable[[Future[Decision]], None]:
    def cancel(_: Future[Decision]) -> None:
        timer.cancel()

    return cancel


def _decline(rule: str, reason: str) -> Decision:
    return Decision(action="decline", rule=rule, reason=reason)


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
        header = stdin.read(_HEADER.size)
        if len(header) < _HEADER.size:
            return
        frame = stdin.read(_HEADER.unpack(header)[0])
        ident, config, request = pickle.loads(frame)
        try:
            decision = _policy(config).evaluate(request)
        except MemoryError:
            decision = _decline("too-large", f"the request needs more than {MEMORY_LIMIT >> 20} MB to judge")
        stdout.write(json.dumps([ident, decision.action, decision.rule, decision.reason]).encode() + b"\n")
        stdout.flush()


if __name__ == "__main__":
    _serve(sys.stdin.buffer, sys.stdout.buffer)
