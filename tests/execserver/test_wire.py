"""Pure wire helpers: URIs, decoding, error typing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_fleet.errors import RemoteProtocolError, RPCError, UsageError
from agent_fleet.execserver import (
    ExecServerError,
    InternalServerError,
    InvalidParamsError,
    InvalidRequestError,
    MethodNotFoundError,
    NotFoundError,
)
from agent_fleet.execserver._wire import decode_read, from_uri, to_uri
from agent_fleet.execserver.errors import translate_rpc_error


def test_paths_travel_as_file_uris() -> None:
    assert to_uri("/tmp/a b/c%d") == "file:///tmp/a%20b/c%25d"
    assert to_uri(Path("/x/y")) == "file:///x/y"
    assert to_uri("file:///already") == "file:///already"
    assert from_uri(to_uri("/tmp/ünï cödé")) == "/tmp/ünï cödé"
    with pytest.raises(UsageError):
        to_uri("relative/path")
    with pytest.raises(RemoteProtocolError):
        from_uri("http://example.com/x")


def test_decode_read() -> None:
    snap = decode_read(
        {
            "chunks": [{"seq": 1, "stream": "stdout", "chunk": "aGkK"}],
            "nextSeq": 4,
            "exited": True,
            "exitCode": 3,
            "closed": True,
            "failure": None,
            "sandboxDenied": False,
        }
    )
    assert snap.chunks[0].data == b"hi\n" and snap.next_seq == 4 and snap.sandbox_denied is False
    legacy = decode_read({"chunks": [], "nextSeq": 1, "exited": False, "exitCode": None, "closed": False})
    assert legacy.sandbox_denied is None
    bad_results: list[object] = [
        {"chunks": [{"seq": 1, "stream": "stdout", "chunk": "!!"}], "nextSeq": 2},
        {"chunks": [{"seq": 1, "stream": "tty", "chunk": ""}], "nextSeq": 2},
        {"chunks": [], "nextSeq": "2"},
        [],
    ]
    for bad in bad_results:
        with pytest.raises(RemoteProtocolError):
            decode_read(bad)


@pytest.mark.parametrize(
    ("code", "cls"),
    [
        (-32600, InvalidRequestError),
        (-32601, MethodNotFoundError),
        (-32602, InvalidParamsError),
        (-32603, InternalServerError),
        (-32004, NotFoundError),
        (-32010, ExecServerError),
    ],
)
def test_rpc_errors_are_typed_by_code(code: int, cls: type[ExecServerError]) -> None:
    typed = translate_rpc_error(RPCError(code, "msg", {"k": 1}, method="fs/readFile"))
    assert type(typed) is cls and isinstance(typed, RPCError)
    assert (typed.code, typed.message, typed.data, typed.method) == (code, "msg", {"k": 1}, "fs/readFile")
