"""The pure assembler: table tests for each recovery path, then hypothesis against a model server."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.depth import examples

from agent_fleet.execserver._assembly import Assembler, Chunk, ReadReason, ReadSnapshot, Stream

# -- a model exec-server ------------------------------------------------------------------------


@dataclass
class Model:
    """The truth about one process: events seq 1..N (outputs, one exit, close last) and a retained
    window of the last ``window`` output chunks (the real server bounds it by bytes; any suffix bound
    behaves the same for the client)."""

    outputs: list[tuple[Stream, bytes]]
    exit_after: int  # the exit event follows this many outputs
    exit_code: int = 0
    sandbox_denied: bool = False
    window: int = 1_000_000
    legacy: bool = False  # exited notifications omit sandboxDenied

    def __post_init__(self) -> None:
        # seq -> the output Chunk, or "exited" / "closed"
        self.events: dict[int, Chunk | str] = {}
        seq = 0
        for i, (stream, data) in enumerate(self.outputs):
            if i == self.exit_after:
                seq += 1
                self.events[seq] = "exited"
            seq += 1
            self.events[seq] = Chunk(seq, stream, data)
        if self.exit_after >= len(self.outputs):
            seq += 1
            self.events[seq] = "exited"
        seq += 1
        self.events[seq] = "closed"
        self.last = seq

    def output_chunks(self, upto: int) -> list[Chunk]:
        return [e for s, e in sorted(self.events.items()) if isinstance(e, Chunk) and s <= upto]

    def deliver(self, asm: Assembler, seq: int) -> None:
        event = self.events[seq]
        if isinstance(event, Chunk):
            asm.on_output(seq, event.stream, event.data)
        elif event == "exited":
            asm.on_exited(seq, self.exit_code, None if self.legacy else self.sandbox_denied)
        else:
            asm.on_closed(seq)

    def read(self, after: int, produced: int) -> ReadSnapshot:
        """Answer ``process/read`` when events 1..produced exist."""
        retained = self.output_chunks(produced)[-self.window :] if self.window else []
        exited = any(e == "exited" for s, e in self.events.items() if s <= produced)
        return ReadSnapshot(
            chunks=tuple(c for c in retained if c.seq > after),
            next_seq=produced + 1,
            exited=exited,
            exit_code=self.exit_code if exited else None,
            closed=produced >= self.last,
            sandbox_denied=self.sandbox_denied,
        )

    def truth(self) -> list[tuple[Stream, bytes]]:
        return list(self.outputs)


def run_reads(asm: Assembler, model: Model, produced: int, out: list[Chunk], *, heal_gap: bool) -> None:
    """Answer every read the assembler asks for right now (GAP only when ``heal_gap`` is False)."""
    for _ in range(10):
        reason = asm.read_reason()
        if reason is None or (reason is ReadReason.GAP and heal_gap):
            return
        cursor = asm.begin_read()
        asm.on_read(model.read(cursor, produced))
        out.extend(asm.take())
    raise AssertionError("the assembler kept asking for reads")


def finish(asm: Assembler, model: Model, out: list[Chunk]) -> None:
    """Everything is produced; answer reads until done, simulating the stall timer when silent."""
    for _ in range(5):
        out.extend(asm.take())
        if asm.done:
            return
        if asm.read_reason() is None:
            asm.on_lost()  # the I/O shell's stall timer / reconnection
        run_reads(asm, model, model.last, out, heal_gap=False)
    assert asm.done, "not done after reads of the final state"


def assert_sound(asm: Assembler, model: Model, out: list[Chunk]) -> None:
    seqs = [c.seq for c in out]
    assert seqs == sorted(set(seqs)), "chunks out of order or duplicated"
    for c in out:
        assert model.events[c.seq] == c
    got = [(c.stream, c.data) for c in out]
    assert asm.truncated == (got != model.truth())
    assert asm.exit_code == model.exit_code
    assert asm.sandbox_denied == model.sandbox_denied


# -- table tests ----------------------------------------------------------------------------------


def _model(n: int = 3, **kw: object) -> Model:
    outs: list[tuple[Stream, bytes]] = [("stdout" if i % 2 == 0 else "stderr", b"x%d" % i) for i in range(n)]
    return Model(outs, exit_after=kw.pop("exit_after", n), **kw)  # type: ignore[arg-type]


def test_complete_in_order_stream_needs_no_read() -> None:
    model = _model(3)
    asm = Assembler()
    for seq in range(1, model.last + 1):
        model.deliver(asm, seq)
    assert asm.done and asm.reads == 0 and asm.read_reason() is None
    assert [(c.stream, c.data) for c in asm.take()] == model.truth()


def test_exited_before_output_drains_does_not_complete() -> None:
    model = _model(4, exit_after=1)  # exited at seq 2, output at 3..5, closed at 6
    asm = Assembler()
    for seq in range(1, 4):
        model.deliver(asm, seq)
    assert asm.exited and not asm.done
    for seq in range(4, model.last + 1):
        model.deliver(asm, seq)
    assert asm.done and asm.reads == 0
    assert [(c.stream, c.data) for c in asm.take()] == model.truth()


def test_legacy_exit_costs_exactly_one_read() -> None:
    model = _model(2, legacy=True, sandbox_denied=True)
    asm = Assembler()
    for seq in range(1, model.last + 1):
        model.deliver(asm, seq)
    assert not asm.done and asm.read_reason() is ReadReason.LEGACY
    out = asm.take()
    run_reads(asm, model, model.last, out, heal_gap=False)
    assert asm.done and asm.reads == 1 and asm.sandbox_denied is True
    assert_sound(asm, model, out)


def test_gap_costs_one_read_and_no_duplicate() -> None:
    model = _model(4)
    asm = Assembler()
    for seq in range(1, model.last + 1):
        if seq != 2:
            model.deliver(asm, seq)
    assert asm.read_reason() is ReadReason.GAP
    out = asm.take()
    run_reads(asm, model, model.last, out, heal_gap=False)
    assert asm.done and asm.reads == 1
    assert_sound(asm, model, out)
    assert not asm.truncated


def test_reordered_pair_heals_without_a_read() -> None:
    model = _model(3)
    asm = Assembler()
    order = [2, 1, *range(3, model.last + 1)]
    for seq in order:
        model.deliver(asm, seq)
    assert asm.done and asm.reads == 0
    assert [(c.stream, c.data) for c in asm.take()] == model.truth()


def test_evicted_output_is_reported_truncated() -> None:
    model = _model(6, window=2)
    asm = Assembler()
    model.deliver(asm, 1)
    for seq in range(4, model.last + 1):  # seq 2 and 3 lost; only the last 2 outputs are retained
        model.deliver(asm, seq)
    out = asm.take()
    run_reads(asm, model, model.last, out, heal_gap=False)
    assert asm.done and asm.reads == 1 and asm.truncated
    assert_sound(asm, model, out)


def test_lost_exit_is_recovered_from_read() -> None:
    model = _model(2, exit_code=7, sandbox_denied=True)
    asm = Assembler()
    for seq in (1, 2, 4):  # exited (3) lost
        model.deliver(asm, seq)
    out = asm.take()
    run_reads(asm, model, model.last, out, heal_gap=False)
    assert asm.done and asm.reads == 1 and asm.exit_code == 7 and asm.sandbox_denied is True
    assert_sound(asm, model, out)


def test_lost_close_needs_the_stall_read() -> None:
    model = _model(2)
    asm = Assembler()
    for seq in range(1, model.last):
        model.deliver(asm, seq)
    assert asm.read_reason() is None and not asm.done  # nothing to go on: the shell's stall timer
    asm.on_lost()
    out = asm.take()
    run_reads(asm, model, model.last, out, heal_gap=False)
    assert asm.done and asm.reads == 1


def test_mid_stream_read_then_pushes_continue() -> None:
    model = _model(5)
    asm = Assembler()
    model.deliver(asm, 1)
    model.deliver(asm, 3)  # 2 lost
    out = asm.take()
    run_reads(asm, model, 3, out, heal_gap=False)  # the process is still running
    assert asm.released == 3 and not asm.done
    for seq in range(2, model.last + 1):  # including late duplicates
        model.deliver(asm, seq)
    out += asm.take()
    assert asm.done and asm.reads == 1
    assert_sound(asm, model, out)


def test_read_cut_short_by_max_bytes_reads_again() -> None:
    asm = Assembler()
    asm.on_output(1, "stdout", b"a")
    asm.on_lost()
    asm.begin_read()
    # a maxBytes-limited answer: nextSeq just past the last chunk although the process closed
    asm.on_read(
        ReadSnapshot(chunks=(Chunk(2, "stdout", b"b"),), next_seq=3, exited=True, exit_code=0, closed=True)
    )
    assert not asm.done and asm.read_reason() is ReadReason.LOST
    asm.begin_read()
    asm.on_read(
        ReadSnapshot(chunks=(), next_seq=5, exited=True, exit_code=0, closed=True, sandbox_denied=False)
    )
    assert asm.done and not asm.truncated
    assert [c.data for c in asm.take()] == [b"a", b"b"]


def test_failure_stops_everything() -> None:
    asm = Assembler()
    asm.on_lost()
    asm.begin_read()
    asm.on_read(
        ReadSnapshot(chunks=(), next_seq=1, exited=False, exit_code=None, closed=False, failure="boom")
    )
    assert asm.failure is not None and asm.read_reason() is None and not asm.done


def test_final_read_mode_always_reads_once() -> None:
    model = _model(1)
    asm = Assembler(final_read=True)
    for seq in range(1, model.last + 1):
        model.deliver(asm, seq)
    assert asm.read_reason() is ReadReason.FINAL
    out = asm.take()
    run_reads(asm, model, model.last, out, heal_gap=False)
    assert asm.done and asm.reads == 1


def test_one_read_at_a_time() -> None:
    asm = Assembler()
    asm.on_lost()
    asm.begin_read()
    with pytest.raises(RuntimeError):
        asm.begin_read()


# -- hypothesis -----------------------------------------------------------------------------------

streams: st.SearchStrategy[Stream] = st.sampled_from(["stdout", "stderr", "pty"])
outputs = st.lists(st.tuples(streams, st.binary(min_size=0, max_size=4)), max_size=10)


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Model, list[int], list[bool]]:
    outs = draw(outputs)
    model = Model(
        outs,
        exit_after=draw(st.integers(0, len(outs))),
        exit_code=draw(st.integers(-1, 255)),
        sandbox_denied=draw(st.booleans()),
        window=draw(st.integers(0, len(outs) + 1)),
        legacy=draw(st.booleans()),
    )
    seqs = list(range(1, model.last + 1))
    # any permutation, with drops and duplicates
    delivered = draw(st.lists(st.sampled_from(seqs), max_size=2 * len(seqs) + 2))
    if draw(st.booleans()):
        delivered = draw(st.permutations(seqs)) + delivered
    heal = draw(st.lists(st.booleans(), min_size=len(delivered), max_size=len(delivered)))
    return model, delivered, heal


@settings(max_examples=examples(250), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_any_delivery_pattern_is_byte_exact_or_truncated(
    scenario: tuple[Model, list[int], list[bool]],
) -> None:
    model, delivered, heal = scenario
    asm = Assembler()
    out: list[Chunk] = []
    produced = 0
    for seq, wait_for_gap in zip(delivered, heal, strict=True):
        produced = max(produced, seq)
        model.deliver(asm, seq)
        out.extend(asm.take())
        # Reads are answered with the server state at this point of production.
        run_reads(asm, model, produced, out, heal_gap=wait_for_gap)
    finish(asm, model, out)
    assert_sound(asm, model, out)


@settings(max_examples=examples(100), deadline=None)
@given(outputs, st.integers(0, 10), st.booleans())
def test_in_order_delivery_never_reads(
    outs: list[tuple[Stream, bytes]], exit_after: int, denied: bool
) -> None:
    model = Model(outs, exit_after=min(exit_after, len(outs)), sandbox_denied=denied)
    asm = Assembler()
    for seq in range(1, model.last + 1):
        model.deliver(asm, seq)
        assert asm.read_reason() is None
    assert asm.done and asm.reads == 0 and not asm.truncated
    assert [(c.stream, c.data) for c in asm.take()] == model.truth()
