"""The hot tail cache: complete ranges only, bounded bytes, oldest-written streams dropped."""

from __future__ import annotations

from adapter.log.hot_cache import TRACE_COST, HotCache
from adapter.log.reader import Budget, ReadResult


def test_serves_complete_ranges_only() -> None:
    cache = HotCache(1024)
    cache.record("s", since=10, end=15, offsets=[11, 14], payloads=[b"a", b"b"])
    cache.record("s", since=15, end=21, offsets=[20], payloads=[b"c"])
    assert cache.read("s", 10, 21, 100) == ReadResult([b"a", b"b", b"c"], 21, True)
    assert cache.read("s", 12, 21, 100) == ReadResult([b"b", b"c"], 21, True)
    assert cache.read("s", 15, 21, 100) == ReadResult([b"c"], 21, True)
    assert cache.read("s", 21, 21, 100) == ReadResult([], 21, True)
    assert cache.read("s", 9, 21, 100) is None  # before what the cache is sure of
    assert cache.read("other", 0, 5, 100) is None
    assert cache.read("s", 15, 30, 100) is None  # past the tail it knows


def test_a_commit_it_did_not_see_restarts_the_stream() -> None:
    cache = HotCache(1024)
    cache.record("s", since=0, end=2, offsets=[1], payloads=[b"a"])
    cache.record("s", since=5, end=7, offsets=[6], payloads=[b"b"])  # 2..5 went elsewhere
    assert cache.read("s", 0, 7, 100) is None
    assert cache.read("s", 5, 7, 100) == ReadResult([b"b"], 7, True)
    assert cache.size == 1


def test_respects_the_chunk_size() -> None:
    cache = HotCache(1024)
    cache.record("s", since=0, end=6, offsets=[1, 3, 5], payloads=[b"aaaa", b"bbbb", b"cccc"])
    assert cache.read("s", 0, 6, 9) == ReadResult([b"aaaa", b"bbbb"], 5, False)
    assert cache.read("s", 5, 6, 9) == ReadResult([b"cccc"], 6, True)
    assert cache.read("s", 0, 6, 1) == ReadResult([b"aaaa"], 3, False)  # one message at least


def test_budget_drops_the_streams_written_longest_ago() -> None:
    cache = HotCache(10)
    cache.record("old", since=0, end=2, offsets=[1], payloads=[b"12345"])
    cache.record("new", since=0, end=2, offsets=[1], payloads=[b"12345"])
    assert cache.size == 10
    cache.record("old", since=2, end=4, offsets=[3], payloads=[b"x"])  # written again: newest
    assert cache.read("new", 0, 2, 100) is None
    assert cache.read("old", 0, 4, 100) == ReadResult([b"12345", b"x"], 4, True)
    assert cache.size == 6
    cache.forget("old")
    assert cache.size == 0


def test_at_most_max_streams_tails_are_kept_even_empty_ones() -> None:
    """A stream created without data has an empty tail: it costs memory, not bytes."""
    cache = HotCache(1024, max_streams=2)
    for key in ("a", "b", "c"):
        cache.record(key, since=0, end=0, offsets=[], payloads=[])
    assert cache.read("a", 0, 0, 100) is None
    assert cache.read("b", 0, 0, 100) == ReadResult([], 0, True)
    assert cache.read("c", 0, 0, 100) == ReadResult([], 0, True)


def test_a_budget_bounds_bytes_and_messages_but_takes_one_message_at_least() -> None:
    cache = HotCache(1024)
    cache.record("s", since=0, end=6, offsets=[1, 3, 5], payloads=[b"aaaa", b"bbbb", b"cccc"])
    assert cache.read("s", 0, 6, 100, Budget(messages=2)) == ReadResult(
        [b"aaaa", b"bbbb"], 5, False
    )
    assert cache.read("s", 0, 6, 100, Budget(bytes=7)) == ReadResult([b"aaaa"], 3, False)
    assert cache.read("s", 0, 6, 100, Budget(bytes=1)) == ReadResult([b"aaaa"], 3, False)
    # A later piece of an answer that is full already takes nothing.
    assert cache.read("s", 0, 6, 100, Budget(messages=0, empty=False)) == ReadResult([], 1, False)
    assert cache.read("s", 5, 6, 100, Budget(messages=1)) == ReadResult([b"cccc"], 6, True)


def test_first_offset_finds_the_streams_next_message_in_a_held_range() -> None:
    cache = HotCache(1024)
    cache.record("s", since=10, end=21, offsets=[11, 14, 20], payloads=[b"a", b"b", b"c"])
    assert cache.first_offset("s", 10, 21) == 11
    assert cache.first_offset("s", 12, 21) == 14
    assert cache.first_offset("s", 15, 18) == 18  # none in the range: its end
    assert cache.first_offset("s", 9, 21) is None  # not all held
    assert cache.first_offset("other", 0, 1) is None


def test_a_read_names_the_trace_contexts_of_the_messages_it_holds_once_each() -> None:
    cache = HotCache(4096)
    cache.record("s", since=0, end=3, offsets=[0, 1, 2], payloads=[b"a", b"b", b"c"], trace=b"t1")
    cache.record("s", since=3, end=4, offsets=[3], payloads=[b"d"])  # written with tracing off
    cache.record("s", since=4, end=6, offsets=[5], payloads=[b"e"], trace=b"t2")
    assert cache.read("s", 0, 6, 100) == ReadResult(
        [b"a", b"b", b"c", b"d", b"e"], 6, True, 0, [b"t1", b"t2"]
    )
    assert cache.read("s", 3, 5, 100) == ReadResult([b"d"], 5, True)
    bounded = cache.read("s", 0, 6, 2)  # only the messages it returns
    assert bounded is not None
    assert bounded.traces == [b"t1"]
    assert cache.size == 5 + 4 * TRACE_COST  # the contexts count against the budget
