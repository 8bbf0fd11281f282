"""A stream's state carried forward over its records: from any earlier state of the stream and
the records written after it, the state the stream machine left, producers included."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.protocol import stream_machine as machine
from adapter.protocol.commands import Append
from adapter.protocol.model import ProducerRecord, StreamMeta
from adapter.protocol.stream_log import (
    LoggedRecord,
    StreamState,
    carry_forward,
    logged_in_full,
    logged_record,
    recover,
)
from adapter.service.record_encoding import write_records
from tests.unit.support.histories import APPENDS, create
from topology.wire import ControlEvent, ProducerStamp, control_headers, data_headers

NOW = 1_000_000
MACHINE = machine.Machine()
TEXT = "text/plain"


@dataclass
class _Stream:
    """One stream's appends decided and committed one at a time; after each commit its state,
    and every record written, as read back from the partition."""

    states: list[StreamState] = field(default_factory=list)
    records: list[LoggedRecord] = field(default_factory=list)
    offset: int = 0

    def commit(self, write: machine.Write, gap: int) -> None:
        self.offset += gap  # other streams' records (and transaction markers) in the partition
        offsets = list(range(self.offset, self.offset + len(write.entries)))
        self.offset += len(write.entries)
        for offset, record in zip(offsets, write_records("t", 0, "s", TEXT, write), strict=True):
            self.records.append(logged_record(offset, write.at_ms, record.headers))
        settled = machine.settle(write, offsets)
        assert settled is not None
        producers = dict(self.states[-1].producers) if self.states else {}
        if write.producer is not None:
            producer_id, position = write.producer
            producers[producer_id] = ProducerRecord(
                "bucket", "s", producer_id, position.epoch, position.last_seq, write.at_ms
            )
        self.states.append(StreamState(settled, producers))

    def run(self, command: Append, gap: int, now_ms: int) -> None:
        state = self.states[-1]
        step = MACHINE.apply(machine.View(state.meta, state.producers), command, now_ms)
        if isinstance(step, machine.Write):
            self.commit(step, gap)

    def after(self, state: StreamState) -> list[LoggedRecord]:
        """The records of every write committed after `state`'s: a scan from its tail on."""
        return [record for record in self.records if record.offset >= state.meta.next_offset]


def _history(commands: list[tuple[Append, int]], ttl: bool) -> _Stream:
    stream = _Stream()
    first = create(ttl_seconds=60 if ttl else None)
    created = MACHINE.apply(machine.View(None), first, NOW)
    assert isinstance(created, machine.Write)
    stream.commit(created, 0)
    for index, (command, gap) in enumerate(commands, start=1):
        stream.run(command, gap, NOW + index)
    return stream


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(APPENDS, st.integers(0, 3)), max_size=40), st.booleans())
def test_any_earlier_state_and_the_records_after_it_give_the_state_now(
    commands: list[tuple[Append, int]], ttl: bool
) -> None:
    stream = _history(commands, ttl)
    final = stream.states[-1]
    for state in stream.states:
        assert carry_forward(state, stream.after(state)) == final


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(APPENDS, st.integers(0, 3)), max_size=40))
def test_records_the_state_already_holds_change_nothing(commands: list[tuple[Append, int]]) -> None:
    stream = _history(commands, ttl=False)
    final = stream.states[-1]
    for state in stream.states:
        assert carry_forward(state, stream.records) == final


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(APPENDS, st.integers(0, 3)), max_size=40),
    st.booleans(),
    st.data(),
)
def test_a_metadata_record_and_a_checkpoint_of_any_age_recover_the_state_now(
    commands: list[tuple[Append, int]], ttl: bool, data: st.DataObject
) -> None:
    """The metadata record (with the producer states stored beside it) is of any earlier
    state, the checkpoint of any other, or missing; the scan starts where the checkpoint was
    taken, or at the metadata's tail without one."""
    stream = _history(commands, ttl)
    index = st.integers(0, len(stream.states) - 1)
    stored = stream.states[data.draw(index)]
    checkpointed = data.draw(st.none() | index.map(stream.states.__getitem__))
    scan = stream.after(checkpointed or stored)
    recovered = recover(stored.meta, stored.producers, checkpointed, scan)
    assert recovered == stream.states[-1]


def _meta() -> StreamMeta:
    return StreamMeta("bucket", "s", 0, TEXT, NOW, 5, 6, NOW, NOW)


@pytest.mark.parametrize(("event", "offset"), [(ControlEvent.DELETE, 9), (ControlEvent.CREATE, 9)])
def test_a_later_incarnation_is_not_the_logs_to_say(event: ControlEvent, offset: int) -> None:
    records = [LoggedRecord(6, NOW, None), LoggedRecord(offset, NOW, event)]
    assert carry_forward(StreamState(_meta()), records) is None


def test_the_streams_own_create_record_is_no_new_incarnation() -> None:
    records = [LoggedRecord(5, NOW, ControlEvent.CREATE), LoggedRecord(6, NOW + 1, None)]
    carried = carry_forward(StreamState(_meta()), records)
    assert carried is not None
    assert (carried.meta.next_offset, carried.meta.message_count) == (7, 1)


def test_a_record_is_read_back_from_its_headers() -> None:
    stamp = ProducerStamp("writer-1", 2, 7)
    data = logged_record(4, NOW, data_headers(TEXT, stamp, "0009"))
    assert data == LoggedRecord(4, NOW, None, stamp, "0009")
    control = logged_record(5, NOW, control_headers(ControlEvent.CLOSE))
    assert control == LoggedRecord(5, NOW, ControlEvent.CLOSE)


def test_a_checkpoint_of_an_earlier_incarnation_is_not_used() -> None:
    old = StreamState(_meta().evolve(start_offset=1, next_offset=40, message_count=30))
    records = [LoggedRecord(6, NOW + 1, None, ProducerStamp("p", 0, 0))]
    recovered = recover(_meta(), {}, old, records)
    assert recovered is not None
    assert (recovered.meta.next_offset, recovered.meta.message_count) == (7, 1)
    assert recovered.producers["p"].last_seq == 0


def test_a_producer_never_moves_back_to_an_older_stamp() -> None:
    newer = ProducerRecord("bucket", "s", "p", 1, 0, NOW)
    records = [LoggedRecord(4, NOW - 1, None, ProducerStamp("p", 0, 9))]
    carried = carry_forward(StreamState(_meta(), {"p": newer}), records)
    assert carried is not None
    assert carried.producers == {"p": newer}


def test_a_close_the_state_holds_already_is_not_applied_again() -> None:
    """A closed stream's tail stays below its `close` record, so a scan from the tail reads
    it again: its record's timestamp (taken as it was produced, after the close was decided)
    must not move the stream's last write."""
    closed = StreamState(_meta().evolve(closed=True, last_seq="7"))
    close = logged_record(6, NOW + 3, control_headers(ControlEvent.CLOSE))
    assert carry_forward(closed, [close]) == closed


def test_only_a_pure_append_is_logged_in_full() -> None:
    """What a pure append changes, its records carry; anything else writes its state."""
    meta = _meta()
    plain = machine.Write((machine.Message(b"a"),), meta, NOW)
    assert logged_in_full(plain)
    assert not logged_in_full(replace(plain, entries=(machine.Message(b"a"), ControlEvent.CLOSE)))
    assert not logged_in_full(replace(plain, entries=(ControlEvent.CLOSE,)))
    assert not logged_in_full(replace(plain, entries=()))  # a fence, a trim: no record at all
    assert not logged_in_full(replace(plain, creates=True))
    assert not logged_in_full(replace(plain, forget=("writer-1",)))
    assert not logged_in_full(replace(plain, collects=(("bucket", "gone"),)))
    assert not logged_in_full(replace(plain, state=None))
