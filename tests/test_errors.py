"""Every error carries what a caller decides on: ``code`` and ``retryable`` (never the message text)."""

from __future__ import annotations

import pytest

from agent_fleet import errors
from agent_fleet.errors import (
    AgentFleetError,
    AuthenticationError,
    ConnectionClosed,
    ProviderUnavailable,
    RequestTimeout,
    RPCError,
    TransportError,
    TurnFailed,
    UsageError,
)
from agent_fleet.events import Error

PUBLIC = [getattr(errors, name) for name in errors.__all__]


@pytest.mark.parametrize("cls", PUBLIC, ids=lambda c: c.__name__)
def test_every_public_error_names_its_kind(cls: type[AgentFleetError]) -> None:
    assert issubclass(cls, AgentFleetError)
    assert isinstance(cls.retryable, bool)
    if cls is not RPCError:
        assert isinstance(cls.code, str) and cls.code


def test_the_kinds_are_distinct() -> None:
    codes = [cls.code for cls in PUBLIC if cls not in (RPCError, TurnFailed, AgentFleetError)]
    assert len(codes) == len(set(codes))


def test_what_may_pass_is_retryable_and_what_will_not_is_not() -> None:
    assert TransportError("pipe broke").retryable and ConnectionClosed().retryable
    assert RequestTimeout("thread/start", 30).retryable
    assert not UsageError("bad argument").retryable
    assert not AuthenticationError("no credential").retryable
    assert not ProviderUnavailable("codex not found").retryable
    assert ProviderUnavailable("handshake timed out", retryable=True).retryable
    assert not ProviderUnavailable("x").retryable  # an instance's choice does not leak into the class


def test_a_failed_turn_is_its_error_event() -> None:
    limited = TurnFailed(Error(code="rate_limited", message="slow down", retryable=True))
    assert (limited.code, limited.retryable) == ("rate_limited", True)
    bad = TurnFailed(Error(code="bad_request", message="no"))
    assert (bad.code, bad.retryable) == ("bad_request", False)


def test_an_rpc_error_keeps_the_json_rpc_code() -> None:
    error = RPCError(-32601, "method not found", method="x/y")
    assert error.code == -32601 and not error.retryable
