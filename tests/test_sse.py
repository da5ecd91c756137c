"""The event-stream decoder RemoteProvider reads the daemon with: the HTML standard's parsing rules, any
chunking, checked against httpx-sse (an independent implementation) and against the rules themselves."""

from __future__ import annotations

import itertools
import re

from httpx_sse._decoders import SSEDecoder as Reference
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.depth import examples

from agent_fleet._sse import SSEDecoder

_LINE_END = re.compile(r"\r\n|\r|\n")


def _decode(chunks: list[bytes]) -> list[tuple[str, bytes, str | None]]:
    decoder = SSEDecoder()
    return [event for chunk in chunks for event in decoder.feed(chunk)]


def _reference(stream: bytes) -> list[tuple[str, bytes, str | None]]:
    reference = Reference()
    text = stream.decode()
    lines = _LINE_END.split(text)
    out = []
    for line in lines[:-1]:  # the last piece has no line end yet
        sse = reference.decode(line)
        if sse is not None:
            out.append((sse.event, sse.data.encode(), sse.id or None))
    return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    edges = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


_text = st.text(st.characters(blacklist_characters="\r\n\0", blacklist_categories=("Cs",)), max_size=12)
_block = st.tuples(
    st.one_of(st.none(), _text.filter(lambda s: s.strip() == s and s != "")),  # event
    st.lists(_text, min_size=1, max_size=3),  # data lines
    st.one_of(st.none(), st.from_regex(r"[0-9]{1,6}", fullmatch=True)),  # id
    st.booleans(),  # a comment line first
)


@settings(max_examples=examples(300), deadline=None)
@given(
    blocks=st.lists(_block, max_size=6),
    newline=st.sampled_from(["\n", "\r\n", "\r"]),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=8),
)
def test_any_stream_in_any_chunks_decodes_as_httpx_sse_does(
    blocks: list[tuple[str | None, list[str], str | None, bool]], newline: str, cuts: list[int]
) -> None:
    lines: list[str] = []
    for event, data, ident, comment in blocks:
        if comment:
            lines.append(": ping")
        if ident is not None:
            lines.append(f"id: {ident}")
        if event is not None:
            lines.append(f"event: {event}")
        lines.extend(f"data: {d}" for d in data)
        lines.append("")
    stream = "".join(line + newline for line in lines).encode()
    got = _decode(_split(stream, cuts))
    assert got == _reference(stream)
    assert len(got) == len(blocks)


def test_what_the_daemon_writes_in_one_burst() -> None:
    burst = b"".join(b'id: %d\nevent: event\ndata: {"n":%d}\n\n' % (n, n) for n in range(1, 4))
    assert _decode([burst]) == [("event", b'{"n":%d}' % n, str(n)) for n in range(1, 4)]


def test_the_standards_rules() -> None:
    decoder = SSEDecoder()
    # no data: nothing dispatched (the event type is reset)
    assert decoder.feed(b"event: x\n\n") == []
    assert decoder.feed(b"data: a\n\n") == [("message", b"a", None)]
    # one leading space dropped, not two; a field without a colon has an empty value
    assert decoder.feed(b"data:  two\ndata\n\n") == [("message", b" two\n", None)]
    # an id with NUL is ignored; the last id is kept for later events
    assert decoder.feed(b"id: 7\ndata: x\n\nid: 8\0\ndata: y\n\n") == [
        ("message", b"x", "7"),
        ("message", b"y", "7"),
    ]
    assert decoder.last_event_id == "7"
    # comments, retry and unknown fields ignored; an incomplete block waits for its blank line
    assert decoder.feed(b": ping\nretry: 10\nfoo: bar\ndata: z\n") == []
    assert decoder.feed(b"\n") == [("message", b"z", "7")]


def test_a_crlf_split_across_chunks_ends_one_line() -> None:
    assert _decode([b"data: a\r", b"\n\r", b"\n"]) == [("message", b"a", None)]
    assert _decode([b"data: a\r", b"\r"]) == [("message", b"a", None)]  # CR CR: two line ends
