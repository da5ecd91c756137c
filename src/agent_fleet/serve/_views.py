"""What the daemon shows of its sessions: ``describe`` (``GET /v1/sessions/{id}``), a page of rows
(``GET /v1/sessions`` and the dashboard) filtered and counted, and what batches say of a session (the
task and batch it runs for, a runner's notes). Mixed into ``Sessions``, whose state it reads.

A row carries what tells sessions apart (see ``docs/api.md``): the stored fields, the live ones of a
loaded session (state, turns, usage, step, clients and, running with no client, when the orphan timer
stops it), and what is derived for people: the prompt and cwd of its spec, the model it runs (named
``scripted (as <model>)`` when ``agent_fleet.testing``'s scripted model serves it), its duration,
tokens, and a cost (the provider's figure, else from the price table).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from agent_fleet._event_json import permission_to_json
from agent_fleet.errors import UsageError
from agent_fleet.runner import Redactor
from agent_fleet.runner._pricing import PriceTable
from agent_fleet.serve._floor import Floor
from agent_fleet.serve._store import MAX_PAGE, Store

if TYPE_CHECKING:
    from agent_fleet.serve._sessions import LiveSession

logger = logging.getLogger(__name__)

STATES: Final = ("running", "idle", "stopped", "failed", "interrupted")
#: The model provider name ``agent_fleet.testing`` serves its scripted model under: not a real model.
SCRIPTED_PROVIDER: Final = "scripted"


class NotFound(LookupError):
    """No session (or approval, batch) with that id."""


class SessionViews:
    """(See the module docstring.)"""

    store: Store
    live: dict[str, LiveSession]
    prices: PriceTable | None
    floor: Floor
    _redactor: Redactor
    on_change: Callable[[str], None]
    on_note: Callable[[str, dict[str, Any]], None]

    def describe(self, session_id: str) -> dict[str, Any]:
        row = self.row(session_id)
        if row is None:
            raise NotFound(session_id)
        live = self.live.get(session_id)
        row["last_event_id"] = live.last_seq if live is not None else self.store.last_seq(session_id)
        row["history"] = self.store.turns(session_id)
        row["notes"] = self.store.notes(session_id)
        # The client's spec and the daemon's floor are kept apart: the session runs with both.
        floor = self.floor.permission
        row["floor"] = self._redactor.value(permission_to_json(floor)) if floor is not None else None
        return row

    def _live_row(self, row: dict[str, Any], live: LiveSession) -> None:
        row.update(state=live.state, turns=live.turns, usage=live.usage, step=live.step)
        row["clients"] = live.readers
        if live.alone is not None:  # no client: when its turn is stopped unless one comes back
            loop = asyncio.get_running_loop()
            row["orphan_deadline"] = time.time() + max(0.0, live.alone.when() - loop.time())

    def _shown(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` with what the dashboard shows beside the stored fields (see the module docstring)."""
        live = self.live.get(row["session_id"])
        row.setdefault("clients", 0)
        row["orphan_deadline"] = None
        if live is not None:
            self._live_row(row, live)
        spec = row["spec"] if isinstance(row["spec"], dict) else {}
        row["prompt"] = spec.get("prompt")
        row["cwd"] = spec.get("cwd")
        row["model"] = row.get("model") or spec.get("model")
        row["scripted"] = scripted = row.get("model_provider") == SCRIPTED_PROVIDER
        # As the batch summary names it (issue 33): a scripted run never reads as the real model's.
        row["model_label"] = (
            (f"scripted (as {row['model']})" if row["model"] else "scripted") if scripted else row["model"]
        )
        row["loaded"] = live is not None
        end = None if row["state"] == "running" else (row.get("ended") or row["updated"])
        row["duration"] = round((end if end is not None else time.time()) - row["created"], 3)
        usage = row.get("usage") or {}
        row["tokens"] = usage.get("total_tokens") if usage else None
        cost = row.pop("cost_usd", None)
        if cost is None and self.prices is not None and usage:
            tokens = {
                "input": usage.get("input_tokens", 0),
                "cached_input": usage.get("cached_input_tokens", 0),
                "output": usage.get("output_tokens", 0),
            }
            cost = self.prices.cost(row["model"], tokens)
            row["currency"] = self.prices.currency
        elif cost is not None:
            row["currency"] = "USD"
        row["cost"] = cost
        return row

    def row(self, session_id: str) -> dict[str, Any] | None:
        """One session as ``rows`` lists it (None: no such session)."""
        row = self.store.session(session_id)
        return self._shown(row) if row is not None else None

    def rows(
        self,
        *,
        limit: int = 100,
        before: str | None = None,
        states: tuple[str, ...] = (),
        batch: str | None = None,
        provider: str | None = None,
        text: str | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """A page of sessions, newest first, and the cursor of the next page (None: the last page);
        filtered by state, batch, provider and a text (``Store.count``)."""
        if not 1 <= limit <= MAX_PAGE:
            raise UsageError(f"limit must be 1..{MAX_PAGE}, not {limit}")
        if unknown := set(states) - set(STATES):
            raise UsageError(f"state must be among {', '.join(STATES)}, not {', '.join(sorted(unknown))}")
        if before is not None and self.store.session(before) is None:
            raise NotFound(f"{before} (before: the cursor is the session id a page ends with)")
        rows = self.store.sessions(
            limit=limit + 1, before=before, states=states, batch=batch, provider=provider, text=text
        )
        more = len(rows) > limit
        rows = [self._shown(row) for row in rows[:limit]]
        return rows, rows[-1]["session_id"] if more else None

    def count(
        self,
        states: tuple[str, ...] = (),
        *,
        batch: str | None = None,
        provider: str | None = None,
        text: str | None = None,
    ) -> int:
        return self.store.count(states, batch=batch, provider=provider, text=text)

    def newer(
        self,
        before: str,
        states: tuple[str, ...] = (),
        *,
        batch: str | None = None,
        provider: str | None = None,
        text: str | None = None,
    ) -> int:
        """How many sessions (so filtered) come before the page that starts after ``before``."""
        return self.store.count(states, batch=batch, provider=provider, text=text, upto=before)

    async def tell(self, session_id: str, text: str) -> bool:
        """Steer the session's running turn with ``text`` (``Handle.inject``); False when no turn runs or
        the provider cannot (a best effort: nothing is raised)."""
        session = self.live.get(session_id)
        if session is None or session.state != "running":
            return False
        try:
            await session.handle.inject(text)
        except Exception as exc:
            logger.info("session %s: could not tell the turn (%s)", session_id, type(exc).__name__)
            return False
        return True

    def label(self, session_id: str, *, task_id: str, batch_id: str) -> bool:
        """Say which task of which batch ``session_id`` runs (False: no such session)."""
        if self.store.session(session_id) is None:
            return False
        self.store.update(session_id, task_id=task_id, batch_id=batch_id)
        self.on_change(session_id)
        return True

    def leave_note(self, session_id: str, record: dict[str, Any]) -> bool:
        """Leave a (redacted) note on the session, after its latest event (False: no such session)."""
        live = self.live.get(session_id)
        if live is None and self.store.session(session_id) is None:
            return False
        after = live.last_seq if live is not None else self.store.last_seq(session_id)
        record = self._redactor.value(record)
        at = self.store.add_note(session_id, after, record)
        self.on_note(session_id, {"after": after, "at": at, **record})
        return True
