"""The protocol coverage table: true to the mapping code, listed in the docs, complete for the binary."""

from __future__ import annotations

import re
from typing import Any

import pytest

from agent_fleet.codex import _approvals
from agent_fleet.codex._coverage import (
    DOC,
    DROPPED,
    ITEM_TYPES,
    NOTICE,
    NOTIFICATIONS,
    OPTED_OUT,
    SERVER_REQUESTS,
    UNKNOWN,
    main,
)
from agent_fleet.codex.mapping import OPT_OUT_NOTIFICATIONS, TurnMapper
from agent_fleet.events import System, UnknownEvent

_ITEM = {
    "id": "x",
    "command": "ls",
    "tool": "t",
    "server": "s",
    "query": "q",
    "path": "/p",
    "review": "r",
    "kind": "k",
    "agentThreadId": "a",
    "changes": [],
    "summary": ["s"],
    "content": [],
    "text": "t",
}


@pytest.mark.parametrize("method", sorted(NOTIFICATIONS))
def test_notification_table_says_what_the_mapper_does(method: str) -> None:
    kind, _ = NOTIFICATIONS[method]
    assert (kind == OPTED_OUT) == (method in OPT_OUT_NOTIFICATIONS)
    params: dict[str, Any] = {"threadId": "s", "turnId": "t"}
    events = TurnMapper("s").feed(method, params)
    match kind:
        case "dropped" | "opted out":
            assert events == []
        case "notice":
            assert [type(e) for e in events] == [System]
        case "UnknownEvent":
            assert events == [UnknownEvent(raw={"method": method, "params": params})]
        case _:
            assert kind == "typed"


@pytest.mark.parametrize("item_type", sorted(ITEM_TYPES))
def test_item_table_says_what_the_mapper_does(item_type: str) -> None:
    kind, _ = ITEM_TYPES[item_type]
    events = TurnMapper("s").feed("item/completed", {"item": {**_ITEM, "type": item_type}})
    if kind == DROPPED:
        assert events == []
    elif kind == UNKNOWN:
        assert [type(e) for e in events] == [UnknownEvent]
    else:
        assert events and not any(isinstance(e, UnknownEvent) for e in events), events


def test_server_request_table_matches_the_approval_bridge() -> None:
    for method, (kind, _) in SERVER_REQUESTS.items():
        assert (kind == "approval") == (method in _approvals.APPROVAL_METHODS), method


def test_the_docs_list_exactly_the_table() -> None:
    section = (
        DOC.read_text(encoding="utf-8").split("<!-- coverage:begin", 1)[1].split("<!-- coverage:end", 1)[0]
    )
    listed = re.findall(r"^\| `([^`]+)` \| ([^|]+) \|", section, flags=re.M)
    expected = [
        (name, kind)
        for table in (NOTIFICATIONS, SERVER_REQUESTS, ITEM_TYPES)
        for name, (kind, _) in sorted(table.items())
    ]
    assert [(n, k.strip()) for n, k in listed] == expected
    assert NOTICE in {k for k, _ in NOTIFICATIONS.values()}


@pytest.mark.e2e  # runs the pinned codex binary's schema generator
def test_the_pinned_binary_has_nothing_unclassified_and_the_docs_are_current() -> None:
    assert main(["--check"]) == 0


def test_every_notice_the_table_names_is_one_the_mapper_emits() -> None:
    """The table once said System(stream_error) for a retried stream, which the mapper calls
    stream_retry (issue 16): what the table promises is what a consumer must match on."""
    retried = TurnMapper("s").feed("error", {"error": {"message": "m"}, "willRetry": True})
    assert [e.subtype for e in retried if isinstance(e, System)] == ["stream_retry"]
    named = {
        name
        for table in (NOTIFICATIONS, SERVER_REQUESTS, ITEM_TYPES)
        for _, what in table.values()
        for name in re.findall(r"System\(([a-z_.]+)\)", what)
    }
    assert "stream_retry" in named and "stream_error" not in named
