"""NoticeBoard (bounded broadcast log) and Backlog (a session's notices between turns)."""

from __future__ import annotations

import asyncio

from agent_fleet._provider.board import Backlog, NoticeBoard
from agent_fleet.events import Event, System


def _n(i: int) -> System:
    return System(subtype="notice", data={"i": i})


async def _take(board: NoticeBoard, count: int) -> list[Event]:
    out: list[Event] = []
    async for event in board.follow():
        out.append(event)
        if len(out) == count:
            break
    return out


async def test_a_reader_gets_the_kept_notices_then_new_ones() -> None:
    board = NoticeBoard(limit=8)
    board.post(_n(0))
    reader = asyncio.create_task(_take(board, 3))
    await asyncio.sleep(0)  # the reader is waiting now
    board.post(_n(1))
    board.post(_n(2))
    assert await asyncio.wait_for(reader, 1) == [_n(0), _n(1), _n(2)]


async def test_every_reader_gets_every_notice() -> None:
    board = NoticeBoard()
    readers = [asyncio.create_task(_take(board, 2)) for _ in range(3)]
    await asyncio.sleep(0)
    board.post(_n(1))
    board.post(_n(2))
    assert await asyncio.wait_for(asyncio.gather(*readers), 1) == [[_n(1), _n(2)]] * 3


async def test_the_board_is_bounded_and_says_what_a_late_reader_missed() -> None:
    board = NoticeBoard(limit=3)
    for i in range(10):
        board.post(_n(i))
    assert await _take(board, 3) == [_n(7), _n(8), _n(9)]  # a new reader starts at the oldest kept
    events: list[Event] = []

    async def slow() -> None:
        async for event in board.follow():
            events.append(event)
            if event == _n(7):
                for i in range(10, 20):  # while this reader is busy, the board moves on
                    board.post(_n(i))
            if event == _n(19):
                return

    await asyncio.wait_for(slow(), 1)
    # 8 and 9 were already in hand; 10 to 16 were evicted before the reader came back
    dropped = System(subtype="notices_dropped", data={"count": 7})
    assert events == [_n(7), _n(8), _n(9), dropped, _n(17), _n(18), _n(19)]


async def test_close_ends_readers_after_what_they_have_not_read() -> None:
    board = NoticeBoard()
    board.post(_n(1))
    board.close()
    board.post(_n(2))  # ignored once closed
    assert [e async for e in board.follow()] == [_n(1)]


def test_backlog_keeps_the_newest_and_counts_the_dropped() -> None:
    backlog = Backlog(limit=2)
    for i in range(5):
        backlog.add(_n(i))
    assert len(backlog) == 2
    assert backlog.drain() == [System(subtype="notices_dropped", data={"count": 3}), _n(3), _n(4)]
    assert backlog.drain() == [] and len(backlog) == 0
