"""One way to start a child process and to end it with everything it started.

``ChildProcess.start(argv, ...)`` starts ``argv`` in a new session under the reaper
(``agent_fleet/_reaper.py``, Linux): one long-lived helper per agent-fleet process, started with the
first child, that forks a small supervisor for each child. The supervisor is a child subreaper, so
every descendant of the child stays reachable however it changed its process group or session (codex
puts each command in its own group), and it ends the whole tree when the child exits, when it is told
to (``terminate``: SIGTERM to every descendant, SIGKILL after ``grace``; ``kill``: SIGKILL at once),
or when this process dies (it holds a socket whose EOF it watches; no PID is ever guessed). A child
costs a fork of the running reaper, not an interpreter start of its own (issue 29).

On other systems the child is started directly in a new session and its process group is signalled
instead (descendants that leave the group are not reached there).

The stderr of the child is kept as a bounded tail (``stderr_tail``) unless it is merged into stdout or
discarded; ``Tail`` is the same buffer for callers that keep an output tail themselves.

Theory of operation
-------------------
``start`` passes the child's stdio and its *lifeline* (one end of a socket pair) to the reaper
(``SCM_RIGHTS``), writes the request (argv, environment, working directory, grace) on the lifeline and
returns once the child was exec'd (a failure raises the same ``OSError`` as ``create_subprocess_exec``
would), with ``pid`` the child's own PID. Commands go down the lifeline (``T`` terminate, ``K`` kill)
and the child's status comes back on it once every descendant was reaped: ``wait()`` returns it
(negative signal number as usual). ``stop()`` is the whole orderly shutdown: optionally close stdin
and give the child time to exit, ``terminate``, wait ``grace`` plus a margin, ``kill``, and as a last
resort SIGKILL the supervisor's process group. Cancelling ``stop()`` sends ``kill`` first.

A process that forks (without exec) starts a reaper of its own for its children.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import io
import json
import os
import signal
import socket
import subprocess
import sys
import threading
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
_DEVNULL: Final = asyncio.subprocess.DEVNULL
_GONE: Final = (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN, errno.ECONNREFUSED)

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


# -- the process's one reaper -------------------------------------------------------------------------


class _Reaper:
    """The long-lived reaper of this process: started on first use, again after a fork or its death."""

    _lock = threading.Lock()
    _current: _Reaper | None = None

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _REAPER, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,  # a terminal's Ctrl-C is for agent-fleet, which stops its children
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.control = ours
        self.owner = os.getpid()

    @classmethod
    def hand_over(cls, fds: Sequence[int]) -> None:
        """Pass a child's lifeline and stdio to the reaper (starting it when needed)."""
        with cls._lock:
            for attempt in (1, 2):
                reaper = cls._current
                if reaper is None or reaper.owner != os.getpid():
                    reaper = cls._current = _Reaper()
                try:
                    socket.send_fds(reaper.control, [b"c"], list(fds))
                    return
                except OSError as exc:
                    if attempt == 2 or exc.errno not in _GONE:
                        raise
                    reaper.close()  # it died: start another
                    cls._current = None

    def close(self) -> None:
        self.control.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=0)

    @classmethod
    def _at_exit(cls) -> None:
        reaper, cls._current = cls._current, None
        if reaper is not None and reaper.owner == os.getpid():
            reaper.control.close()  # EOF: it exits at once (the supervisors watch their own lifelines)
            with contextlib.suppress(subprocess.TimeoutExpired):
                reaper.proc.wait(timeout=1.0)

    @classmethod
    def _forget_after_fork(cls) -> None:
        reaper, cls._current = cls._current, None
        cls._lock = threading.Lock()
        if reaper is not None:
            with contextlib.suppress(OSError):
                reaper.control.close()  # the parent's reaper ends with the parent, not with us


if _USE_REAPER:
    os.register_at_fork(after_in_child=_Reaper._forget_after_fork)
    atexit.register(_Reaper._at_exit)


class _Ends:
    """The child's stdio: the descriptors it gets and the pipe ends this process keeps."""

    def __init__(self) -> None:
        self.child: list[int] = []
        self.created: list[int] = []  # ours to close once handed over
        self.keep: dict[str, int] = {}

    def add(self, name: str, mode: int | None, *, writes: bool) -> None:
        if mode == _PIPE:
            r, w = os.pipe()
            child_end, ours = (w, r) if writes else (r, w)
            self.keep[name] = ours
            self.child.append(child_end)
            self.created.append(child_end)
        elif mode == _DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR)
            self.child.append(fd)
            self.created.append(fd)
        elif mode is None:
            self.child.append((0, 1, 2)[len(self.child)])  # inherited: this process's own
        else:
            self.child.append(mode)

    def close_created(self) -> None:
        for fd in self.created:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.created = []

    def close_kept(self) -> None:
        for fd in self.keep.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.keep = {}


def _request(
    args: list[str], env: Mapping[str, str] | None, cwd: str | os.PathLike[str] | None, grace: float
) -> dict[str, object]:
    """What the supervisor runs. The environment and directory are those a plain spawn would give the
    child now (the reaper was started earlier, maybe elsewhere)."""
    return {
        "argv": args,
        "env": dict(os.environ if env is None else env),
        "cwd": os.path.abspath(os.fspath(cwd) if cwd is not None else os.getcwd()),
        "grace": grace,
    }


async def _read_pipe(loop: asyncio.AbstractEventLoop, fd: int, limit: int) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=limit, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), io.FileIO(fd, "r"))
    return reader


async def _write_pipe(loop: asyncio.AbstractEventLoop, fd: int) -> asyncio.StreamWriter:
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop), io.FileIO(fd, "w")
    )
    return asyncio.StreamWriter(transport, protocol, None, loop)


class _Supervised:
    """A child under the reaper, seen through its lifeline."""

    def __init__(self, lifeline: socket.socket) -> None:
        self.lifeline = lifeline
        self.supervisor: int | None = None
        self.returncode: int | None = None
        self._ended = asyncio.get_running_loop().create_future()
        self._watcher: asyncio.Task[None] | None = None
        self._rest = b""  # what came after the first line (a quick child's exit)

    async def report(self) -> bytes:
        """The supervisor's first line (``pid ...`` or ``err ...``)."""
        loop = asyncio.get_running_loop()
        data = b""
        async with asyncio.timeout(_REPORT_TIMEOUT):
            while b"\n" not in data:
                chunk = await loop.sock_recv(self.lifeline, 256)
                if not chunk:
                    break
                data += chunk
        line, _, self._rest = data.partition(b"\n")
        return line

    def watch(self, name: str) -> None:
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name=f"{name}:lifeline")

    async def _watch(self) -> None:
        loop = asyncio.get_running_loop()
        data = self._rest
        status: int | None = None
        with contextlib.suppress(OSError):
            while b"\n" not in data and (chunk := await loop.sock_recv(self.lifeline, 256)):
                data += chunk
        line = data.split(b"\n", 1)[0].split()
        if len(line) == 2 and line[0] == b"exit":
            status = int(line[1])
        # No status: the supervisor itself was killed (with it, by PDEATHSIG, the child).
        self.returncode = os.waitstatus_to_exitcode(status) if status is not None else -signal.SIGKILL
        self.lifeline.close()
        if not self._ended.done():
            self._ended.set_result(self.returncode)

    async def wait(self) -> int:
        return await asyncio.shield(self._ended)

    def send(self, command: bytes) -> None:
        if self.returncode is not None:
            return
        with contextlib.suppress(OSError):
            self.lifeline.send(command)

    async def abandon(self) -> None:
        """Kill the tree now and wait (a few seconds at most) until it is gone; close the lifeline."""
        with contextlib.suppress(OSError):
            self.lifeline.send(b"K")
        try:
            if self._watcher is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wait(), _MARGIN)
                return
            loop = asyncio.get_running_loop()
            with contextlib.suppress(OSError, TimeoutError):
                async with asyncio.timeout(_MARGIN):
                    while await loop.sock_recv(self.lifeline, 256):
                        pass
        finally:
            self.lifeline.close()

    def kill_group(self) -> None:
        """Last resort: the supervisor does not answer. Its session's group holds it and the child."""
        if self.returncode is None and self.supervisor is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.supervisor, signal.SIGKILL)


class _Direct:
    """A child started directly (no reaper on this system): its process group is signalled."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @property
    def returncode(self) -> int | None:
        return self.proc.returncode

    async def wait(self) -> int:
        return await self.proc.wait()

    def send(self, command: bytes) -> None:
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL if command == b"K" else signal.SIGTERM)

    def kill_group(self) -> None:
        self.send(b"K")


class ChildProcess:
    """A started child (see the module docstring). Create with ``await ChildProcess.start(...)``."""

    def __init__(
        self,
        control: _Supervised | _Direct,
        pid: int,
        stdin: asyncio.StreamWriter | None,
        stdout: asyncio.StreamReader | None,
        stderr: asyncio.StreamReader | None,
        *,
        grace: float,
        tail: Tail | None,
        name: str,
    ) -> None:
        self._control = control
        self.pid = pid
        self._stdin = stdin
        self._stdout = stdout
        self.grace = grace
        self._tail = tail
        self._stderr_task: asyncio.Task[None] | None = None
        if tail is not None and stderr is not None:
            self._stderr_task = asyncio.get_running_loop().create_task(
                tail.drain(stderr), name=f"{name}:stderr"
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
        tail = Tail(tail_bytes) if stderr == "tail" else None
        if not _USE_REAPER:
            err = {"tail": _PIPE, "stdout": asyncio.subprocess.STDOUT, "devnull": _DEVNULL}
            proc = await asyncio.create_subprocess_exec(
                *args,
                stdin=stdin,
                stdout=stdout,
                stderr=err[stderr],
                env=dict(env) if env is not None else None,
                cwd=os.fspath(cwd) if cwd is not None else None,
                start_new_session=True,
                limit=limit,
            )
            return cls(
                _Direct(proc),
                proc.pid,
                proc.stdin,
                proc.stdout,
                proc.stderr,
                grace=grace,
                tail=tail,
                name=name,
            )
        return await cls._start_reaped(args, env, cwd, stdin, stdout, stderr, tail, grace, limit, name)

    @classmethod
    async def _start_reaped(
        cls,
        args: list[str],
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        stdin: int | None,
        stdout: int | None,
        stderr: StderrMode,
        tail: Tail | None,
        grace: float,
        limit: int,
        name: str,
    ) -> ChildProcess:
        loop = asyncio.get_running_loop()
        request = _request(args, env, cwd, grace)
        ends = _Ends()
        ours, theirs = socket.socketpair()
        try:
            ends.add("stdin", stdin, writes=False)
            ends.add("stdout", stdout, writes=True)
            if stderr == "stdout":
                ends.child.append(ends.child[1])
            else:
                ends.add("stderr", _PIPE if stderr == "tail" else _DEVNULL, writes=True)
            _Reaper.hand_over([theirs.fileno(), *ends.child])
        except BaseException:
            ours.close()
            ends.close_kept()
            raise
        finally:
            theirs.close()
            ends.close_created()
        child = _Supervised(ours)
        wrapped: list[asyncio.StreamWriter | asyncio.StreamReader] = []
        try:
            ours.setblocking(False)
            await loop.sock_sendall(ours, json.dumps(request).encode() + b"\n")
            line = await child.report()
            match line.split():
                case [b"pid", pid, supervisor]:
                    child.supervisor = int(supervisor)
                case [b"err", errno, what, *_]:
                    code = int(errno)
                    raise OSError(code, os.strerror(code), request["cwd"] if what == b"chdir" else args[0])
                case _:
                    raise OSError(f"the process reaper did not start {args[0]!r} (reported {line!r})")
            child.watch(name)
            streams: dict[str, asyncio.StreamWriter | asyncio.StreamReader] = {}
            for key in ("stdin", "stdout", "stderr"):
                if key in ends.keep:
                    fd = ends.keep.pop(key)  # the transport owns it from here
                    stream = await (_write_pipe(loop, fd) if key == "stdin" else _read_pipe(loop, fd, limit))
                    streams[key] = stream
                    wrapped.append(stream)
        except BaseException:
            # Cancelled (or refused) once the child may be running: end its tree before leaving, as
            # stop() would, so a start that raised leaves nothing behind.
            ends.close_kept()
            for stream in wrapped:
                if isinstance(stream, asyncio.StreamWriter):
                    stream.close()
            await child.abandon()
            raise
        stdin_w = streams.get("stdin")
        stdout_r, stderr_r = streams.get("stdout"), streams.get("stderr")
        assert stdin_w is None or isinstance(stdin_w, asyncio.StreamWriter)
        assert stdout_r is None or isinstance(stdout_r, asyncio.StreamReader)
        assert stderr_r is None or isinstance(stderr_r, asyncio.StreamReader)
        return cls(child, int(pid), stdin_w, stdout_r, stderr_r, grace=grace, tail=tail, name=name)

    @property
    def stdin(self) -> asyncio.StreamWriter | None:
        return self._stdin

    @property
    def stdout(self) -> asyncio.StreamReader | None:
        return self._stdout

    @property
    def returncode(self) -> int | None:
        return self._control.returncode

    def stderr_tail(self) -> str:
        return self._tail.text() if self._tail is not None else ""

    async def wait(self) -> int:
        """The child's exit status, once the child and every descendant are gone."""
        return await self._control.wait()

    async def stderr_done(self, within: float = 1.0) -> None:
        """Wait (at most ``within`` seconds) until stderr reached EOF, so the tail is complete."""
        if self._stderr_task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(self._stderr_task), within)

    def terminate(self) -> None:
        """SIGTERM to the child and all its descendants, SIGKILL after ``grace``. Sync, idempotent."""
        self._control.send(b"T")

    def kill(self) -> None:
        """SIGKILL to the child and all its descendants now. Sync, idempotent."""
        self._control.send(b"K")

    async def stop(self, *, grace: float | None = None, stdin_grace: float = 0.0) -> int:
        """End the child and its tree (see the module docstring); returns its exit status. Idempotent.

        ``stdin_grace``: first close stdin and give the child that long to exit by itself. ``grace``
        overrides the start's grace for the SIGTERM-to-SIGKILL delay where the platform allows."""
        try:
            if self.returncode is None and stdin_grace > 0 and self._stdin is not None:
                self._stdin.close()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wait(), stdin_grace)
            wait = self.grace if grace is None else grace
            if grace is not None and grace <= 0:
                self.kill()
            else:
                self.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wait(), wait + _MARGIN)
            if self.returncode is None:
                self.kill()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wait(), _MARGIN)
            if self.returncode is None:  # the supervisor itself is stuck
                self._control.kill_group()
            code = await self.wait()
        except asyncio.CancelledError:
            self.kill()
            raise
        if self._stdin is not None:
            self._stdin.close()
        await self.stderr_done(0.5)
        if self._stderr_task is not None:
            self._stderr_task.cancel()
        return code
