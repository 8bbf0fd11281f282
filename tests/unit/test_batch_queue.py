"""A slot's queue: transaction caps, queue bounds and the deadline, exactly."""

from __future__ import annotations

from adapter.log import batch_queue
from adapter.log.batch_queue import Caps, Policy, Size, SlotQueue

SMALL = Policy(
    transaction=Caps(batches=3, records=10, bytes=1000),
    queue=Caps(batches=5, records=20, bytes=2000),
    deadline_s=2.0,
)


def _queue(*sizes: Size) -> SlotQueue[str]:
    queue = SlotQueue[str](SMALL)
    for index, size in enumerate(sizes):
        assert queue.offer(f"b{index}", size, now=0.0)
    return queue


def test_a_transaction_takes_batches_in_order_while_they_fit_its_caps() -> None:
    queue = _queue(Size(4, 100), Size(4, 100), Size(4, 100))
    assert queue.take(now=0.0).batches == ["b0", "b1"]  # a third would make 12 records
    assert queue.take(now=0.0).batches == ["b2"]
    assert len(queue) == 0


def test_a_later_smaller_batch_never_overtakes_one_that_does_not_fit() -> None:
    queue = _queue(Size(2, 900), Size(1, 200), Size(1, 10))
    assert queue.take(now=0.0).batches == ["b0"]  # b1 passes the bytes cap; b2 waits its turn
    assert queue.take(now=0.0).batches == ["b1", "b2"]


def test_the_batch_count_is_capped_too() -> None:
    queue = _queue(*[Size(1, 1)] * 5)
    assert queue.take(now=0.0).batches == ["b0", "b1", "b2"]


def test_a_first_batch_over_a_cap_goes_alone() -> None:
    queue = SlotQueue[str](SMALL)
    assert queue.offer("huge", Size(50, 5000), now=0.0)  # an empty queue takes any batch
    assert queue.offer("next", Size(1, 1), now=0.0) is False  # past the queue's bounds
    assert queue.take(now=0.0).batches == ["huge"]
    assert queue.offer("next", Size(1, 1), now=0.0)
    assert queue.take(now=0.0).batches == ["next"]


def test_a_full_queue_refuses_at_once_by_batches_records_or_bytes() -> None:
    by_batches = _queue(*[Size(1, 1)] * 5)
    assert not by_batches.offer("x", Size(1, 1), now=0.0)
    by_records = _queue(Size(15, 1))
    assert not by_records.offer("x", Size(6, 1), now=0.0)
    assert by_records.offer("x", Size(5, 1), now=0.0)
    by_bytes = _queue(Size(1, 1500))
    assert not by_bytes.offer("x", Size(1, 501), now=0.0)
    assert by_bytes.size == Size(1, 1500)


def test_taking_frees_room_in_the_queue() -> None:
    queue = _queue(*[Size(1, 1)] * 5)
    queue.take(now=0.0)
    assert queue.size == Size(2, 2)
    assert queue.offer("x", Size(1, 1), now=0.0)


def test_batches_past_the_deadline_are_taken_out_unwritten() -> None:
    queue = SlotQueue[str](SMALL)
    queue.offer("old", Size(1, 1), now=0.0)
    queue.offer("young", Size(1, 1), now=1.5)
    assert queue.expire(now=2.0) == []  # exactly the deadline: still in time
    taken = queue.take(now=2.5)
    assert (taken.expired, taken.batches) == (["old"], ["young"])
    assert queue.size == Size(0, 0)


def test_expiry_between_transactions() -> None:
    queue = SlotQueue[str](SMALL)
    queue.offer("a", Size(1, 1), now=0.0)
    queue.offer("b", Size(1, 1), now=1.0)
    assert queue.expire(now=2.5) == ["a"]
    assert len(queue) == 1
    assert queue.clear() == ["b"]
    assert queue.size == Size(0, 0)


def test_the_next_deadline_is_the_oldest_waiting_batchs() -> None:
    queue = SlotQueue[str](SMALL)
    assert queue.next_deadline() is None
    queue.offer("a", Size(1, 1), now=1.0)
    queue.offer("b", Size(1, 1), now=1.5)
    assert queue.next_deadline() == 3.0
    assert queue.expire(now=3.1) == ["a"]
    assert queue.next_deadline() == 3.5
    queue.take(now=3.2)
    assert queue.next_deadline() is None


def test_a_batch_counts_its_records_with_room_for_its_state_records() -> None:
    size = batch_queue.size_of([(b"key", b"value", 10), (b"k", b"", 0)])
    overhead = batch_queue.RECORD_OVERHEAD
    assert size == Size(
        2 + batch_queue.STATE_RECORDS_PER_BATCH,
        3 + 5 + 10 + 1 + 2 * overhead + batch_queue.STATE_BYTES_PER_BATCH,
    )


def test_no_transaction_overflows_librdkafkas_queue() -> None:
    """A transaction holds at most its caps, or one batch over them: the largest a request
    makes (max_append_messages at most 50000, each a record with key, headers, overhead)."""
    max_message_bytes = 8 << 20
    bounds = batch_queue.policy(max_message_bytes, timeout_s=10)
    largest_records = 50_000 + 2 + batch_queue.STATE_RECORDS_PER_BATCH
    largest_bytes = max_message_bytes + largest_records * (122 + 256 + batch_queue.RECORD_OVERHEAD)
    assert max(bounds.transaction.records, largest_records) < batch_queue.QUEUE_MESSAGES
    assert max(bounds.transaction.bytes, largest_bytes) < bounds.queue_kbytes * 1024
    assert bounds.transaction.records * 2 == batch_queue.QUEUE_MESSAGES  # half: room to spare
    assert bounds.deadline_s == 10
