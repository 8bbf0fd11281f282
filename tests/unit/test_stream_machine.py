"""The stream state machine, without I/O: every write-side rule, and properties over random runs."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.protocol import forks
from adapter.protocol import stream_machine as machine
from adapter.protocol.commands import (
    Access,
    Append,
    Appended,
    Collect,
    Created,
    CreateStream,
    DeleteStream,
    Fence,
    ForkFrom,
    PublishSnapshot,
    StreamRef,
    Trim,
)
from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import Segment, SnapshotPointer, StreamMeta
from adapter.protocol.offsets import BEGINNING, encode
from adapter.protocol.offsets import NOW as AT_TAIL
from adapter.protocol.producers import ProducerPosition
from adapter.protocol.snapshots import check_readable, needed_from, retention_floors
from adapter.protocol.stream_etags import range_etag, stream_etag
from tests.unit.support.histories import COMMANDS
from topology.wire import ControlEvent, ProducerStamp

REF = StreamRef("bucket", "s")
NOW = 1_000_000
MACHINE = machine.Machine()
TEXT = "text/plain"
JSON = "application/json"


def _meta(**changes: object) -> StreamMeta:
    base = StreamMeta("bucket", "s", 2, TEXT, 0, 10, 20, 0, 0)
    return base.evolve(**changes)


def _create(content_type: str | None = TEXT, body: bytes = b"", **changes: Any) -> CreateStream:
    return replace(CreateStream(REF, content_type, None, None, False, body), **changes)


def _append(body: bytes = b"x", content_type: str | None = TEXT, **changes: Any) -> Append:
    return replace(Append(REF, content_type, body, False, None, None), **changes)


def _producer(epoch: int, seq: int, producer_id: str = "p") -> ProducerStamp:
    return ProducerStamp(producer_id, epoch, seq)


def _refusal(step: machine.Step) -> ErrorCode:
    assert isinstance(step, machine.Refused), step
    return step.error.code


def _write(step: machine.Step) -> machine.Write:
    assert isinstance(step, machine.Write), step
    return step


def _done(step: machine.Step) -> Appended | Created:
    assert isinstance(step, machine.Done), step
    return step.reply


# -- create ---------------------------------------------------------------------------------


def test_create_writes_its_control_record_then_the_initial_messages() -> None:
    write = _write(MACHINE.apply(machine.View(None, partition=4), _create(JSON, b"[1, 2]"), NOW))
    assert write.entries == (ControlEvent.CREATE, machine.Message(b"1"), machine.Message(b"2"))
    assert write.creates
    assert write.state is not None
    assert (write.state.partition, write.state.message_count) == (4, 2)
    settled = machine.settle(write, [7, 8, 9])
    assert settled is not None
    assert (settled.start_offset, settled.next_offset) == (7, 10)


def test_create_closed_empty_stream_ends_at_its_create_record() -> None:
    write = _write(MACHINE.apply(machine.View(None), _create(closed=True), NOW))
    assert write.entries == (ControlEvent.CREATE, ControlEvent.CLOSE)
    settled = machine.settle(write, [3, 4])
    assert settled is not None
    assert (settled.start_offset, settled.next_offset, settled.closed) == (3, 4, True)


def test_create_again_with_the_same_configuration_is_a_success_that_writes_nothing() -> None:
    existing = _meta()
    reply = _done(
        MACHINE.apply(
            machine.View(existing, partition=2), _create("text/plain; charset=utf-8"), NOW
        )
    )
    assert reply == Created(existing, created=False)


@pytest.mark.parametrize(
    "changes",
    [{"content_type": JSON}, {"ttl_seconds": 60}, {"expires_at_ms": NOW * 2}, {"closed": True}],
)
def test_create_again_with_another_configuration_conflicts(changes: dict[str, Any]) -> None:
    step = MACHINE.apply(machine.View(_meta(), partition=2), _create(**changes), NOW)
    assert _refusal(step) is ErrorCode.STREAM_EXISTS


def test_create_over_an_expired_stream_starts_afresh_and_forgets_its_producers() -> None:
    expired = _meta(expires_at_ms=NOW - 1)
    view = machine.View(expired, {"p": ProducerPosition(0, 3), "q": ProducerPosition(1, 0)})
    write = _write(MACHINE.apply(replace(view, partition=2), _create(), NOW))
    assert write.forget == ("p", "q")
    assert write.state is not None
    assert write.state.created_at_ms == NOW


def test_create_refuses_invalid_json_and_too_many_messages() -> None:
    assert _refusal(MACHINE.apply(machine.View(None), _create(JSON, b"[1,"), NOW)) is (
        ErrorCode.INVALID_JSON
    )
    small = machine.Limits(max_append_messages=2)
    step = machine.Machine(small).apply(machine.View(None), _create(JSON, b"[1,2,3]"), NOW)
    assert _refusal(step) is ErrorCode.PAYLOAD_TOO_LARGE


# -- append ---------------------------------------------------------------------------------


def test_append_to_a_missing_or_expired_stream_is_not_found() -> None:
    assert _refusal(MACHINE.apply(machine.View(None), _append(), NOW)) is ErrorCode.STREAM_NOT_FOUND
    expired = machine.View(_meta(ttl_seconds=1, last_access_ms=NOW - 1000))
    assert _refusal(MACHINE.apply(expired, _append(), NOW)) is ErrorCode.STREAM_NOT_FOUND


def test_append_writes_one_record_and_its_tail_follows_it() -> None:
    write = _write(MACHINE.apply(machine.View(_meta()), _append(b"hello"), NOW))
    assert write.entries == (machine.Message(b"hello"),)
    assert write.state is not None
    assert (write.state.message_count, write.state.last_write_at_ms) == (1, NOW)
    settled = machine.settle(write, [25])
    assert settled is not None
    assert settled.next_offset == 26


def test_json_arrays_are_flattened_into_one_record_per_element() -> None:
    view = machine.View(_meta(content_type=JSON))
    write = _write(MACHINE.apply(view, _append(b'[{"a":1}, 2]', JSON), NOW))
    assert write.messages == [b'{"a":1}', b"2"]
    assert _refusal(MACHINE.apply(view, _append(b"[]", JSON), NOW)) is ErrorCode.EMPTY_JSON_ARRAY
    assert _refusal(MACHINE.apply(view, _append(b"{", JSON), NOW)) is ErrorCode.INVALID_JSON


def test_an_array_over_the_message_limit_is_too_large_and_writes_nothing() -> None:
    view = machine.View(_meta(content_type=JSON))
    body = b"[" + b",".join([b"0"] * 11) + b"]"
    step = machine.Machine(machine.Limits(max_append_messages=10)).apply(
        view, _append(body, JSON), NOW
    )
    assert _refusal(step) is ErrorCode.PAYLOAD_TOO_LARGE


@pytest.mark.parametrize(
    ("command", "code"),
    [
        (_append(b""), ErrorCode.EMPTY_BODY),
        (_append(b"x", None), ErrorCode.BAD_REQUEST),
        (_append(b"x", JSON), ErrorCode.CONTENT_TYPE_MISMATCH),
    ],
)
def test_bodies_that_cannot_be_appended(command: Append, code: ErrorCode) -> None:
    assert _refusal(MACHINE.apply(machine.View(_meta()), command, NOW)) is code


def test_closing_writes_a_close_record_after_the_data() -> None:
    write = _write(MACHINE.apply(machine.View(_meta()), _append(b"last", close=True), NOW))
    assert write.entries == (machine.Message(b"last"), ControlEvent.CLOSE)
    settled = machine.settle(write, [30, 31])
    assert settled is not None
    assert (settled.next_offset, settled.closed) == (31, True)


def test_a_close_without_data_keeps_the_tail() -> None:
    write = _write(MACHINE.apply(machine.View(_meta()), _append(b"", None, close=True), NOW))
    settled = machine.settle(write, [40])
    assert settled is not None
    assert (settled.next_offset, settled.closed) == (20, True)


def test_a_closed_stream_takes_only_repeats() -> None:
    closed = machine.View(_meta(closed=True), {"p": ProducerPosition(0, 4)})
    again = _done(MACHINE.apply(closed, _append(b"", None, close=True), NOW))
    assert again == Appended(closed.stream, appended=False)  # type: ignore[arg-type]
    step = MACHINE.apply(closed, _append(b"more"), NOW)
    assert _refusal(step) is ErrorCode.STREAM_CLOSED
    assert isinstance(step, machine.Refused)
    assert step.error.headers == {"Stream-Closed": "true", "Stream-Next-Offset": encode(20)}
    retry = _done(MACHINE.apply(closed, _append(b"x", producer=_producer(0, 4)), NOW))
    assert isinstance(retry, Appended)
    assert retry.producer == ProducerPosition(0, 4)
    zombie = MACHINE.apply(closed, _append(b"x", producer=_producer(0, 5)), NOW)
    assert _refusal(zombie) is ErrorCode.STREAM_CLOSED


def test_a_stale_epoch_on_a_closed_stream_is_forbidden() -> None:
    closed = machine.View(_meta(closed=True), {"p": ProducerPosition(3, 4)})
    step = MACHINE.apply(closed, _append(b"x", producer=_producer(2, 0)), NOW)
    assert _refusal(step) is ErrorCode.STALE_PRODUCER_EPOCH


def test_stream_seq_must_grow() -> None:
    view = machine.View(_meta(last_seq="0005"))
    write = _write(MACHINE.apply(view, _append(seq="0006"), NOW))
    assert write.state is not None
    assert write.state.last_seq == "0006"
    assert _refusal(MACHINE.apply(view, _append(seq="0005"), NOW)) is ErrorCode.SEQUENCE_CONFLICT
    assert _refusal(MACHINE.apply(view, _append(seq="0004"), NOW)) is ErrorCode.SEQUENCE_CONFLICT


def test_if_match_compares_the_streams_etag() -> None:
    meta = _meta()
    view = machine.View(meta)
    _write(MACHINE.apply(view, _append(if_match=stream_etag(meta)), NOW))
    wrong = MACHINE.apply(view, _append(if_match='"nope"'), NOW)
    assert _refusal(wrong) is ErrorCode.PRECONDITION_FAILED


@pytest.mark.parametrize(
    ("condition", "exists", "refused"),
    [
        ({"if_match": "*"}, False, True),  # If-Match needs a current stream
        ({"if_match": "*"}, True, False),
        ({"if_match": '"stale"'}, True, True),
        ({"if_none_match": "*"}, True, True),  # create only if absent
        ({"if_none_match": "*"}, False, False),
        ({"if_none_match": '"stale"'}, True, False),
    ],
)
def test_a_conditional_create_holds_or_fails(
    condition: dict[str, str], exists: bool, refused: bool
) -> None:
    meta = _meta()
    step = MACHINE.apply(
        machine.View(meta if exists else None, partition=2), _create(TEXT, b"", **condition), NOW
    )
    if refused:
        assert _refusal(step) is ErrorCode.PRECONDITION_FAILED
    else:
        assert isinstance(step, machine.Write | machine.Done)


def test_if_match_on_create_takes_the_streams_etag_and_an_expired_stream_has_none() -> None:
    meta = _meta()
    same = _create(if_match=stream_etag(meta))
    assert _done(MACHINE.apply(machine.View(meta, partition=2), same, NOW)) == Created(
        meta, created=False
    )
    expired = _meta(expires_at_ms=NOW - 1)
    created = _create(if_match=stream_etag(expired))
    assert _refusal(MACHINE.apply(machine.View(expired, partition=2), created, NOW)) is (
        ErrorCode.PRECONDITION_FAILED
    )
    assert _write(
        MACHINE.apply(machine.View(expired, partition=2), _create(if_none_match="*"), NOW)
    )


def test_a_fence_sets_the_token_with_no_record_and_again_writes_nothing() -> None:
    meta = _meta()
    write = _write(MACHINE.apply(machine.View(meta), Fence(REF, "t1"), NOW))
    assert write.entries == ()
    assert write.state == meta.evolve(fencing_token="t1")
    assert machine.settle(write, []) == meta.evolve(fencing_token="t1")
    fenced = meta.evolve(fencing_token="t1")
    assert _done(MACHINE.apply(machine.View(fenced), Fence(REF, "t1"), NOW)).meta == fenced
    assert MACHINE.apply(machine.View(meta, pending=True), Fence(REF, "t"), NOW) is machine.SETTLE
    missing = MACHINE.apply(machine.View(None), Fence(REF, "t"), NOW)
    assert _refusal(missing) is ErrorCode.STREAM_NOT_FOUND


@pytest.mark.parametrize(
    ("stream_token", "sent", "accepted", "says"),
    [
        (None, None, True, ""),
        ("t1", "t1", True, ""),
        ("t1", "t2", False, "is not it"),
        ("t1", None, False, "is required"),
        (None, "t1", False, "no fencing token"),
    ],
)
def test_an_append_carries_the_streams_fencing_token(
    stream_token: str | None, sent: str | None, accepted: bool, says: str
) -> None:
    view = machine.View(_meta(fencing_token=stream_token))
    step = MACHINE.apply(view, _append(fencing_token=sent), NOW)
    if accepted:
        assert _write(step).state is not None
        return
    assert isinstance(step, machine.Refused)
    assert step.error.code is ErrorCode.FENCING_TOKEN_MISMATCH
    assert says in step.error.message
    assert "t1" not in step.error.message  # never the token itself


@pytest.mark.parametrize("closed", [False, True])
def test_a_fenced_stream_answers_a_stale_writers_retry_and_refuses_its_new_appends(
    closed: bool,
) -> None:
    """The retry of an append committed before the fence is that append (its duplicate 204);
    only a new one is the fence's to refuse."""
    meta = _meta(fencing_token="new", closed=closed)
    fenced = machine.View(meta, {"p": ProducerPosition(0, 3)})
    retry = _append(producer=_producer(0, 3), fencing_token="old")
    assert _done(MACHINE.apply(fenced, retry, NOW)) == Appended(meta, False, ProducerPosition(0, 3))
    new = _append(producer=_producer(0, 4), fencing_token="old")
    assert _refusal(MACHINE.apply(fenced, new, NOW)) is ErrorCode.FENCING_TOKEN_MISMATCH


def test_producers_are_accepted_in_sequence_and_repeats_are_answered_without_writing() -> None:
    view = machine.View(_meta(), {"p": ProducerPosition(1, 4)})
    write = _write(MACHINE.apply(view, _append(producer=_producer(1, 5)), NOW))
    assert write.producer == ("p", ProducerPosition(1, 5))
    assert write.stamp == _producer(1, 5)
    duplicate = _done(MACHINE.apply(view, _append(producer=_producer(1, 3)), NOW))
    assert duplicate == Appended(_meta(), False, ProducerPosition(1, 4))
    gap = MACHINE.apply(view, _append(producer=_producer(1, 7)), NOW)
    assert _refusal(gap) is ErrorCode.PRODUCER_SEQUENCE_GAP
    assert isinstance(gap, machine.Refused)
    assert gap.error.headers == {"Producer-Expected-Seq": "5", "Producer-Received-Seq": "7"}
    stale = MACHINE.apply(view, _append(producer=_producer(0, 5)), NOW)
    assert _refusal(stale) is ErrorCode.STALE_PRODUCER_EPOCH
    bumped = MACHINE.apply(view, _append(producer=_producer(2, 1)), NOW)
    assert _refusal(bumped) is ErrorCode.INVALID_PRODUCER_EPOCH
    fresh = _write(MACHINE.apply(view, _append(producer=_producer(2, 0)), NOW))
    assert fresh.producer == ("p", ProducerPosition(2, 0))


def test_a_new_producer_starts_at_seq_zero() -> None:
    view = machine.View(_meta())
    _write(MACHINE.apply(view, _append(producer=_producer(0, 0, "new")), NOW))
    step = MACHINE.apply(view, _append(producer=_producer(0, 1, "new")), NOW)
    assert _refusal(step) is ErrorCode.PRODUCER_SEQUENCE_GAP


def test_a_duplicate_is_recognised_before_stream_seq() -> None:
    view = machine.View(_meta(last_seq="9"), {"p": ProducerPosition(0, 0)})
    retry = MACHINE.apply(view, _append(seq="9", producer=_producer(0, 0)), NOW)
    assert isinstance(_done(retry), Appended)


def test_a_write_renews_a_sliding_ttl_only() -> None:
    sliding = _meta(ttl_seconds=60, last_access_ms=NOW - 10)
    write = _write(MACHINE.apply(machine.View(sliding), _append(), NOW))
    assert write.state is not None
    assert write.state.last_access_ms == NOW
    fixed = _meta(expires_at_ms=NOW * 2, last_access_ms=5)
    write = _write(MACHINE.apply(machine.View(fixed), _append(), NOW))
    assert write.state is not None
    assert write.state.last_access_ms == 5


def test_an_append_on_committed_state_is_an_access_whatever_its_answer() -> None:
    """Refused, repeated or written, it renews a live stream's sliding TTL (`renewed`, for the
    caller to hold at once); the TTL of an expired stream, or a fixed one, does not move."""
    sliding = _meta(ttl_seconds=60, last_access_ms=NOW - 10)
    renewed = sliding.evolve(last_access_ms=NOW)
    refused = MACHINE.apply(machine.View(sliding), _append(b"x", JSON), NOW)
    assert _refusal(refused) is ErrorCode.CONTENT_TYPE_MISMATCH
    assert machine.renewal(refused) == renewed
    closed = machine.View(sliding.evolve(closed=True))
    repeat = MACHINE.apply(closed, _append(b"", None, close=True), NOW)
    assert _done(repeat).meta.last_access_ms == NOW
    assert machine.renewal(repeat) == renewed.evolve(closed=True)
    assert machine.renewal(MACHINE.apply(machine.View(sliding), _append(), NOW)) == renewed
    expired = _meta(ttl_seconds=60, last_access_ms=NOW - 60_000)
    assert machine.renewal(MACHINE.apply(machine.View(expired), _append(), NOW)) is None
    fixed = _meta(expires_at_ms=NOW * 2, last_access_ms=5)
    assert machine.renewal(MACHINE.apply(machine.View(fixed), _append(b"x", JSON), NOW)) is None


def test_an_append_on_pending_state_renews_only_in_what_it_writes() -> None:
    pending = machine.View(_meta(ttl_seconds=60, last_access_ms=NOW - 10), pending=True)
    write = _write(MACHINE.apply(pending, _append(), NOW))
    assert machine.renewal(write) is None
    assert write.state is not None
    assert write.state.last_access_ms == NOW


def test_a_write_settled_when_answered_renews_a_sliding_ttl_from_then() -> None:
    """A commit that took long must not leave the client less than the TTL it asked for."""
    sliding = _meta(ttl_seconds=60, last_access_ms=NOW - 10)
    write = _write(MACHINE.apply(machine.View(sliding, pending=True), _append(), NOW))
    decided = machine.settle(write, [20])
    answered = machine.settle(write, [20], answered_ms=NOW + 500)
    assert decided is not None
    assert decided.last_access_ms == NOW
    assert answered == decided.evolve(last_access_ms=NOW + 500)
    assert machine.settle(write, [20], answered_ms=NOW - 1) == decided  # never moved back


# -- access (sliding TTL) ---------------------------------------------------------------------


def _renewed(meta: StreamMeta | None, at_ms: int) -> StreamMeta | None:
    """The stream after an access at `at_ms`, or None when the machine says nothing to do."""
    step = MACHINE.apply(machine.View(meta), Access(at_ms), NOW)
    if step is machine.NOTHING:
        return None
    assert isinstance(step, machine.Renewed), step
    return step.state


def test_an_access_renews_a_sliding_ttl_only() -> None:
    sliding = _meta(ttl_seconds=60, last_access_ms=NOW - 10)
    renewed = _renewed(sliding, NOW)
    assert renewed == sliding.evolve(last_access_ms=NOW)
    assert renewed.deadline_ms() == NOW + 60_000
    assert _renewed(_meta(expires_at_ms=NOW * 2, last_access_ms=5), NOW) is None
    assert _renewed(_meta(), NOW) is None  # no expiry at all
    assert _renewed(None, NOW) is None  # no stream


def test_an_access_no_later_than_the_last_one_known_renews_nothing() -> None:
    sliding = _meta(ttl_seconds=60, last_access_ms=NOW)
    assert _renewed(sliding, NOW) is None
    assert _renewed(sliding, NOW - 1) is None  # told late, or by a clock behind ours


def test_an_access_reported_for_a_stream_expired_here_revives_it() -> None:
    # The owner decides expiry: an access it reports counts even where the stream looked expired.
    expired = _meta(ttl_seconds=1, last_access_ms=NOW - 5_000)
    assert expired.expired(NOW)
    renewed = _renewed(expired, NOW)
    assert renewed is not None
    assert not renewed.expired(NOW)


_EXPIRY = st.sampled_from([(None, None), (60, None), (None, NOW * 2), (1, None)])


@settings(max_examples=300, deadline=None)
@given(_EXPIRY, st.integers(0, NOW), st.lists(st.integers(0, 2 * NOW), max_size=12))
def test_accesses_in_any_order_leave_the_latest_and_never_shorten_a_life(
    expiry: tuple[int | None, int | None], last_access_ms: int, accesses: list[int]
) -> None:
    ttl, expires_at = expiry
    first = _meta(ttl_seconds=ttl, expires_at_ms=expires_at, last_access_ms=last_access_ms)
    meta = first
    for at_ms in accesses:
        renewed = _renewed(meta, at_ms)
        if renewed is None:
            assert ttl is None or at_ms <= meta.last_access_ms
            continue
        assert renewed == meta.evolve(last_access_ms=at_ms)  # nothing else changes
        assert (renewed.deadline_ms() or 0) > (meta.deadline_ms() or 0)
        meta = renewed
    expected = max([last_access_ms, *accesses]) if ttl is not None else last_access_ms
    assert meta.last_access_ms == expected
    assert _renewed(meta, meta.last_access_ms) is None  # applying the latest again: nothing


# -- pending state ----------------------------------------------------------------------------


def test_against_a_pending_state_only_writes_with_data_are_decided() -> None:
    pending = machine.View(_meta(), {"p": ProducerPosition(0, 1)}, pending=True)
    _write(MACHINE.apply(pending, _append(), NOW))
    assert MACHINE.apply(pending, _append(b""), NOW) is machine.SETTLE  # a refusal
    assert MACHINE.apply(pending, _append(producer=_producer(0, 1)), NOW) is machine.SETTLE
    assert MACHINE.apply(pending, _append(if_match='"x"'), NOW) is machine.SETTLE
    assert MACHINE.apply(pending, _append(b"", None, close=True), NOW) is machine.SETTLE
    broken = machine.View(_meta(), pending=True, broken=True)
    assert MACHINE.apply(broken, _append(), NOW) is machine.SETTLE


# -- delete -----------------------------------------------------------------------------------


def test_delete_writes_a_control_record_and_forgets_the_stream_and_its_producers() -> None:
    view = machine.View(_meta(), {"p": ProducerPosition(0, 0)})
    write = _write(MACHINE.apply(view, DeleteStream(REF), NOW))
    assert write.entries == (ControlEvent.DELETE,)
    assert write.forget == ("p",)
    assert machine.settle(write, [50]) is None
    assert (
        _refusal(MACHINE.apply(machine.View(None), DeleteStream(REF), NOW))
        is ErrorCode.STREAM_NOT_FOUND
    )


# -- forks ----------------------------------------------------------------------------------

SOURCE = _meta(stream_id="src", start_offset=10, next_offset=20, ttl_seconds=60, last_access_ms=NOW)


def _fork(
    offset: int | None = None, sub_offset: int = 0, content_type: str | None = None, **changes: Any
) -> CreateStream:
    return _create(content_type, fork=ForkFrom("src", offset, sub_offset), **changes)


def _forked(
    command: CreateStream, source: StreamMeta = SOURCE, following: tuple[bytes, ...] = ()
) -> machine.Step:
    return MACHINE.apply(
        machine.View(None, source=source, following=following, partition=9), command, NOW
    )


def test_a_fork_lives_in_its_sources_partition_and_inherits_its_history_up_to_the_cut() -> None:
    write = _write(_forked(_fork(15)))
    assert write.state is not None
    assert write.state.partition == SOURCE.partition  # not the 9 its own key would give
    assert write.state.inherited == (Segment("src", 10, 15),)
    assert write.entries == (ControlEvent.CREATE,)  # nothing of the source is copied
    settled = machine.settle(write, [30])
    assert settled is not None
    assert settled.segments() == (Segment("src", 10, 15), Segment("s", 30, 31))
    assert settled.history_start == 10


def test_a_fork_defaults_to_the_sources_tail_type_and_expiry() -> None:
    state = _write(_forked(_fork())).state
    assert state is not None
    assert (state.fork_offset, state.content_type, state.ttl_seconds) == (20, TEXT, 60)
    assert state.inherited == (Segment("src", 10, 20),)
    own = _write(_forked(_fork(expires_at_ms=NOW + 5))).state
    assert own is not None
    assert (own.ttl_seconds, own.expires_at_ms) == (None, NOW + 5)


def test_a_fork_of_a_fork_clips_the_chain() -> None:
    middle = SOURCE.evolve(inherited=(Segment("root", 2, 6),), start_offset=10)
    assert forks.inherited(middle, 4) == (Segment("root", 2, 4),)
    assert forks.inherited(middle, 12) == (Segment("root", 2, 6), Segment("src", 10, 12))
    assert forks.cut(middle, 0) == 2  # before the history: its beginning


@pytest.mark.parametrize(
    ("command", "source", "code"),
    [
        (_fork(), None, ErrorCode.STREAM_NOT_FOUND),
        (_fork(), SOURCE.evolve(ttl_seconds=1, last_access_ms=0), ErrorCode.STREAM_NOT_FOUND),
        (_fork(), SOURCE.evolve(soft_deleted=True), ErrorCode.SOURCE_DELETED),
        (_fork(content_type=JSON), SOURCE, ErrorCode.CONTENT_TYPE_MISMATCH),
        (_fork(21), SOURCE, ErrorCode.INVALID_OFFSET),
        (_fork(sub_offset=1), SOURCE, ErrorCode.INVALID_HEADER),  # nothing past the tail
    ],
)
def test_forks_refused(command: CreateStream, source: StreamMeta | None, code: ErrorCode) -> None:
    view = machine.View(None, source=source)
    assert _refusal(MACHINE.apply(view, command, NOW)) is code


def test_a_sub_offset_copies_a_prefix_before_the_initial_body() -> None:
    write = _write(_forked(_fork(12, 3, body=b"XY"), following=(b"hello", b"more")))
    assert write.messages == [b"hel", b"XY"]
    assert _refusal(_forked(_fork(12, 6), following=(b"hello",))) is ErrorCode.INVALID_HEADER
    json_source = SOURCE.evolve(content_type=JSON)
    write = _write(_forked(_fork(12, 2), json_source, (b"1", b"2", b"3")))
    assert write.messages == [b"1", b"2"]
    assert _refusal(_forked(_fork(12, 4), json_source, (b"1",))) is ErrorCode.INVALID_HEADER


def test_a_fork_created_again_is_the_same_only_with_the_same_fork_point() -> None:
    existing = _write(_forked(_fork(12, 2), following=(b"hello",))).state
    assert existing is not None
    view = machine.View(existing, source=SOURCE)
    assert isinstance(MACHINE.apply(view, _fork(12, 2), NOW), machine.Done)
    assert isinstance(MACHINE.apply(view, _fork(None, 2), NOW), machine.Done)
    for other in (_fork(12, 3), _fork(11, 2), _create()):
        assert _refusal(MACHINE.apply(view, other, NOW)) is ErrorCode.STREAM_EXISTS


def test_a_fork_of_another_buckets_stream_lives_in_that_buckets_partition() -> None:
    source = SOURCE.evolve(bucket_id="other")
    command = _create(None, fork=ForkFrom("src", 15, source_bucket="other"))
    state = machine.settle(_write(_forked(command, source)), [30])
    assert state is not None
    assert (state.bucket_id, state.source, state.home) == ("bucket", ("other", "src"), "other")
    assert (state.data_bucket, state.partition, state.record_id) == ("other", 2, "bucket//s")
    assert state.segments() == (Segment("src", 10, 15), Segment("bucket//s", 30, 31))
    # Its fork back in the source's bucket is keyed by its own id there, beside its source.
    back = _create(
        None, ref=StreamRef("other", "g"), fork=ForkFrom("s", 31, source_bucket="bucket")
    )
    grand = _write(_forked(back, state)).state
    assert grand is not None
    assert (grand.source, grand.home, grand.data_bucket, grand.record_id) == (
        ("bucket", "s"),
        None,
        "other",
        "g",
    )
    assert grand.inherited == (Segment("src", 10, 15), Segment("bucket//s", 30, 31))


def test_a_fork_across_buckets_created_again_names_the_same_source_bucket() -> None:
    source = SOURCE.evolve(bucket_id="other")
    command = _create(None, fork=ForkFrom("src", 12, source_bucket="other"))
    view = machine.View(_write(_forked(command, source)).state, source=source)
    assert isinstance(MACHINE.apply(view, command, NOW), machine.Done)
    assert _refusal(MACHINE.apply(view, _fork(12), NOW)) is ErrorCode.STREAM_EXISTS


def test_a_stream_with_live_forks_is_soft_deleted_and_then_gone() -> None:
    view = machine.View(_meta(), {"p": ProducerPosition(0, 0)}, forks=1)
    write = _write(MACHINE.apply(view, DeleteStream(REF), NOW))
    assert write.state is not None
    assert write.state.soft_deleted
    assert write.forget == ("p",)
    gone = machine.View(write.state)
    assert _refusal(MACHINE.apply(gone, DeleteStream(REF), NOW)) is ErrorCode.GONE
    assert _refusal(MACHINE.apply(gone, _append(), NOW)) is ErrorCode.GONE
    assert _refusal(MACHINE.apply(gone, _create(), NOW)) is ErrorCode.STREAM_EXISTS


def test_deleting_the_last_fork_collects_soft_deleted_sources_up_the_chain() -> None:
    root, middle = _meta(stream_id="root", soft_deleted=True), _meta(stream_id="mid")
    chain = ((middle.evolve(soft_deleted=True), 1), (root, 1))
    write = _write(MACHINE.apply(machine.View(_meta(), ancestors=chain), DeleteStream(REF), NOW))
    assert write.state is None
    assert write.collects == (("bucket", "mid"), ("bucket", "root"))
    shared = ((middle.evolve(soft_deleted=True), 2), (root, 1))
    assert (
        _write(
            MACHINE.apply(machine.View(_meta(), ancestors=shared), DeleteStream(REF), NOW)
        ).collects
        == ()
    )
    alive = ((middle, 1), (root, 1))
    assert (
        _write(
            MACHINE.apply(machine.View(_meta(), ancestors=alive), DeleteStream(REF), NOW)
        ).collects
        == ()
    )


def test_a_soft_deleted_stream_without_live_forks_is_collected_with_the_sources_it_kept() -> None:
    gone, root = _meta(soft_deleted=True), _meta(stream_id="root", soft_deleted=True)
    write = _write(MACHINE.apply(machine.View(gone, ancestors=((root, 1),)), Collect(), NOW))
    assert (write.entries, write.state, write.collects) == ((), None, (("bucket", "root"),))
    assert (
        MACHINE.apply(machine.View(gone, forks=1), Collect(), NOW) is machine.NOTHING
    )  # a fork still reads it
    assert (
        MACHINE.apply(machine.View(_meta()), Collect(), NOW) is machine.NOTHING
    )  # not soft-deleted
    assert MACHINE.apply(machine.View(None), Collect(), NOW) is machine.NOTHING


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 4)), max_size=6))
def test_a_forks_history_is_its_sources_below_the_cut_then_its_own(
    steps: list[tuple[int, int, int]],
) -> None:
    """Fork chains over one partition: reading a fork's segments gives exactly the messages
    of its source's history below the fork offset, then the fork's own."""
    log: list[tuple[str, bytes]] = []  # the partition: (key, value) per offset
    history: dict[str, list[tuple[int, bytes]]] = {"s0": []}
    metas = {"s0": _meta(stream_id="s0", start_offset=0, next_offset=1)}
    log.append(("s0", b""))
    for pick, cut_back, appends in steps:
        source = metas[sorted(metas)[pick % len(metas)]]
        offset = max(source.history_start, source.next_offset - cut_back)
        name = f"s{len(metas)}"
        fork = _create(None, ref=StreamRef("bucket", name), fork=ForkFrom(source.stream_id, offset))
        write = _write(MACHINE.apply(machine.View(None, source=source), fork, NOW))
        settled = machine.settle(write, [len(log)])
        assert settled is not None
        log.append((name, b""))
        history[name] = [(o, m) for o, m in history[source.stream_id] if o < offset]
        for index in range(appends):
            body = f"{name}-{index}".encode()
            history[name].append((len(log), body))
            log.append((name, body))
        metas[name] = settled.evolve(next_offset=len(log))
        for other in (n for n in metas if n != name):  # others write on after the fork
            body = f"{other}-late".encode()
            history[other].append((len(log), body))
            log.append((other, body))
            metas[other] = metas[other].evolve(next_offset=len(log))
    for name, meta in metas.items():
        read = [
            value
            for segment in meta.segments()
            for offset, (key, value) in enumerate(log)
            if key == segment.stream_id and segment.start <= offset < segment.end and value
        ]
        assert read == [m for _o, m in history[name]]


# -- properties over random runs ----------------------------------------------------------


@dataclass
class _Log:
    """A driver without I/O: decides each command, queues writes, and commits them in order."""

    stream: StreamMeta | None = None
    producers: dict[str, ProducerPosition] = field(default_factory=dict)
    pending: list[machine.Write] = field(default_factory=list)
    pending_state: StreamMeta | None = None
    pending_producers: dict[str, ProducerPosition] = field(default_factory=dict)
    offset: int = 0
    tails: list[int] = field(default_factory=list)
    accepted: list[tuple[str, int, int]] = field(default_factory=list)
    seqs: list[str] = field(default_factory=list)

    def view(self) -> machine.View:
        if self.pending:
            merged = {**self.producers, **self.pending_producers}
            return machine.View(self.pending_state, merged, pending=True)
        return machine.View(self.stream, dict(self.producers))

    def commit(self, gap: int) -> None:
        for write in self.pending:
            self.offset += gap  # other streams' records share the partition
            offsets = list(range(self.offset, self.offset + len(write.entries)))
            self.offset += len(write.entries)
            settled = machine.settle(write, offsets)
            for producer_id in write.forget:
                self.producers.pop(producer_id, None)
            if write.producer is not None:
                self.producers[write.producer[0]] = write.producer[1]
            if settled is not None and self.stream is not None and not write.creates:
                assert settled.next_offset >= self.stream.next_offset  # offsets only grow
                if write.messages:
                    assert settled.next_offset > self.stream.next_offset
                assert self.stream.closed <= settled.closed  # closed stays closed
            self.stream = settled
            if settled is not None:
                self.tails.append(settled.next_offset)
        self.pending.clear()
        self.pending_producers.clear()

    def run(self, command: Append | CreateStream | None, gap: int) -> None:
        if command is None:
            self.commit(gap)
            step = MACHINE.apply(self.view(), DeleteStream(REF), NOW)
            if isinstance(step, machine.Write):
                self.accepted = [a for a in self.accepted if a[0] not in step.forget]
                self.pending.append(step)
                self.commit(gap)
            return
        step = self._decide(command, gap)
        if isinstance(step, machine.Write):
            self._queued(step, command)

    def _decide(self, command: Append | CreateStream, gap: int) -> machine.Step:
        if isinstance(command, CreateStream):
            self.commit(gap)
            return MACHINE.apply(self.view(), command, NOW)
        step = MACHINE.apply(self.view(), command, NOW)
        if step is machine.SETTLE:
            self.commit(gap)
            step = MACHINE.apply(self.view(), command, NOW)
            assert step is not machine.SETTLE
        return step

    def _queued(self, write: machine.Write, command: Append | CreateStream) -> None:
        if isinstance(command, Append):
            if write.producer is not None:
                producer_id, state = write.producer
                key = (producer_id, state.epoch, state.last_seq)
                assert key not in self.accepted  # accepted at most once
                self.accepted.append(key)
                self.pending_producers[producer_id] = state
            if command.seq is not None:
                assert all(command.seq > seq for seq in self.seqs)  # Stream-Seq grows
                self.seqs.append(command.seq)
        else:
            self.seqs.clear()
            self.accepted = [a for a in self.accepted if a[0] not in write.forget]
        self.pending.append(write)
        self.pending_state = write.state


@settings(max_examples=300, deadline=None)
@given(COMMANDS)
def test_random_runs_keep_the_invariants(
    commands: list[tuple[Append | CreateStream | None, int]],
) -> None:
    log = _Log()
    log.run(_create(), 0)
    for command, gap in commands:
        log.run(command, gap)
    log.commit(0)
    # The partition's offsets only grow, so every tail a stream of this name had does too.
    assert all(a <= b for a, b in zip(log.tails, log.tails[1:], strict=False))


# -- publish (snapshots) ----------------------------------------------------------------------


def _publish(offset: int, size: int = 3) -> PublishSnapshot:
    return PublishSnapshot(REF, offset, "application/x-state", size, "snapshots/k", "00", NOW)


@pytest.mark.parametrize("offset", [10, 15, 20])
def test_a_snapshot_anywhere_in_the_history_moves_retention_and_writes_no_record(
    offset: int,
) -> None:
    write = _write(MACHINE.apply(machine.View(_meta()), _publish(offset), NOW))
    assert write.entries == ()
    assert write.state is not None
    assert write.state.retained_from == offset
    assert write.snapshot is not None
    assert (write.snapshot.offset, write.snapshot.size) == (offset, 3)
    assert write.snapshot.stream_created_at_ms == _meta().created_at_ms
    settled = machine.settle(write, [])
    assert settled is not None
    assert settled.next_offset == 20  # the tail does not move


@pytest.mark.parametrize(
    ("meta", "offset", "code"),
    [
        (None, 15, ErrorCode.STREAM_NOT_FOUND),
        (_meta(expires_at_ms=NOW), 15, ErrorCode.STREAM_NOT_FOUND),
        (_meta(soft_deleted=True), 15, ErrorCode.GONE),
        (_meta(), 21, ErrorCode.OFFSET_BEYOND_TAIL),
        (_meta(), 9, ErrorCode.INVALID_OFFSET),  # before the stream began: not its boundary
        (_meta(retained_from=16), 15, ErrorCode.OFFSET_GONE),
    ],
)
def test_publish_refusals(meta: StreamMeta | None, offset: int, code: ErrorCode) -> None:
    assert _refusal(MACHINE.apply(machine.View(meta), _publish(offset), NOW)) == code


def test_a_snapshot_over_the_limit_is_refused() -> None:
    limits = machine.Limits(max_snapshot_bytes=2)
    step = machine.Machine(limits).apply(machine.View(_meta()), _publish(15, size=3), NOW)
    assert _refusal(step) == ErrorCode.PAYLOAD_TOO_LARGE


def test_a_snapshot_at_the_retained_offset_again_replaces_it() -> None:
    view = machine.View(_meta(retained_from=15))
    assert _write(MACHINE.apply(view, _publish(15), NOW)).state is not None


def test_a_publish_past_its_commit_deadline_is_refused() -> None:
    step = MACHINE.apply(machine.View(_meta()), _publish(15), NOW + 1)
    assert _refusal(step) == ErrorCode.UNAVAILABLE


def test_publish_is_decided_on_committed_state() -> None:
    view = machine.View(_meta(), pending=True)
    assert MACHINE.apply(view, _publish(15), NOW) is machine.SETTLE


def test_reads_below_the_retained_offset_are_gone() -> None:
    meta = _meta(retained_from=15)
    for start in (BEGINNING, 10, 14):
        with pytest.raises(ProtocolError) as raised:
            check_readable(meta, start)
        assert raised.value.code == ErrorCode.OFFSET_GONE
        assert raised.value.headers["Stream-Earliest-Offset"] == encode(15)
    for start in (AT_TAIL, 15, 20):
        check_readable(meta, start)
    check_readable(_meta(), BEGINNING)


# -- forks of a retained source ------------------------------------------------------------

RETAINED = replace(SOURCE, retained_from=15)


def _pointer(meta: StreamMeta, offset: int = 15, published_at_ms: int = NOW) -> SnapshotPointer:
    return SnapshotPointer(
        meta.bucket_id, meta.stream_id, offset, "application/x-state", 3, "snapshots/k", "00",
        meta.created_at_ms, published_at_ms,
    )  # fmt: skip


def test_a_fork_of_a_retained_source_inherits_its_retention_and_snapshot() -> None:
    view = machine.View(None, source=RETAINED, source_snapshot=_pointer(RETAINED))
    write = _write(MACHINE.apply(replace(view, partition=9), _fork(17), NOW))
    assert write.state is not None
    assert write.state.retained_from == 15  # reads below answer 410, as the source's do
    assert write.state.inherited == (Segment("src", 10, 17),)
    assert write.snapshot is not None  # the same blob, now the fork's own visible snapshot
    assert (write.snapshot.stream_id, write.snapshot.object_key) == ("s", "snapshots/k")
    settled = machine.settle(write, [30])
    assert settled is not None
    assert write.snapshot.belongs_to(settled)
    with pytest.raises(ProtocolError) as raised:
        check_readable(settled, BEGINNING)
    assert raised.value.code == ErrorCode.OFFSET_GONE


def test_a_fork_below_its_sources_retention_is_gone() -> None:
    view = machine.View(None, source=RETAINED, source_snapshot=_pointer(RETAINED))
    for offset in (10, 14):
        assert (
            _refusal(MACHINE.apply(replace(view, partition=9), _fork(offset), NOW))
            == ErrorCode.OFFSET_GONE
        )
    assert _write(MACHINE.apply(replace(view, partition=9), _fork(15), NOW)).snapshot is not None


def test_a_fork_of_a_source_without_retention_copies_no_snapshot() -> None:
    write = _write(_forked(_fork(15)))
    assert write.snapshot is None
    assert write.state is not None
    assert write.state.retained_from is None


# -- retention floors ------------------------------------------------------------------------


def test_a_partitions_floor_is_the_least_any_stream_needs_once_snapshots_have_settled() -> None:
    alone = _meta(stream_id="a", partition=0, start_offset=10, retained_from=40)
    other = _meta(stream_id="b", partition=0, start_offset=20, next_offset=60)
    elsewhere = _meta(stream_id="c", partition=1, start_offset=5, retained_from=50)
    settled = NOW
    assert retention_floors([(alone, _pointer(alone, 40))], settled) == {0: 40}
    # a stream without a snapshot holds the partition back at its history's start
    assert retention_floors([(alone, _pointer(alone, 40)), (other, None)], settled) == {0: 20}
    # a snapshot younger than the grace period does not free anything yet
    assert retention_floors([(alone, _pointer(alone, 40, NOW + 1))], settled) == {0: 10}
    assert retention_floors([(elsewhere, _pointer(elsewhere, 50))], settled) == {1: 50}
    assert retention_floors([], settled) == {}


def test_a_fork_holds_its_sources_range_back_and_soft_deleted_streams_count() -> None:
    source = _meta(stream_id="src", partition=0, start_offset=10, retained_from=40)
    fork = _meta(stream_id="f", partition=0, start_offset=70, inherited=(Segment("src", 10, 30),))
    streams = [(source, _pointer(source, 40)), (fork, None)]
    assert retention_floors(streams, NOW) == {0: 10}
    gone = replace(source, soft_deleted=True)
    assert needed_from(gone, _pointer(gone, 40), NOW) == 40
    expired = _meta(stream_id="x", partition=0, start_offset=12, expires_at_ms=0)
    assert retention_floors([(source, _pointer(source, 40)), (expired, None)], NOW) == {0: 12}


# -- trims -----------------------------------------------------------------------------------


def test_a_trim_moves_the_earliest_offset_with_no_record_and_reads_below_are_gone() -> None:
    meta = _meta()  # history [10, 20)
    write = _write(MACHINE.apply(machine.View(meta), Trim(REF, 15), NOW))
    assert write.entries == ()
    trimmed = machine.settle(write, [])
    assert trimmed == meta.evolve(trimmed_to=15, trimmed_at_ms=NOW)
    assert (trimmed.earliest_offset, trimmed.next_offset) == (15, 20)
    for start in (BEGINNING, 10, 14):
        with pytest.raises(ProtocolError) as raised:
            check_readable(trimmed, start)
        assert raised.value.code == ErrorCode.OFFSET_GONE
        assert raised.value.headers["Stream-Earliest-Offset"] == encode(15)
        assert "trimmed" in raised.value.message
    for start in (AT_TAIL, 15, 20):
        check_readable(trimmed, start)


def test_a_trim_changes_the_streams_etag_and_an_untrimmed_stream_keeps_its_own() -> None:
    meta = _meta()
    trimmed = machine.settle(_write(MACHINE.apply(machine.View(meta), Trim(REF, 15), NOW)), [])
    assert trimmed is not None
    further = meta.evolve(trimmed_to=17, trimmed_at_ms=NOW)
    assert len({stream_etag(meta), stream_etag(trimmed), stream_etag(further)}) == 3
    assert stream_etag(meta) == range_etag(meta, meta.start_offset, meta.next_offset, False)


@pytest.mark.parametrize("before", [BEGINNING, 5, 10, 14, 15])
def test_a_trim_never_moves_back_and_answers_the_earliest_offset(before: int) -> None:
    trimmed = _meta(trimmed_to=15, trimmed_at_ms=1)
    reply = _done(MACHINE.apply(machine.View(trimmed), Trim(REF, before), NOW))
    assert reply.meta == trimmed


def test_a_trim_to_now_removes_everything_so_far() -> None:
    write = _write(MACHINE.apply(machine.View(_meta()), Trim(REF, AT_TAIL), NOW))
    assert write.state is not None
    assert write.state.earliest_offset == 20


@pytest.mark.parametrize(
    ("meta", "before", "code"),
    [
        (None, 15, ErrorCode.STREAM_NOT_FOUND),
        (_meta(expires_at_ms=NOW), 15, ErrorCode.STREAM_NOT_FOUND),
        (_meta(soft_deleted=True), 15, ErrorCode.GONE),
        (_meta(), 21, ErrorCode.TRIM_BEYOND_TAIL),
    ],
)
def test_trim_refusals(meta: StreamMeta | None, before: int, code: ErrorCode) -> None:
    assert _refusal(MACHINE.apply(machine.View(meta), Trim(REF, before), NOW)) == code


def test_a_trim_is_decided_on_committed_state() -> None:
    view = machine.View(_meta(), pending=True)
    assert MACHINE.apply(view, Trim(REF, 15), NOW) is machine.SETTLE


def test_a_trim_past_the_snapshot_hides_it_and_one_below_keeps_it() -> None:
    retained = _meta(retained_from=15)
    pointer = _pointer(retained)
    assert pointer.belongs_to(retained)
    assert _done(MACHINE.apply(machine.View(retained), Trim(REF, 12), NOW)).meta == retained
    past = machine.settle(_write(MACHINE.apply(machine.View(retained), Trim(REF, 18), NOW)), [])
    assert past is not None
    assert (past.earliest_offset, past.snapshot_offset) == (18, None)
    assert not pointer.belongs_to(past)
    assert _refusal(MACHINE.apply(machine.View(past), _publish(16), NOW)) == ErrorCode.OFFSET_GONE
    newer = _write(MACHINE.apply(machine.View(past), _publish(19), NOW)).state
    assert newer is not None
    assert (newer.earliest_offset, newer.snapshot_offset) == (19, 19)


def test_a_fork_of_a_trimmed_source_is_trimmed_alike_and_below_it_is_gone() -> None:
    trimmed = replace(SOURCE, trimmed_to=15, trimmed_at_ms=NOW - 5)
    view = machine.View(None, source=trimmed)
    assert (
        _refusal(MACHINE.apply(replace(view, partition=9), _fork(14), NOW)) == ErrorCode.OFFSET_GONE
    )
    write = _write(MACHINE.apply(replace(view, partition=9), _fork(17), NOW))
    assert write.snapshot is None
    assert write.state is not None
    assert (write.state.trimmed_to, write.state.trimmed_at_ms) == (15, NOW - 5)
    assert write.state.earliest_offset == 15


def test_a_trim_frees_storage_once_settled_and_a_fork_made_before_holds_its_range() -> None:
    trimmed = _meta(stream_id="a", partition=0, start_offset=10, trimmed_to=40, trimmed_at_ms=NOW)
    assert needed_from(trimmed, None, NOW) == 40
    assert needed_from(trimmed, None, NOW - 1) == 10  # not every instance follows it yet
    fork = _meta(stream_id="f", partition=0, start_offset=70, inherited=(Segment("a", 10, 30),))
    assert retention_floors([(trimmed, None), (fork, None)], NOW) == {0: 10}
    snapshotted = trimmed.evolve(retained_from=50)  # a later snapshot: the further one holds
    assert needed_from(snapshotted, _pointer(snapshotted, 50), NOW) == 50


def _trimmed_every(meta: StreamMeta, step_ms: int, steps: int, settle_ms: int) -> StreamMeta:
    """The stream trimmed one offset further every `step_ms`, `steps` times from NOW."""
    for index in range(1, steps + 1):
        step = machine.Machine(trim_settle_ms=settle_ms).apply(
            machine.View(meta), Trim(REF, 10 + index), NOW + index * step_ms
        )
        state = _write(step).state
        assert state is not None
        meta = state
    return meta


def test_trims_more_often_than_the_grace_period_still_free_storage_behind_it() -> None:
    # Trimmed every second, the grace period 10 s: the latest point never settles by itself.
    meta = _trimmed_every(_meta(next_offset=200), 1_000, 40, 10_000)
    last = NOW + 40 * 1_000
    assert meta.trimmed_to == 50
    settled_before = last - 10_000
    floor = needed_from(meta, None, settled_before)
    # Never a point trimmed after `settled_before` (some instance may not follow it yet) ...
    assert floor <= 10 + (settled_before - NOW) // 1_000
    # ... and at most two grace periods behind the latest.
    assert floor >= 10 + (last - 2 * 10_000 - NOW) // 1_000
    assert needed_from(meta, None, last) == 50  # once nothing moves, everything settles


def test_trims_spaced_wider_than_the_grace_period_settle_each_in_turn() -> None:
    meta = _trimmed_every(_meta(next_offset=200), 20_000, 3, 10_000)
    assert (meta.trimmed_to, meta.trim_settled_to, meta.trim_settling_to) == (13, 12, None)
    assert needed_from(meta, None, NOW + 60_000 - 10_000) == 13 - 1
    assert needed_from(meta, None, NOW + 60_000) == 13
