"""The pure JSON-RPC core: bytes in, typed messages out (no event loop)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.depth import examples

from agent_fleet.jsonrpc import (
    ErrorResponse,
    JsonRpcCore,
    Message,
    Notification,
    ProtocolError,
    Request,
    Response,
)
from agent_fleet.jsonrpc.core import LATE_LIMIT


def decode_all(core: JsonRpcCore, data: bytes) -> list[Message]:
    return [*core.feed(data), *core.feed_eof()]


def core_with_pending(*methods: str) -> JsonRpcCore:
    core = JsonRpcCore()
    for method in methods:
        core.encode_request(method)
    return core


# -- decoding, one table row per message kind ---------------------------------------------------------

DECODE_CASES: list[tuple[str, bytes, Message]] = [
    (
        "request int id",
        b'{"jsonrpc":"2.0","id":7,"method":"approve","params":{"a":1}}\n',
        Request(7, "approve", {"a": 1}),
    ),
    (
        "request string id kept as string",
        b'{"jsonrpc":"2.0","id":"7","method":"approve"}\n',
        Request("7", "approve", None),
    ),
    ("request id zero", b'{"id":0,"method":"m"}\n', Request(0, "m", None)),
    (
        "notification without jsonrpc member",
        b'{"method":"turn/started","params":{"threadId":"t"}}\n',
        Notification("turn/started", {"threadId": "t"}),
    ),
    ("response", b'{"jsonrpc":"2.0","id":1,"result":{"ok":true}}\n', Response(1, {"ok": True}, "first")),
    ("response null result", b'{"id":2,"result":null}\n', Response(2, None, "second")),
    (
        "error response with data",
        b'{"id":1,"error":{"code":-32602,"message":"bad","data":{"field":"x"}}}\n',
        ErrorResponse(1, -32602, "bad", {"field": "x"}, "first"),
    ),
    (
        "error response without data",
        b'{"id":2,"error":{"code":-32000,"message":"busy"}}\n',
        ErrorResponse(2, -32000, "busy", None, "second"),
    ),
    (
        "error response missing fields",
        b'{"id":1,"error":{}}\n',
        ErrorResponse(1, -32603, "", None, "first"),
    ),
    (
        "error with null id",
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}\n',
        ErrorResponse(None, -32700, "Parse error", None, None),
    ),
    ("CRLF line ending", b'{"method":"n"}\r\n', Notification("n", None)),
    ("surrounding whitespace", b'  {"method":"n"}  \n', Notification("n", None)),
    ("unterminated last line", b'{"method":"n"}', Notification("n", None)),
    ("non-ascii", '{"method":"n","params":"héllo ✓ 🎉"}\n'.encode(), Notification("n", "héllo ✓ 🎉")),
]


@pytest.mark.parametrize(
    ("data", "expected"), [c[1:] for c in DECODE_CASES], ids=[c[0] for c in DECODE_CASES]
)
def test_decode(data: bytes, expected: Message) -> None:
    core = core_with_pending("first", "second")
    assert decode_all(core, data) == [expected]


BAD_CASES: list[tuple[str, bytes, str]] = [
    ("non-JSON", b"hello world\n", "invalid_json"),
    ("truncated JSON", b'{"method":\n', "invalid_json"),
    ("trailing garbage", b'{"method":"n"} x\n', "invalid_json"),
    ("invalid UTF-8", b'{"method":"\xff"}\n', "invalid_json"),
    ("array", b"[1,2]\n", "not_object"),
    ("string", b'"str"\n', "not_object"),
    ("number", b"42\n", "not_object"),
    ("unknown response id", b'{"id":99,"result":1}\n', "unknown_response_id"),
    ("unknown error id", b'{"id":99,"error":{"code":1,"message":"m"}}\n', "unknown_response_id"),
    ("string id never pending", b'{"id":"1","result":1}\n', "unknown_response_id"),
    ("empty object", b"{}\n", "invalid_message"),
    ("method not a string", b'{"method":5}\n', "invalid_message"),
    ("request id bool", b'{"id":true,"method":"m"}\n', "invalid_message"),
    ("request id float", b'{"id":1.5,"method":"m"}\n', "invalid_message"),
    ("response id null with result", b'{"id":null,"result":1}\n', "invalid_message"),
    ("deep nesting", b"[" * 100_000 + b"\n", "invalid_json"),
]


@pytest.mark.parametrize(("data", "kind"), [c[1:] for c in BAD_CASES], ids=[c[0] for c in BAD_CASES])
def test_malformed_input_is_a_value(data: bytes, kind: str) -> None:
    core = core_with_pending("first")
    (msg,) = decode_all(core, data)
    assert isinstance(msg, ProtocolError)
    assert msg.kind == kind
    assert msg.line_preview == data.rstrip(b"\r\n")[:256]


def test_blank_lines_ignored() -> None:
    assert decode_all(JsonRpcCore(), b'\n\r\n  \n{"method":"a"}\n\n') == [Notification("a")]


def test_malformed_response_to_pending_id_releases_it() -> None:
    core = core_with_pending("first")
    (msg,) = core.feed(b'{"id":1}\n')
    assert msg == ProtocolError("invalid_message", msg.detail, b'{"id":1}', 1)  # type: ignore[union-attr]
    assert dict(core.pending) == {}


def test_response_pops_pending_and_second_is_unknown() -> None:
    core = core_with_pending("first")
    assert core.feed(b'{"id":1,"result":1}\n') == [Response(1, 1, "first")]
    (msg,) = core.feed(b'{"id":1,"result":1}\n')
    assert isinstance(msg, ProtocolError) and msg.kind == "unknown_response_id"


def test_expire_keeps_a_late_response_recognisable_and_bounded() -> None:
    core = JsonRpcCore()
    rid, _ = core.encode_request("turn/start")
    core.expire(rid)
    assert dict(core.pending) == {} and core.is_late(rid)
    (msg,) = core.feed(f'{{"id":{rid},"result":{{"turn":{{}}}}}}\n'.encode())
    assert msg == Response(rid, {"turn": {}}, "turn/start") and not core.is_late(rid)
    (again,) = core.feed(f'{{"id":{rid},"result":1}}\n'.encode())  # a second answer: unknown
    assert isinstance(again, ProtocolError) and again.kind == "unknown_response_id"
    ids = [core.encode_request("x")[0] for _ in range(LATE_LIMIT + 1)]
    for i in ids:
        core.expire(i)
    assert not core.is_late(ids[0]) and core.is_late(ids[-1])


def test_forget_makes_late_response_unknown() -> None:
    core = JsonRpcCore()
    rid, _ = core.encode_request("slow")
    core.forget(rid)
    core.forget(12345)  # unknown ids are fine
    (msg,) = core.feed(b'{"id":1,"result":1}\n')
    assert isinstance(msg, ProtocolError) and msg.kind == "unknown_response_id"


def test_fail_all_clears_pending() -> None:
    core = core_with_pending("a", "b")
    assert dict(core.pending) == {1: "a", 2: "b"}
    assert core.fail_all() == [1, 2]
    assert dict(core.pending) == {}


def test_pending_is_read_only() -> None:
    core = core_with_pending("a")
    with pytest.raises(TypeError):
        core.pending[5] = "x"  # type: ignore[index]


# -- framing ------------------------------------------------------------------------------------------


def test_split_inside_utf8_character() -> None:
    data = '{"method":"n","params":"€"}\n'.encode()
    cut = data.index("€".encode()) + 1
    core = JsonRpcCore()
    assert core.feed(data[:cut]) == []
    assert core.feed(data[cut:]) == [Notification("n", "€")]


def test_byte_by_byte_with_crlf() -> None:
    core = JsonRpcCore()
    out: list[Message] = []
    for b in b'{"method":"a"}\r\n{"method":"b"}\r\n':
        out += core.feed(bytes([b]))
    assert out == [Notification("a"), Notification("b")]


def test_feed_eof_flushes_trailing_line_once() -> None:
    core = JsonRpcCore()
    assert core.feed(b'{"method":"a"}\n{"method":"b"}') == [Notification("a")]
    assert core.feed_eof() == [Notification("b")]
    assert core.feed_eof() == []


def test_feed_eof_reports_truncated_json() -> None:
    core = JsonRpcCore()
    core.feed(b'{"method":"a"')
    (msg,) = core.feed_eof()
    assert isinstance(msg, ProtocolError) and msg.kind == "invalid_json"


def test_oversize_line_in_one_chunk_skipped_next_decoded() -> None:
    core = JsonRpcCore(max_line_bytes=32)
    big = b'{"method":"x","params":"' + b"a" * 100 + b'"}'
    out = core.feed(big + b'\n{"method":"next"}\n')
    assert [type(m) for m in out] == [ProtocolError, Notification]
    assert isinstance(out[0], ProtocolError) and out[0].kind == "line_too_long"
    assert out[1] == Notification("next")


def test_oversize_line_is_never_buffered_whole() -> None:
    limit = 1024
    core = JsonRpcCore(max_line_bytes=limit)
    errors: list[Message] = core.feed(b'{"method":"huge","params":"')
    for _ in range(1000):  # ~4 MB without a newline
        errors += core.feed(b"x" * 4096)
        assert core.buffered_bytes <= limit
    assert len(errors) == 1
    assert isinstance(errors[0], ProtocolError) and errors[0].kind == "line_too_long"
    assert errors[0].line_preview.startswith(b'{"method":"huge"') and len(errors[0].line_preview) <= 256
    assert core.feed(b'xx"}\n{"method":"after"}\n') == [Notification("after")]
    assert core.feed_eof() == []


def test_line_at_exact_limit_is_accepted() -> None:
    line = b'{"method":"n"}'
    core = JsonRpcCore(max_line_bytes=len(line))
    assert core.feed(line[:5]) == []
    assert core.feed(line[5:] + b"\n") == [Notification("n")]
    core2 = JsonRpcCore(max_line_bytes=len(line) - 1)
    (msg,) = core2.feed(line + b"\n")
    assert isinstance(msg, ProtocolError) and msg.kind == "line_too_long"


def test_oversize_trailing_line_at_eof_reported_once() -> None:
    core = JsonRpcCore(max_line_bytes=8)
    (msg,) = core.feed(b"0123456789")
    assert isinstance(msg, ProtocolError) and msg.kind == "line_too_long"
    assert core.feed_eof() == []


# -- encoding -----------------------------------------------------------------------------------------


def test_encode_request_ids_increase_and_register() -> None:
    core = JsonRpcCore()
    id1, data1 = core.encode_request("initialize", {"clientInfo": {"name": "x"}})
    id2, data2 = core.encode_request("thread/start")
    assert (id1, id2) == (1, 2)
    assert data1 == b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"clientInfo":{"name":"x"}}}\n'
    assert data2 == b'{"jsonrpc":"2.0","id":2,"method":"thread/start"}\n'
    assert dict(core.pending) == {1: "initialize", 2: "thread/start"}


def test_encode_without_version() -> None:
    core = JsonRpcCore(emit_version=False)
    assert core.encode_request("m", [])[1] == b'{"id":1,"method":"m","params":[]}\n'
    assert core.encode_notification("n") == b'{"method":"n"}\n'
    assert core.encode_response("abc", None) == b'{"id":"abc","result":null}\n'
    assert core.encode_error(3, -32601, "Method not found") == (
        b'{"id":3,"error":{"code":-32601,"message":"Method not found"}}\n'
    )


def test_encode_with_version() -> None:
    core = JsonRpcCore()
    assert core.encode_notification("n", {"a": 1}) == b'{"jsonrpc":"2.0","method":"n","params":{"a":1}}\n'
    assert core.encode_response(5, {"ok": True}) == b'{"jsonrpc":"2.0","id":5,"result":{"ok":true}}\n'
    assert core.encode_error(None, -32700, "Parse error", {"x": 1}) == (
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error","data":{"x":1}}}\n'
    )


def test_encode_is_compact_utf8_and_survives_lone_surrogates() -> None:
    core = JsonRpcCore(emit_version=False)
    assert core.encode_notification("n", "é") == '{"method":"n","params":"é"}\n'.encode()
    data = core.encode_notification("n", "\ud800")
    assert data == b'{"method":"n","params":"\\ud800"}\n'
    assert core.feed(data) == [Notification("n", "\ud800")]


def test_unserialisable_params_register_nothing() -> None:
    core = JsonRpcCore()
    with pytest.raises(TypeError):
        core.encode_request("m", {"x": object()})
    with pytest.raises(ValueError):
        core.encode_request("m", float("nan"))
    assert dict(core.pending) == {}
    assert core.encode_request("m")[0] == 1


# -- properties ---------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
ids = st.integers(min_value=-(2**31), max_value=2**31) | st.text(max_size=10)
methods = st.text(min_size=1, max_size=20)

message_specs = st.one_of(
    st.tuples(st.just("request"), ids, methods, json_values, st.booleans()),
    st.tuples(st.just("notification"), methods, json_values, st.booleans()),
    st.tuples(st.just("response"), methods, json_values),
    st.tuples(st.just("error"), methods, st.integers(-33000, 33000), st.text(max_size=20), json_values),
)


def build_wire(specs: list[tuple[Any, ...]]) -> tuple[JsonRpcCore, bytes, list[Message]]:
    """Encode messages as a peer would send them; return a decoder core whose pending table matches."""
    decoder = JsonRpcCore()
    peer = JsonRpcCore(emit_version=False)
    wire = b""
    expected: list[Message] = []
    for spec in specs:
        kind = spec[0]
        if kind == "request":
            _, rid, method, params, with_version = spec
            obj: dict[str, Any] = {"jsonrpc": "2.0"} if with_version else {}
            obj.update(id=rid, method=method, params=params)
            wire += json.dumps(obj).encode() + b"\n"
            expected.append(Request(rid, method, params))
        elif kind == "notification":
            _, method, params, with_version = spec
            obj = {"jsonrpc": "2.0"} if with_version else {}
            obj.update(method=method, params=params)
            wire += json.dumps(obj, ensure_ascii=False).encode() + b"\n"
            expected.append(Notification(method, params))
        elif kind == "response":
            _, method, result = spec
            rid, _ = decoder.encode_request(method)
            wire += peer.encode_response(rid, result)
            expected.append(Response(rid, result, method))
        else:
            _, method, code, message, data = spec
            rid, _ = decoder.encode_request(method)
            wire += peer.encode_error(rid, code, message, data)
            expected.append(ErrorResponse(rid, code, message, data, method))
    return decoder, wire, expected


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=examples(150), deadline=None)
@given(
    specs=st.lists(message_specs, max_size=8),
    cuts=st.lists(st.integers(min_value=0), max_size=12),
    crlf=st.booleans(),
    drop_last_newline=st.booleans(),
)
def test_roundtrip_any_chunking(
    specs: list[tuple[Any, ...]], cuts: list[int], crlf: bool, drop_last_newline: bool
) -> None:
    core, wire, expected = build_wire(specs)
    if crlf:
        wire = wire.replace(b"\n", b"\r\n")
    if drop_last_newline:
        wire = wire.rstrip(b"\r\n")
    out: list[Message] = []
    for chunk in chunked(wire, cuts):
        out += core.feed(chunk)
    out += core.feed_eof()
    assert out == expected
    assert dict(core.pending) == {}


@settings(max_examples=examples(300), deadline=None)
@given(
    data=st.binary(max_size=300)
    | st.lists(
        st.sampled_from(
            [b"{", b"}", b'"id":', b'"method":"m"', b'"result":1', b"\n", b"\r", b",", b"1", b"\xe2\x82"]
        ),
        max_size=40,
    ).map(b"".join),
    cuts=st.lists(st.integers(min_value=0), max_size=10),
    limit=st.sampled_from([4, 16, 64 * 1024 * 1024]),
)
def test_arbitrary_bytes_never_raise(data: bytes, cuts: list[int], limit: int) -> None:
    core = JsonRpcCore(max_line_bytes=limit)
    core.encode_request("a")
    out: list[Message] = []
    for chunk in chunked(data, cuts):
        out += core.feed(chunk)
        assert core.buffered_bytes <= limit
    out += core.feed_eof()
    assert all(isinstance(m, Request | Notification | Response | ErrorResponse | ProtocolError) for m in out)


# -- the msgspec fast path agrees with the json module ------------------------------------------------

member_names = st.sampled_from(["jsonrpc", "method", "id", "params", "result", "error", "other"])
any_member_value = json_values | st.integers() | st.sampled_from([1e400, -1e400])  # past int64, inf
objects = st.dictionaries(member_names, any_member_value, max_size=6)
odd_lines = st.sampled_from(
    [
        b'{"method":"m","params":NaN}',
        b'{"method":"m","params":"\\ud800"}',
        b'{"method":"m","params":1e400}',
        b'{"method":"a","method":"b","id":1}',
        b'  {"method":"m"} \r',
        b'{"method":"m"} trailing',
        b"[1, 2]",
        b'"text"',
        b"",
        b"   ",
        b'{"method":null,"id":1,"result":2}',
        b'{"method":"m","id":null}',
        b'{"id":1,"error":{"code":1.5,"message":7}}',
        b'{"method":"m","params":"\xff"}',
        b'{"method":"m","params":' + b"[" * 5000 + b"]" * 5000 + b"}",
    ]
)


def _pair_with_pending() -> tuple[JsonRpcCore, JsonRpcCore]:
    fast, slow = JsonRpcCore(), JsonRpcCore()
    for core in (fast, slow):
        for _ in range(3):
            core.encode_request("m")  # ids 1..3 pending in both
    return fast, slow


@settings(max_examples=examples(400), deadline=None)
@given(line=objects.map(lambda o: json.dumps(o).encode()) | odd_lines)
def test_fast_decode_matches_json_module(line: bytes) -> None:
    fast, slow = _pair_with_pending()
    via_fast = fast.feed(line + b"\n")
    via_json = slow._decode_line_slow(line)
    assert via_fast == ([] if via_json is None else [via_json])
    assert dict(fast.pending) == dict(slow.pending)
