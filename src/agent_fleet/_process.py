"""One way to start a child process and to end it with everything it started.

``ChildProcess.start(argv, ...)`` starts ``argv`` in a new session under the reaper
(``agent_fleet/_reaper.py``, Linux): a small supervisor that is a child subreaper, so every
descendant of the child stays reachable however it changed its process group or session (codex puts
each command in its own group), and that ends the whole tree when the child exits, when it is told
to (``terminate``: SIGTERM to every descendant, SIGKILL after ``grace``; ``kill``: SIGKILL at once),
or when this process dies (it holds a socket whose EOF it watches; no PID is ever guessed).

On other systems the child is started directly in a new session and its process group is signalled
instead (descendants that leave the group are not reached there).

The stderr of the child is kept as a bounded tail (``stderr_tail``) unless it is merged into stdout or
discarded; ``Tail`` is the same buffer for callers that keep an output tail themselves.

Theory of operation
-------------------
``start`` returns once the child was exec'd (an exec failure raises the same ``OSError`` as
``create_subprocess_exec`` would), with ``pid`` the child's own PID. ``wait()`` returns the child's
exit status (negative signal number as usual) when the reaper has exited, which is after the last
descendant was reaped. ``stop()`` is the whole orderly shutdown: optionally close stdin and give the
child time to exit, ``terminate``, wait ``grace`` plus a margin, ``kill``, and as a last resort SIGKILL
the reaper's process group. Cancelling ``stop()`` sends ``kill`` first.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final, Literal

__all__ = ["ChildProcess", "Tail"]

_REAPER: Final = str(Path(__file__).with_name("_reaper.py"))
_USE_REAPER: Final = sys.platform.startswith("linux") and bool(sys.executable)
_REPORT_TIMEOUT: Final = 30.0
_MARGIN: Final = 2.0
_PIPE: Final = asyncio.subprocess.PIPE

StderrMode = Literal["tail", "stdout", "devnull"]


class Tail:
    """The last ``limit`` bytes written to it (chunks dropped whole from the front, then trimmed)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def write(self, chunk: bytes) -> None:
        self._chunks.append(chunk)
        self._size += len(chunk)
        while self._size - len(self._chunks[0]) >= self.limit and len(self._chunks) > 1:
            self._size -= len(self._chunks.popleft())

    def bytes(self) -> bytes:
        data = b"".join(self._chunks)
        return data[-self.limit :] if self.limit else b""

    def text(self) -> str:
        return self.bytes().decode("utf-8", "replace")

    async def drain(self, stream: asyncio.StreamReader) -> None:
        """Read ``stream`` to EOF into the tail (a chatty child never blocks on a full pipe)."""
        with contextlib.suppress(ConnectionError, ValueError):
            while chunk := await stream.read(65536):
                self.write(chunk)


class ChildProcess:
    """A started child (see the module docstring). Create with ``await ChildProcess.start(...)``."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        pid: int,
        lifeline: socket.socket | None,
        *,
        grace: float,
        tail: Tail | None,
        name: str,
    ) -> None:
        self._proc = proc
        self.pid = pid
        self._lifeline = lifeline
        self.grace = grace
        self._tail = tail
        self._stderr_task: asyncio.Task[None] | None = None
        if tail is not None and proc.stderr is not None:
            self._stderr_task = asyncio.get_running_loop().create_task(
                tail.drain(proc.stderr), name=f"{name}:stderr"
            )

    @classmethod
    async def start(
        cls,
        argv: Sequence[str | os.PathLike[str]],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        stdin: int | None = _PIPE,
        stdout: int | None = _PIPE,
        stderr: StderrMode = "tail",
        tail_bytes: int = 64 * 1024,
        grace: float = 3.0,
        limit: int = 2**16,
        name: str = "child",
    ) -> ChildProcess:
        """Start ``argv``. Raises ``OSError`` when it cannot be started (missing binary, bad cwd)."""
        args = [os.fspath(a) for a in argv]
        err = {"tail": _PIPE, "stdout": asyncio.subprocess.STDOUT, "devnull": asyncio.subprocess.DEVNULL}
        common = {
            "stdin": stdin,
            "stdout": stdout,
            "stderr": err[stderr],
            "env": dict(env) if env is not None else None,
            "cwd": os.fspath(cwd) if cwd is not None else None,
            "start_new_session": True,
            "limit": limit,
        }
        tail = Tail(tail_bytes) if stderr == "tail" else None
        if not _USE_REAPER:
            proc = await asyncio.create_subprocess_exec(*args, **common)  # type: ignore[arg-type]
            return cls(proc, proc.pid, None, grace=grace, tail=tail, name=name)
        ours, theirs = socket.socketpair()
        try:
            reaper = [sys.executable, "-I", "-S", _REAPER, str(theirs.fileno()), repr(grace), "--", *args]
            proc = await asyncio.create_subprocess_exec(
                *reaper,
                pass_fds=(theirs.fileno(),),
                **common,  # type: ignore[arg-type]
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        child = cls(proc, proc.pid, ours, grace=grace, tail=tail, name=name)
        try:
            ours.setblocking(False)
            loop = asyncio.get_running_loop()
            line = b""
            async with asyncio.timeout(_REPORT_TIMEOUT):
                while not line.endswith(b"\n"):
                    chunk = await loop.sock_recv(ours, 64)
                    if not chunk:
                        break
                    line += chunk
        except BaseException:
            await child.stop(grace=0)
            raise
        match line.split():
            case [b"pid", pid]:
                child.pid = int(pid)
                return child
            case [b"err", errno, *_]:
                await child.wait()
                code = int(errno)
                raise OSError(code, os.strerror(code), args[0])
            case _:
                await child.stop(grace=0)
                raise OSError(f"the process reaper did not start {args[0]!r} (reported {line!r})")

    @property
    def stdin(self) -> asyncio.StreamWriter | None:
        return self._proc.stdin

    @property
    def stdout(self) -> asyncio.StreamReader | None:
        return self._proc.stdout

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    def stderr_tail(self) -> str:
        return self._tail.text() if self._tail is not None else ""

    async def wait(self) -> int:
        """The child's exit status, once the child and every descendant are gone."""
        code = await self._proc.wait()
        if self._lifeline is not None:
            self._lifeline.close()
        return code

    async def stderr_done(self, within: float = 1.0) -> None:
        """Wait (at most ``within`` seconds) until stderr reached EOF, so the tail is complete."""
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), within)

    def _signal(self, sig: signal.Signals) -> None:
        if self._proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if self._lifeline is not None:
                os.kill(self._proc.pid, sig)
            else:
                os.killpg(self._proc.pid, signal.SIGKILL if sig == signal.SIGUSR1 else sig)

    def terminate(self) -> None:
        """SIGTERM to the child and all its descendants, SIGKILL after ``grace``. Sync, idempotent."""
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the child and all its descendants now. Sync, idempotent."""
        self._signal(signal.SIGUSR1)

    async def stop(self, *, grace: float | None = None, stdin_grace: float = 0.0) -> int:
        """End the child and its tree (see the module docstring); returns its exit status. Idempotent.

        ``stdin_grace``: first close stdin and give the child that long to exit by itself. ``grace``
        overrides the start's grace for the SIGTERM-to-SIGKILL delay where the platform allows."""
        try:
            if self._proc.returncode is None and stdin_grace > 0 and self._proc.stdin is not None:
                self._proc.stdin.close()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._proc.wait(), stdin_grace)
            wait = self.grace if grace is None else grace
            if grace is not None and grace <= 0:
                self.kill()
            else:
                self.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._proc.wait(), wait + _MARGIN)
            if self._proc.returncode is None:
                self.kill()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._proc.wait(), _MARGIN)
            if self._proc.returncode is None:  # the reaper itself is stuck
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
            code = await self.wait()
        except asyncio.CancelledError:
            self.kill()
            raise
        await self.stderr_done(0.5)
        if self._stderr_task is not None:
            self._stderr_task.cancel()
        return code
