"""``CodexExecProvider``: the provider contract over ``codex exec --json``, one process per turn.

Theory of operation
-------------------
Every turn is one ``codex exec --json`` child under the reaper (``agent_fleet._process``). The
first turn of a session runs ``codex exec``; every later one (``send``, ``Provider.resume``) runs
``codex exec resume <thread_id>``, so codex replays the recorded thread and the model sees the whole
history. The prompt is written to stdin (``-``) and stdin is closed; it never appears in argv. The
exact command lines are in ``agent_fleet.codex._exec_argv``.

One driver task per turn owns the child: it reads stdout in chunks into the sans-I/O
``ExecEventParser`` (which enforces the line-size limit), keeps the last ``stderr_tail_bytes`` of
stderr, and queues non-terminal events as they arrive. The terminal event is held back until stdout
reached EOF *and* the exit code is known, so nothing printed just before exit is lost and the outcome
can use both: the stream's own ``Result`` / ``turn.failed`` wins; otherwise a non-zero exit is
``process_exited`` (``auth_failed`` when the stream or stderr shows a credential problem) and a clean
exit without a terminal is a ``protocol_error``.

Aborts (``Spec.timeout``, ``stop()``, cancelling a task awaiting the turn's next event,
``shutdown()``) send SIGTERM to codex and every descendant at once and SIGKILL after ``kill_grace``
seconds. Codex starts sandboxed commands and its shell snapshot with ``setsid``, so they are not in
its process group; the reaper reaches them anyway (it is their subreaper), and it also ends what a
finished turn left running, so no orphan outlives a turn. An aborted turn then ends with
``Error(code="timeout")`` (retryable) or ``Error(code="cancelled")``, unless codex had already
reported its own terminal event, which then stands.

``spawn`` returns once ``thread.started`` arrived (or the process ended first), so ``session_id`` is
set on a returned handle unless the turn failed before codex created the thread; then ``session_id``
raises ``UsageError`` and the handle's stream still yields the ``Error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, Protocol

from agent_fleet._codex_binary import check_codex_version, codex_version_async, find_codex
from agent_fleet._process import ChildProcess
from agent_fleet._provider.handle import StreamedHandle
from agent_fleet._provider.stream import EventStream
from agent_fleet._provider.watchdog import IdleWatchdog
from agent_fleet.codex._box import OS_SANDBOX, Box, session_box
from agent_fleet.codex._exec_argv import ExecCommand, build_command, resolve_cwd
from agent_fleet.codex._exec_events import DEFAULT_MAX_LINE_BYTES, ExecEventParser, StderrRefusals
from agent_fleet.codex.options import CodexOptions
from agent_fleet.codex.translate import declared_writable_roots
from agent_fleet.contract import Capabilities, Provider, Spec
from agent_fleet.errors import ProviderUnavailable, Unsupported, UsageError
from agent_fleet.events import Error, ErrorCode, Event, Result, System, ToolResult, ToolUse, is_terminal
from agent_fleet.notices import spec_unsupported

__all__ = ["CAPABILITIES", "CodexExecHandle", "CodexExecProvider"]

logger = logging.getLogger(__name__)

CAPABILITIES: Final = Capabilities(
    supports_injection=False,  # stdin is closed once the prompt is written
    supports_resume=True,  # codex exec resume <thread_id>
    supports_tool_plugins=True,  # Spec.mcp_servers -> -c mcp_servers.<name>={...}
    supports_output_schema=True,  # --output-schema FILE
    supports_reasoning_effort=True,  # -c model_reasoning_effort=...
    needs_permission_config=False,  # approval policy is 'never': nothing to decide per command
    emits_subagent_events=True,  # collab_tool_call items -> SubAgent
    tool_permission_format="codex-sandbox",
    enforces_approvals=False,  # codex exec never asks: Spec.permission cannot be enforced
    os_sandbox=OS_SANDBOX + "; nothing runs unsandboxed (approval policy never)",
)

_READ_CHUNK: Final = 64 * 1024
_EOF_GRACE: Final = 2.0  # after exit, how long a pipe held open by a stray descendant may delay EOF
_EXIT_GRACE: Final = 10.0  # after EOF, how long codex may take to exit before it is killed


def _write_turn_files(spec: Spec) -> tuple[str | None, str | None, str | None]:
    """Write the output schema and base instructions to a private temp dir (removed after the turn)."""
    if spec.output_schema is None and spec.base_instructions is None:
        return None, None, None
    tempdir = tempfile.mkdtemp(prefix="agent-fleet-exec-")
    schema_file = instructions_file = None
    try:
        if spec.output_schema is not None:
            schema_file = os.path.join(tempdir, "output-schema.json")
            Path(schema_file).write_text(json.dumps(dict(spec.output_schema)), encoding="utf-8")
        if spec.base_instructions is not None:
            instructions_file = os.path.join(tempdir, "base-instructions.md")
            Path(instructions_file).write_text(spec.base_instructions, encoding="utf-8")
    except BaseException:
        shutil.rmtree(tempdir, ignore_errors=True)
        raise
    return tempdir, schema_file, instructions_file


class _ExecTurn:
    """One turn: one child process, its driver task and its event stream."""

    def __init__(
        self,
        command: ExecCommand,
        *,
        env: dict[str, str],
        parser: ExecEventParser,
        timeout: float | None,
        kill_grace: float,
        stderr_tail_bytes: int,
        tempdir: str | None,
        idle_timeout: float | None = None,
        bound: int | None = None,
    ) -> None:
        self.command = command
        self.idle_timeout = idle_timeout or None
        self._watchdog: IdleWatchdog | None = None
        self._tools: set[str] = set()  # tool uses without a result: quiet is expected meanwhile
        self.env = env
        self.parser = parser
        self.timeout = timeout
        self.kill_grace = kill_grace
        self.stderr_limit = stderr_tail_bytes
        self.tempdir = tempdir
        self.stream = EventStream(bound)  # CodexOptions.event_buffer: an unread turn stays small
        self.session_known = asyncio.Event()
        self.done = asyncio.Event()
        self.proc: ChildProcess | None = None
        self._abort_code: ErrorCode | None = None
        self._abort_message = ""
        self._aborted = False
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.on_done: Callable[[_ExecTurn], None] | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def stderr_tail(self) -> str:
        return self.proc.stderr_tail() if self.proc is not None else ""

    async def start(self) -> None:
        """Start the child and its driver. Raises ``ProviderUnavailable`` when it cannot be started."""
        for notice in spec_unsupported(self.command.untranslated):
            self.stream.push(notice)
        try:
            self.proc = await ChildProcess.start(
                self.command.argv,
                cwd=self.command.cwd,
                env=self.env,
                tail_bytes=self.stderr_limit,
                grace=self.kill_grace,
                name="codex-exec",
            )
        except OSError as exc:
            self._cleanup()
            raise ProviderUnavailable(f"cannot start {self.command.argv[0]}: {exc}") from exc
        if self.timeout is not None:
            self._timer = asyncio.get_running_loop().call_later(self.timeout, self._on_timeout)
        if self.idle_timeout is not None:
            self._watchdog = IdleWatchdog(self.idle_timeout, self._on_idle, busy=lambda: bool(self._tools))
        self._task = asyncio.create_task(self._drive(self.proc), name=f"codex-exec:{self.proc.pid}")

    def _on_timeout(self) -> None:
        self._timer = None
        self.abort("timeout", f"turn exceeded its timeout of {self.timeout:g}s and was killed")

    def _on_idle(self) -> None:
        message = f"no event from codex exec for {self.idle_timeout:g}s (idle timeout); it was killed"
        self.abort("timeout", message)

    def abort(self, code: ErrorCode, message: str) -> None:
        """End codex and its whole tree now (SIGTERM, SIGKILL after the grace). Sync and idempotent."""
        proc = self.proc
        if self.done.is_set() or proc is None or self._aborted:
            return
        self._aborted = True
        if self.parser.terminal is None:
            self._abort_code, self._abort_message = code, message
        proc.terminate()  # the reaper escalates to SIGKILL after kill_grace

    async def wait_done(self) -> None:
        await self.done.wait()

    # --- the driver ---------------------------------------------------------------------------------
    async def _drive(self, proc: ChildProcess) -> None:
        terminal: Result | Error = Error(code="cancelled", message="the turn's driver was cancelled")
        assert proc.stdout is not None
        feeder = asyncio.create_task(self._write_stdin(proc))
        stderr = asyncio.create_task(proc.stderr_done(_EOF_GRACE + _EXIT_GRACE))
        reader = asyncio.create_task(self._read_stdout(proc.stdout))
        exited = asyncio.create_task(proc.wait())
        try:
            await asyncio.wait({reader, exited}, return_when=asyncio.FIRST_COMPLETED)
            if not reader.done():
                # Exited: stdout closes now, unless a stray descendant still holds the pipe open.
                await asyncio.wait({reader}, timeout=_EOF_GRACE)
            if not exited.done():
                # EOF while the process lives on: give it time to exit, then make it.
                await asyncio.wait({exited}, timeout=_EXIT_GRACE)
                if not exited.done():
                    self.abort("protocol_error", "codex exec closed stdout but did not exit")
                    await exited
            for task in (reader, stderr, feeder):
                if not task.done():
                    await asyncio.wait({task}, timeout=_EOF_GRACE)
                    task.cancel()
            await asyncio.gather(reader, stderr, feeder, return_exceptions=True)
            if not reader.cancelled() and (exc := reader.exception()) is not None:
                raise exc
            for event in self.parser.close():
                self._emit(event)
            # Escalations codex rejected leave no item on stdout, only a log line on stderr.
            for event in StderrRefusals().feed(proc.stderr_tail().encode() + b"\n"):
                self._emit(event)
            terminal = self._decide(proc.returncode)
        except asyncio.CancelledError:
            # The loop is going away (e.g. asyncio.run() ended without shutdown()): leave no orphan.
            proc.kill()
            raise
        except Exception as exc:  # a bug here must still end the stream and kill the child
            logger.exception("codex exec driver failed")
            proc.kill()
            terminal = Error(code="protocol_error", message=f"codex exec driver failed: {exc!r}")
        finally:
            for pending in (feeder, stderr, reader, exited):
                pending.cancel()
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._watchdog is not None:
                self._watchdog.cancel()
            self._cleanup()
            self.stream.finish(terminal)
            self.done.set()
            self.session_known.set()
            if self.on_done is not None:
                self.on_done(self)

    def _decide(self, exit_code: int | None) -> Result | Error:
        if self._abort_code is not None and self.parser.terminal is None:
            retryable = self._abort_code == "timeout"
            data = {"exit_code": exit_code, "stderr_tail": self.stderr_tail}
            return Error(code=self._abort_code, message=self._abort_message, retryable=retryable, data=data)
        return self.parser.finish(exit_code, self.stderr_tail)

    def _emit(self, event: Event) -> None:
        if not is_terminal(event):  # the terminal is queued by the driver, after exit
            if isinstance(event, ToolUse):
                self._tools.add(event.id)
            elif isinstance(event, ToolResult):
                self._tools.discard(event.id)
            self.stream.push(event)

    async def _write_stdin(self, proc: ChildProcess) -> None:
        stdin = proc.stdin
        assert stdin is not None
        try:
            stdin.write(self.command.stdin)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # codex exited before reading its prompt: the exit code tells why
        finally:
            stdin.close()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                await stdin.wait_closed()

    async def _read_stdout(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(_READ_CHUNK):
            if self._watchdog is not None:
                self._watchdog.seen = True
            for event in self.parser.feed(chunk):
                self._emit(event)
            terminal = self.parser.terminal
            if isinstance(terminal, Error) and terminal.code == "protocol_error":
                self.abort("protocol_error", terminal.message)  # the stream is unusable: stop codex
            if self.parser.thread_id is not None:
                self.session_known.set()

    def _cleanup(self) -> None:
        if self.tempdir is not None:
            shutil.rmtree(self.tempdir, ignore_errors=True)
            self.tempdir = None


class _TurnLauncher(Protocol):
    """How a handle starts its next turn (``CodexExecProvider._start_turn``, bound)."""

    async def __call__(
        self, spec: Spec, *, prompt: str | None, session_id: str | None, images: bool
    ) -> _ExecTurn: ...


class CodexExecHandle(StreamedHandle[_ExecTurn]):
    """One codex thread driven through ``codex exec`` processes, one per turn.

    Calling order is the contract's. ``events()`` reads a turn once; ``wait()`` drains what is left
    (after ``events()`` it answers with the same terminal). Cancelling a task while it awaits the next
    event (in ``events()`` or ``wait()``) kills the turn's process. ``stop()`` ends the running turn; a
    later ``send()`` (``codex exec resume``, same spec settings minus images) resumes the thread.
    ``send()`` raises ``UsageError`` while a turn runs, when there is no thread to resume, or after the
    provider was shut down.
    """

    def __init__(self, launch: _TurnLauncher, spec: Spec, session_id: str | None, turn: _ExecTurn) -> None:
        self._launch = launch
        self._spec = spec
        self._session_id = session_id
        self._turn: _ExecTurn | None = turn
        self._starting = False  # a send() is starting the next turn

    @property
    def session_id(self) -> str:
        """The codex thread id. Raises ``UsageError`` if the first turn failed before codex made one."""
        sid = self._session_id
        if sid is None and self._turn is not None:
            sid = self._session_id = self._turn.parser.thread_id
        if sid is None:
            raise UsageError("no session id: the first turn ended before codex started a thread")
        return sid

    @property
    def pid(self) -> int | None:
        """The pid of the current turn's codex process (``None`` before it started)."""
        return self._turn.pid if self._turn is not None else None

    async def wait(self) -> Result:
        """Drain the current turn; return its ``Result`` or raise ``TurnFailed``."""
        return await self._require_turn().stream.result(self._stop_soon)

    def _stop_soon(self) -> None:
        # The reader was cancelled: kill the process now (stop() would only add the wait for it).
        if self._turn is not None:
            self._turn.abort("cancelled", "the task consuming the turn was cancelled")

    async def _follow_up(
        self, prompt: str, *, images: tuple[str | Path, ...], output_schema: Mapping[str, Any] | None
    ) -> None:
        if self._starting:
            raise UsageError("send(): the current turn is still running; wait for it or stop() first")
        session_id = self.session_id
        spec = self._spec
        if images or output_schema is not None:
            # exec resume takes --image and --output-schema like the first turn
            spec = dataclasses.replace(
                spec, images=images, output_schema=output_schema if output_schema else spec.output_schema
            )
        self._starting = True
        try:
            self._turn = await self._launch(spec, prompt=prompt, session_id=session_id, images=bool(images))
        finally:
            self._starting = False

    async def inject(self, text: str) -> None:
        """Always raises ``Unsupported``: a ``codex exec`` turn takes no input after its prompt."""
        raise Unsupported("codex exec cannot take input during a turn; use send() after it ends")

    async def interrupt(self) -> None:
        """Stop the running turn and keep the session: as ``stop()`` (each turn is a process of its own
        and the thread lives in codex's record), so the next ``send()`` resumes the same thread."""
        await self.stop()

    async def stop(self) -> None:
        """Kill the running turn's process group; its stream ends with ``Error(code="cancelled")``.

        Returns once the process is gone. Idempotent; a no-op when no turn runs.
        """
        turn = self._turn
        if turn is None or turn.done.is_set():
            return
        turn.abort("cancelled", "stopped by the caller")
        await turn.wait_done()


class CodexExecProvider(Provider):
    """The ``Provider`` contract over ``codex exec --json`` (see the module docstring).

    ``max_line_bytes`` bounds one stdout line (``None``: unlimited); ``stderr_tail_bytes`` bounds the
    kept stderr; ``kill_grace`` is the SIGTERM-to-SIGKILL delay when a turn is killed.
    """

    name = "codex-exec"

    def __init__(
        self,
        options: CodexOptions | None = None,
        *,
        max_line_bytes: int | None = DEFAULT_MAX_LINE_BYTES,
        stderr_tail_bytes: int = 64 * 1024,
        kill_grace: float = 3.0,
    ) -> None:
        if max_line_bytes is not None and max_line_bytes < 1:
            raise UsageError(f"max_line_bytes must be >= 1 or None, not {max_line_bytes!r}")
        if stderr_tail_bytes < 0 or kill_grace < 0:
            raise UsageError("stderr_tail_bytes and kill_grace must not be negative")
        self.options = options or CodexOptions()
        self.max_line_bytes = max_line_bytes
        self.stderr_tail_bytes = stderr_tail_bytes
        self.kill_grace = kill_grace
        self._binary: Path | None = None
        self._version: str | None = None
        self._version_notice: System | None = None  # for the first turn (once)
        self._lock = asyncio.Lock()
        self._turns: set[_ExecTurn] = set()
        self._boxes: list[Box] = []  # one per session: removed at shutdown
        self._closed = False

    @property
    def capabilities(self) -> Capabilities:
        return CAPABILITIES

    @property
    def version(self) -> str | None:
        """The codex version, once checked."""
        return self._version

    async def start(self) -> None:
        """Find the binary and check it runs (``codex --version``) and is a supported version (see
        ``_codex_binary.check_codex_version``; a version other than the pinned one is noted once, in
        the first turn's stream). Raises ``ProviderUnavailable``."""
        await self._ensure_binary()

    async def _ensure_binary(self) -> Path:
        async with self._lock:
            if self._binary is None:
                path = find_codex(self.options.codex_bin)
                version = await codex_version_async(path)
                warning = check_codex_version(version, binary=path)  # below the minimum: refused
                if warning is not None:
                    logger.warning("%s", warning)
                    self._version_notice = System(
                        subtype="codex_version", data={"version": version, "message": warning}
                    )
                self._version = version
                self._binary = path
            return self._binary

    async def spawn(self, spec: Spec) -> CodexExecHandle:
        """Start a thread with ``spec.prompt``; returns once codex reported the thread id (or ended).

        Raises ``ProviderUnavailable`` (no usable binary) or ``UsageError`` (bad spec, shut down).
        """
        launch = self._launcher(spec)
        turn = await launch(spec, prompt=None, session_id=None, images=True)
        try:
            await turn.session_known.wait()
        except asyncio.CancelledError:
            turn.abort("cancelled", "spawn() was cancelled")
            raise
        return CodexExecHandle(launch, spec, None, turn)

    async def resume(self, session_id: str, spec: Spec) -> CodexExecHandle:
        """Continue thread ``session_id`` (recorded under the same ``CODEX_HOME``) with ``spec.prompt``."""
        launch = self._launcher(spec)
        turn = await launch(spec, prompt=None, session_id=session_id, images=True)
        return CodexExecHandle(launch, spec, session_id, turn)

    def _launcher(self, spec: Spec) -> _TurnLauncher:
        """The session's turn launcher, bound to its box (``_box``; no tripwire: nothing here ever runs
        outside the sandbox, codex exec's approval policy is ``never``)."""
        if self._closed:
            raise UsageError("the provider is shut down")
        workspace = resolve_cwd(spec, self.options) or os.getcwd()
        declared = declared_writable_roots(spec.config, self.options.config)
        box = session_box(workspace, spec, declared, tripwire=False)
        self._boxes.append(box)

        async def launch(
            spec: Spec, *, prompt: str | None, session_id: str | None, images: bool
        ) -> _ExecTurn:
            return await self._start_turn(spec, prompt=prompt, session_id=session_id, images=images, box=box)

        return launch

    async def shutdown(self) -> None:
        """Kill every running turn and wait for the processes to go. Idempotent."""
        self._closed = True
        turns = list(self._turns)
        for turn in turns:
            turn.abort("cancelled", "the provider was shut down")
        await asyncio.gather(*(t.wait_done() for t in turns))
        boxes, self._boxes = self._boxes, []
        for box in boxes:
            box.close()

    async def _start_turn(
        self, spec: Spec, *, prompt: str | None, session_id: str | None, images: bool, box: Box | None = None
    ) -> _ExecTurn:
        """Start a turn of ``spec`` (a ``_TurnLauncher``); its handle makes it current."""
        if self._closed:
            raise UsageError("the provider is shut down")
        binary = await self._ensure_binary()
        tempdir, schema_file, instructions_file = _write_turn_files(spec)
        try:
            command = build_command(
                binary,
                spec,
                self.options,
                prompt=prompt,
                session_id=session_id,
                schema_file=schema_file,
                instructions_file=instructions_file,
                images=images,
                box=box,
            )
        except BaseException:
            if tempdir is not None:
                shutil.rmtree(tempdir, ignore_errors=True)
            raise
        parser = ExecEventParser(
            session_id=session_id,
            structured=spec.output_schema is not None,
            max_line_bytes=self.max_line_bytes,
            sandboxed=spec.sandbox != "danger-full-access"
            and not self.options.dangerously_bypass_approvals_and_sandbox,
        )
        turn = _ExecTurn(
            command,
            env=self.options.child_env(),
            parser=parser,
            timeout=spec.timeout,
            idle_timeout=spec.idle_timeout,
            kill_grace=self.kill_grace,
            stderr_tail_bytes=self.stderr_tail_bytes,
            tempdir=tempdir,
            bound=self.options.event_buffer,
        )
        if self._version_notice is not None:
            turn.stream.push(self._version_notice)
            self._version_notice = None
        await turn.start()
        if not turn.done.is_set():
            self._turns.add(turn)
            turn.on_done = self._turns.discard
        return turn
