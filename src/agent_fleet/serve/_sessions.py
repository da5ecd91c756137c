"""Sessions of the daemon: one provider per kind, started lazily; each session's events numbered and kept.

Theory of operation: ``Sessions.create`` spawns a session on the provider of its kind (starting that
provider the first time; codex restarts its app-server child on a crash) and starts a *pump*, a task
reading the turn's events. Events are buffered and published once per turn of the event loop
(``_records``: text deltas of one message coalesced, each record encoded once) into the session's
record list and the store; every record gets the next sequence number of its session (the SSE ``id``),
so a reader resumes exactly after the last one it saw. Readers wait on ``LiveSession.changed``, which
is set and replaced at every publication. A follow-up turn (``send``) starts a new pump. Each turn is
also a row of the store's ``turns`` (prompt, status, final text, error, usage: the session's
``history``).

Stopping (``stop``) interrupts the turn and keeps the session (``Handle.interrupt``) where the provider
can; where it cannot, or after a turn that failed (the app-server crashed under it), the handle is let
go and the next turn (``send``, or ``create(resume=...)``) resumes the session on the provider. So a
session whose turn is not running can always be continued.

Memory: at most ``max_live`` finished sessions stay loaded (their handle, their last turn's records);
beyond that the least recently finished are evicted: their handle is stopped and their thread archived
on the provider (``Provider.archive_session``: it leaves the provider's memory, which an unsubscribe
alone did not), and everything about them is read from the store. A follow-up turn on a session that
is not loaded (evicted, or recorded by an earlier run of the daemon) brings its thread back
(``unarchive_session``) and resumes it through ``provider.resume`` with its stored spec.

Clients: a running session with no reader of its event stream for ``orphan_timeout`` seconds (its
client went away) is stopped as ``stop`` does (so it can be continued); ``None`` keeps it running. A
*watcher* (the dashboard's session page, ``?watch=1``) reads the stream without being its client: it is
not counted and does not keep an orphan running.

The dashboard: ``on_change(session_id)`` is called whenever what ``row`` shows of a session may have
changed (it started, its state, step, usage, model or clients changed, it was labelled or unloaded), and
``on_note(session_id, note)`` when a batch's runner left a note on it (``note``: a gate, a follow-up).
Rows carry what a person needs to tell sessions apart: prompt, task and batch, cwd, provider, the model
it really runs (``scripted`` when ``agent_fleet.testing`` serves it), start, duration, tokens, cost.
Session states::

    running --Result--> idle --send--> running
    running --Error(cancelled)--> stopped --send--> running
    running --other Error--> failed --send--> running      (resumed on the provider)
    (daemon crashed while running) -> interrupted --send--> running
    (any) --drain--> stopped
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_fleet._event_json import spec_from_json, spec_to_json
from agent_fleet.contract import Handle, Provider, Spec
from agent_fleet.errors import ConnectionClosed, Unsupported, UsageError
from agent_fleet.events import Error, Event, Result, System, TextDelta, TokenUsage, ToolUse
from agent_fleet.runner import Redactor, make_provider
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.serve._floor import Floor
from agent_fleet.serve._records import DeltaBuffer, RecordEncoder, is_terminal
from agent_fleet.serve._store import Store
from agent_fleet.serve._stream import Batch, read_stream
from agent_fleet.serve._views import STATES, NotFound, SessionViews

__all__ = ["STATES", "LiveSession", "NotFound", "Sessions"]

logger = logging.getLogger(__name__)
_FLUSH_EVERY = 0.05  # seconds between writes of queued event records (terminal events write at once)


def _nothing(*args: Any) -> None:
    pass


@dataclass(slots=True, eq=False)
class LiveSession:
    id: str
    provider: str
    handle: Handle
    records: list[tuple[bytes, bool]] = field(default_factory=list)  # (JSON, terminal); seq i + 1 + base
    base: int = 0
    state: str = "running"
    turns: int = 1
    usage: dict[str, Any] | None = None
    step: str = ""
    pump: asyncio.Task[None] | None = None
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: float = 0.0  # when its last turn ended (monotonic): the least recent is evicted first
    continuable: bool = True  # the handle can take the next turn (else it is resumed on the provider)
    interrupted: bool = False  # this turn was stopped with Handle.interrupt (the session kept)
    readers: int = 0  # event streams open on it
    alone: asyncio.TimerHandle | None = None  # the orphan timer while it runs with no reader
    stopping: asyncio.Future[None] | None = None  # a stop() still letting go of the thread
    buffer: DeltaBuffer = field(default_factory=DeltaBuffer)
    publishing: asyncio.Handle | None = None

    @property
    def last_seq(self) -> int:
        return self.base + len(self.records)


class Sessions(SessionViews):
    """The daemon's sessions (see the module docstring; what is shown of them: ``_views``)."""

    def __init__(
        self,
        *,
        store: Store,
        options: Mapping[str, Any],
        approval_handler: Any,
        allow_roots: Sequence[Path],
        redactor: Redactor,
        floor: Floor | None = None,
        max_live: int = 256,
        orphan_timeout: float | None = 300.0,
        providers: Callable[[str, Any], Provider] = make_provider,
        prices: PriceTable | None = None,
    ) -> None:
        self.store = store
        self.prices = prices
        self.on_change: Callable[[str], None] = _nothing  # (see the module docstring)
        self.on_note: Callable[[str, dict[str, Any]], None] = _nothing
        self._make_provider = providers
        self._options = dict(options)
        self._handler = approval_handler
        self.allow_roots = tuple(Path(os.path.realpath(root)) for root in allow_roots)
        self._redactor = redactor
        self._records = RecordEncoder(redactor)
        self.floor = floor if floor is not None else Floor(allow_roots=self.allow_roots)
        self._providers: dict[str, Provider] = {}
        self._provider_lock = asyncio.Lock()
        self.live: dict[str, LiveSession] = {}
        self.max_live = max_live
        self.orphan_timeout = orphan_timeout
        self._opening: dict[str, tuple[asyncio.Lock, list[int]]] = {}  # one resume of a session at once
        self._releasing: dict[str, asyncio.Task[None]] = {}  # let-go handles being stopped (and archived)
        self.draining = False
        self._flush_handle: asyncio.TimerHandle | None = None

    # -- providers ---------------------------------------------------------------------------------

    def _provider_options(self, name: str) -> Any:
        options = self._options.get(name)
        if options is None:
            from agent_fleet.runner import provider_entry

            options = provider_entry(name).options(None)
        names = {f.name for f in dataclasses.fields(options)}
        extra: dict[str, Any] = {}
        if "approval_handler" in names and options.approval_handler is None:
            extra["approval_handler"] = self._handler
        if "restart_on_crash" in names:
            extra["restart_on_crash"] = True
        return dataclasses.replace(options, **extra) if extra else options

    async def provider(self, name: str) -> Provider:
        """The started provider of kind ``name`` (started on first use)."""
        async with self._provider_lock:
            provider = self._providers.get(name)
            if provider is None:
                provider = self._make_provider(name, self._provider_options(name))
                await provider.start()
                self._providers[name] = provider
            return provider

    def provider_pids(self) -> dict[str, int | None]:
        return {name: p.pid for name, p in self._providers.items()}

    # -- sessions ----------------------------------------------------------------------------------

    def check_cwd(self, cwd: str | os.PathLike[str] | None) -> str:
        """``cwd`` resolved (the first allowed root when None); ``Refused`` when outside them all."""
        return self.floor.cwd(cwd)

    def check_images(self, images: Sequence[str | os.PathLike[str]]) -> tuple[str, ...]:
        """``images`` as given: URLs, or files under an allowed root (``Refused`` otherwise)."""
        return self.floor.images(images)

    def _prepare(self, spec: Spec) -> tuple[Spec, Spec]:
        """The spec the session runs with (every field checked by the floor: ``Refused`` is a 403) and
        the one to store: the client's as sent, its paths resolved (the daemon's floor stays apart)."""
        if self.draining:
            raise UsageError("the daemon is shutting down")
        run = self.floor.spec(spec)
        return run, dataclasses.replace(spec, cwd=run.cwd, images=run.images, temp_dir=run.temp_dir)

    async def create(
        self, spec: Spec, provider_name: str, resume: str | None = None
    ) -> tuple[LiveSession, int]:
        """Start a session (or resume ``resume``); returns it and the event id its new turn follows."""
        spec, stored = self._prepare(spec)
        if resume is None:
            return await self._open(spec, stored, provider_name, None)
        lock, users = self._opening.setdefault(resume, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:  # two follow-ups racing must not resume the thread twice
                session = self.live.get(resume)
                if session is not None and (session.state == "running" or session.continuable):
                    cursor = await self._next_turn(session, spec.prompt, spec.images, spec.output_schema)
                    return session, cursor
                if session is not None:  # stopped for good, or failed: let go, then resume
                    self._let_go(session)
                releasing = self._releasing.get(resume)
                if releasing is not None:  # the provider must forget the thread first
                    await asyncio.wait([releasing])
                return await self._open(spec, stored, provider_name, resume)
        finally:
            users[0] -= 1
            if not users[0]:
                del self._opening[resume]

    async def _open(
        self, spec: Spec, stored: Spec, provider_name: str, resume: str | None
    ) -> tuple[LiveSession, int]:
        provider = await self.provider(provider_name)
        row = self.store.session(resume) if resume is not None else None
        if resume is not None and (row is None or row["archived"]):
            # Archived when it was evicted (or unknown here: maybe archived by another client).
            try:
                await provider.unarchive_session(resume)
            except Unsupported:
                pass
            except Exception as exc:  # not archived after all (or never ours): the resume says
                logger.info("session %s: unarchive failed (%s); resuming", resume, type(exc).__name__)
            if row is not None:
                self.store.update(resume, archived=0)
        try:
            handle = await (provider.resume(resume, spec) if resume is not None else provider.spawn(spec))
        except ConnectionClosed:
            # The child died under this request before anyone noticed (a crash the provider restarts
            # from): once more, on the new child. A second failure is the client's 502.
            logger.warning("the %s provider's connection closed; trying once more", provider_name)
            handle = await (provider.resume(resume, spec) if resume is not None else provider.spawn(spec))
        sid = handle.session_id
        base = self.store.last_seq(sid) if resume is not None else 0
        row = self.store.session(sid) if resume is not None else None
        turns = row["turns"] + 1 if row is not None else 1
        session = LiveSession(id=sid, provider=provider_name, handle=handle, base=base, turns=turns)
        with self.store.transaction():  # (the store redacts what it writes)
            if row is not None:
                self.store.update(sid, state="running", turns=turns, ended=None)
            else:
                self.store.add_session(sid, provider_name, spec_to_json(stored))
            self.store.add_turn(sid, turns, spec.prompt, base)
        self.live[sid] = session
        self._start_pump(session)
        self.on_change(sid)
        return session, base

    def _start_pump(self, session: LiveSession) -> None:
        session.pump = asyncio.create_task(self._pump(session), name=f"pump:{session.id}")
        self.watch_alone(session)

    def get(self, session_id: str) -> LiveSession:
        session = self.live.get(session_id)
        if session is None:
            raise NotFound(session_id)
        return session

    async def send(
        self,
        session_id: str,
        prompt: str,
        *,
        images: Sequence[str | os.PathLike[str]] = (),
        output_schema: Mapping[str, Any] | None = None,
    ) -> int:
        """A follow-up turn; returns the event id its events follow. A session whose handle cannot take
        it (not loaded, stopped for good, failed) is resumed with its stored spec (module docstring)."""
        if self.draining:
            raise UsageError("the daemon is shutting down")
        session = self.live.get(session_id)
        if session is not None and (session.state == "running" or session.continuable):
            return await self._next_turn(session, prompt, images, output_schema)
        row = self.store.session(session_id)
        if row is None:
            raise NotFound(session_id)
        stored = {k: v for k, v in row["spec"].items() if k not in ("images", "output_schema")}
        spec = spec_from_json({**stored, "prompt": prompt})
        spec = dataclasses.replace(spec, images=tuple(map(str, images)), output_schema=output_schema)
        _, cursor = await self.create(spec, row["provider"], resume=session_id)
        return cursor

    async def _next_turn(
        self,
        session: LiveSession,
        prompt: str,
        images: Sequence[str | os.PathLike[str]],
        output_schema: Mapping[str, Any] | None,
    ) -> int:
        if session.state == "running":
            raise UsageError("the session's turn is still running; wait for it or stop it first")
        await session.handle.send(prompt, images=self.check_images(images), output_schema=output_schema)
        # Earlier turns are in the store (flushed at their terminal event): memory holds one turn.
        self.store.flush()
        session.base, session.records = session.last_seq, []
        session.state, session.interrupted = "running", False
        session.turns += 1
        self.store.update(session.id, state="running", turns=session.turns, ended=None)
        self.store.add_turn(session.id, session.turns, self._redactor.text(prompt), session.base)
        self._start_pump(session)
        self.on_change(session.id)
        return session.base

    async def stop(self, session_id: str) -> None:
        """Stop the running turn and keep the session (see the module docstring); nothing to do for a
        session whose turn is not running."""
        session = self.live.get(session_id)
        if session is None:
            if self.store.session(session_id) is None:
                raise NotFound(session_id)
            return
        if session.state != "running":
            return
        try:
            await session.handle.interrupt()
            session.interrupted = True
        except Unsupported:  # the provider can only end the whole session: resumed on the next turn
            # Kept: the turn's stream ends before stop() has let go of the thread, and a resume must
            # wait for that (see _release).
            session.stopping = asyncio.ensure_future(session.handle.stop())
            await asyncio.shield(session.stopping)

    async def inject(self, session_id: str, text: str) -> None:
        session = self.live.get(session_id)
        if session is None or session.state != "running":
            if session is None and self.store.session(session_id) is None:
                raise NotFound(session_id)
            raise UsageError("inject(): no turn is running")
        await session.handle.inject(text)

    # -- records -----------------------------------------------------------------------------------

    def _append(self, session: LiveSession, event: Event) -> None:
        session.buffer.add(event)
        if is_terminal(event):
            self._publish(session)  # at once: the turn's state follows it
        elif session.publishing is None:
            session.publishing = asyncio.get_running_loop().call_soon(self._publish, session)

    def _publish(self, session: LiveSession) -> None:
        """The buffered events as records (see the module docstring), then wake the readers."""
        if session.publishing is not None:
            session.publishing.cancel()
            session.publishing = None
        terminal = shown = False
        records, sid, encode, append = session.records, session.id, self._records.encode, self.store.append
        for event, at, deltas in session.buffer.take():
            record = encode(sid, event, at, deltas=deltas)
            kind = type(event)
            if kind is TextDelta:  # the hot path: nothing else to note
                records.append((record, False))
                append(sid, session.base + len(records), record)
                continue
            ends = kind is Result or kind is Error
            terminal = terminal or ends
            records.append((record, ends))
            append(sid, session.base + len(records), record)
            if isinstance(event, ToolUse):
                shown = shown or session.step != event.name
                session.step = event.name
            elif isinstance(event, TokenUsage):
                session.usage = dataclasses.asdict(event)
                shown = True
            elif isinstance(event, Result):
                if event.usage is not None:
                    session.usage = dataclasses.asdict(event.usage)
                if event.cost_usd is not None:  # the provider's own figure (Claude's), per turn
                    row = self.store.session(sid)
                    spent = (row or {}).get("cost_usd") or 0.0
                    self.store.update(sid, cost_usd=spent + event.cost_usd)
            elif isinstance(event, System) and event.subtype == "session":
                model, served_by = event.data.get("model"), event.data.get("model_provider")
                self.store.update(
                    sid,
                    model=model if isinstance(model, str) else None,
                    model_provider=served_by if isinstance(served_by, str) else None,
                )
                shown = True
        if shown:
            self.on_change(sid)
        if terminal:
            self.store.flush()
        elif self._flush_handle is None:
            self._flush_handle = asyncio.get_running_loop().call_later(_FLUSH_EVERY, self._flush)
        session.changed.set()
        session.changed = asyncio.Event()

    def _flush(self) -> None:
        self._flush_handle = None
        self.store.flush()

    async def _pump(self, session: LiveSession) -> None:
        terminal: Event | None = None
        try:
            async for event in session.handle.events():
                self._append(session, event)
                if is_terminal(event):
                    terminal = event
        except Exception as exc:  # the provider broke its contract: record it, never lose the session
            logger.warning("session %s: event stream failed: %s", session.id, type(exc).__name__)
        if terminal is None:
            terminal = Error(code="protocol_error", message="the event stream ended without a terminal event")
            self._append(session, terminal)
        match terminal:
            case Result():
                session.state = "idle"
            case Error(code="cancelled"):
                session.state = "stopped"
                session.continuable = session.interrupted
            case _:
                session.state = "failed"
                session.continuable = False  # e.g. its app-server crashed: resumed on the next turn
        session.step = ""
        if session.alone is not None:
            session.alone.cancel()
            session.alone = None
        with self.store.transaction():
            ended = time.time()
            self.store.update(session.id, state=session.state, usage=session.usage, step="", ended=ended)
            self._end_turn(session, terminal)
        session.ended = time.monotonic()
        session.changed.set()
        session.changed = asyncio.Event()
        self.on_change(session.id)
        self._evict()

    def _end_turn(self, session: LiveSession, terminal: Event) -> None:
        text: str | None = None
        error: dict[str, Any] | None = None
        if isinstance(terminal, Result):
            status, text = "completed", self._redactor.text(terminal.text or "")
        else:
            assert isinstance(terminal, Error)
            status = "cancelled" if terminal.code == "cancelled" else "failed"
            error = {"code": terminal.code, "message": self._redactor.text(terminal.message)}
        usage = (
            dataclasses.asdict(terminal.usage) if isinstance(terminal, Result) and terminal.usage else None
        )
        self.store.end_turn(session.id, session.turns, status=status, text=text, error=error, usage=usage)

    # -- letting go ----------------------------------------------------------------------------------

    def _evict(self) -> None:
        """Unload the least recently finished sessions beyond ``max_live`` (see the module docstring)."""
        finished = [s for s in self.live.values() if s.state != "running"]
        extra = len(finished) - self.max_live
        if extra <= 0 or self.draining:
            return
        for session in sorted(finished, key=lambda s: s.ended)[:extra]:
            self._let_go(session, archive=True)

    def _let_go(self, session: LiveSession, *, archive: bool = False) -> None:
        """Unload ``session``: its handle stopped (and its thread archived) in the background."""
        del self.live[session.id]
        session.changed.set()  # a reader still on it reads the store from now on
        self.on_change(session.id)
        release = asyncio.create_task(self._release(session, archive), name=f"release:{session.id}")
        self._releasing[session.id] = release

    async def _release(self, session: LiveSession, archive: bool) -> None:
        # No turn runs: stop() only makes the provider forget the thread (a resume reopens it).
        try:
            if session.stopping is not None:
                await session.stopping
            await session.handle.stop()
            if archive:
                provider = self._providers.get(session.provider)
                if provider is not None:
                    await provider.archive_session(session.id)
                    self.store.update(session.id, archived=1)
        except Unsupported:
            pass
        except Exception as exc:
            logger.warning("session %s: release failed: %s", session.id, type(exc).__name__)
        finally:
            self._releasing.pop(session.id, None)

    # -- clients -------------------------------------------------------------------------------------

    def watch_alone(self, session: LiveSession) -> None:
        """(Re)start the orphan timer of a running session that has no reader (its readers changed)."""
        self.on_change(session.id)
        if session.alone is not None:
            session.alone.cancel()
            session.alone = None
        if self.orphan_timeout is None or session.readers or session.state != "running":
            return
        session.alone = asyncio.get_running_loop().call_later(
            self.orphan_timeout, lambda: asyncio.ensure_future(self._orphaned(session))
        )

    async def _orphaned(self, session: LiveSession) -> None:
        session.alone = None
        if session.readers or session.state != "running" or self.live.get(session.id) is not session:
            return
        logger.warning("session %s: no client for %ss; stopping its turn", session.id, self.orphan_timeout)
        try:
            await self.stop(session.id)
        except Exception as exc:
            logger.warning("session %s: stop failed: %s", session.id, type(exc).__name__)

    # -- reading -------------------------------------------------------------------------------------

    def stream(
        self, session_id: str, after: int, *, follow: bool, watch: bool = False
    ) -> AsyncIterator[Batch]:
        """Batches of ``(seq, JSON)`` after ``after`` (each batch what was there when it was read), until
        a terminal record (or for ever with ``follow``); see ``_stream``. ``NotFound`` at once. A
        ``watch``-er is not the session's client (module docstring)."""
        if session_id not in self.live and self.store.session(session_id) is None:
            raise NotFound(session_id)
        return read_stream(self, session_id, after, follow=follow, client=not watch)

    # -- lifecycle ---------------------------------------------------------------------------------

    async def drain(self) -> None:
        """Refuse new work, stop running turns, wait for their records, shut the providers down."""
        self.draining = True
        running = [s for s in self.live.values() if s.state == "running"]
        for session in running:
            try:
                await session.handle.stop()
            except Exception as exc:  # a dying provider: its pump still records a terminal event
                logger.warning("session %s: stop failed: %s", session.id, type(exc).__name__)
        pumps = [s.pump for s in self.live.values() if s.pump is not None]
        if pumps:
            await asyncio.wait(pumps, timeout=10)
        if self._releasing:
            await asyncio.wait(list(self._releasing.values()), timeout=10)
        if self._flush_handle is not None:
            self._flush_handle.cancel()
            self._flush_handle = None
        for session in self.live.values():
            if session.buffer.items:
                self._publish(session)
            if session.alone is not None:
                session.alone.cancel()
        self.store.flush()
        for session in self.live.values():  # wake readers so they end
            session.changed.set()
        for provider in self._providers.values():
            try:
                await provider.shutdown()
            except Exception as exc:
                logger.warning("provider shutdown failed: %s", type(exc).__name__)
        self._providers.clear()
