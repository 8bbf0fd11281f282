"""Cold reads fetch the header and then only the blocks they need (ranged reads of a real local
store, counted by the store), and return exactly what a whole-chunk read would."""

from __future__ import annotations

import functools
import random
from dataclasses import replace
from pathlib import Path

import pytest

from adapter.log.reader import ReadResult
from adapter.objects.base import ObjectStoreError
from adapter.objects.local import LocalObjectStore
from adapter.tier import chunks
from adapter.tier.chunks import BLOCK_BYTES, ColdMessage, decode, encode, layout
from adapter.tier.cold import HEAD_BYTES, ChunkCollected, ColdReader
from adapter.tier.manifest import TierChunk, TierRange

KEY = "tier/t/1/0/x/s.avro"


def _messages(count: int, size: int, seed: int = 7) -> list[ColdMessage]:
    rng = random.Random(seed)  # incompressible, so object bytes follow payload bytes
    return [
        ColdMessage(10 + 2 * i, "application/octet-stream", rng.randbytes(size))
        for i in range(count)
    ]


async def _stored(
    tmp_path: Path, messages: list[ColdMessage]
) -> tuple[LocalObjectStore, TierRange]:
    store = LocalObjectStore(tmp_path / "cold")
    data = encode("b", "s", 0, messages)
    await store.put(KEY, data)
    chunk = TierChunk(
        "s", KEY, messages[0].offset, messages[-1].offset, len(messages),
        sum(len(m.payload) for m in messages), len(data),
    )  # fmt: skip
    end = messages[-1].offset + 1
    return store, TierRange("b", "t", 1, 0, messages[0].offset, end, 0, (chunk,))


def test_a_large_chunk_has_an_index_of_blocks_each_readable_behind_the_header() -> None:
    messages = _messages(40, 32 * 1024)  # 1.25 MiB: five blocks
    data = encode("b", "s", 0, messages)
    assert encode("b", "s", 0, messages) == data  # a redone pass writes the same bytes
    assert decode(data) == messages
    shape = layout(data[:HEAD_BYTES])
    assert shape is not None
    assert len(shape.blocks) == -(-40 * 32 * 1024 // BLOCK_BYTES)
    assert shape.blocks[0].start == len(shape.header)
    assert shape.blocks[-1].end == len(data)
    again: list[ColdMessage] = []
    for block in shape.blocks:
        part = decode(shape.header + data[block.start : block.end])
        assert part[0].offset == block.first_offset
        again += part
    assert again == messages
    assert shape.block_at(0) == 0
    assert shape.block_at(messages[-1].offset) == len(shape.blocks) - 1


@pytest.mark.parametrize("cache_bytes", [0, 64 * 1024 * 1024])
async def test_a_read_from_the_middle_fetches_only_the_blocks_it_needs(
    tmp_path: Path, cache_bytes: int
) -> None:
    messages = _messages(256, 16 * 1024)  # 4 MiB, 16 blocks
    store, tier_range = await _stored(tmp_path, messages)
    reader = ColdReader(store, cache_bytes)
    middle = messages[128].offset
    result = await reader.read(tier_range, "s", middle, tier_range.end, 100 * 1024)
    expected = [m.payload for m in messages[128:134]]
    assert result == ReadResult(expected, messages[134].offset, False)
    object_bytes = tier_range.chunks[0].object_bytes
    assert store.fetched.ranged_gets == store.fetched.gets == 2  # the header, then one run
    assert store.fetched.size < HEAD_BYTES + 3 * BLOCK_BYTES < object_bytes // 4

    # Reading on to the end, read by read, gives every message once, in order.
    got, offset = list(expected), messages[134].offset
    while True:
        step = await reader.read(tier_range, "s", offset, tier_range.end, 300 * 1024, 0)
        got += step.messages
        offset = step.next_offset
        if step.complete:
            break
    assert got == [m.payload for m in messages[128:]]
    assert offset == tier_range.end


async def test_a_small_chunk_is_one_get_and_an_unindexed_one_is_read_whole(tmp_path: Path) -> None:
    messages = _messages(5, 100)
    store, tier_range = await _stored(tmp_path, messages)
    reader = ColdReader(store, 1024 * 1024)
    result = await reader.read(tier_range, "s", messages[2].offset, tier_range.end, 10**6)
    assert result.messages == [m.payload for m in messages[2:]]
    assert (store.fetched.gets, store.fetched.size) == (1, tier_range.chunks[0].object_bytes)

    # A chunk written before blocks had an index (one fastavro container, no metadata).
    big = _messages(100, 1024)
    legacy = chunks._container(chunks._rows("b", "s", 0, big), b"m" * 16, {})
    await store.put(KEY, legacy)
    chunk = tier_range.chunks[0]
    old = TierChunk("s", KEY, big[0].offset, big[-1].offset, 100, 100 * 1024, len(legacy))
    old_range = TierRange("b", "t", 1, 0, 0, big[-1].offset + 1, 0, (old,))
    fresh = ColdReader(store, 1024 * 1024)
    assert (await fresh.read(old_range, "s", 0, old_range.end, 10**7)).messages == [
        m.payload for m in big
    ]
    assert chunk.object_key == old.object_key


async def test_a_chunk_cut_short_inside_its_header_is_an_error_not_a_loop(tmp_path: Path) -> None:
    messages = _messages(40, 32 * 1024)
    store, tier_range = await _stored(tmp_path, messages)
    await store.put(KEY, encode("b", "s", 0, messages)[:20])  # the manifest says 1.25 MiB
    with pytest.raises(ObjectStoreError, match="cut short"):
        await ColdReader(store, 0).read(tier_range, "s", 0, tier_range.end, 10**6)


async def test_a_collected_chunk_is_gone_not_empty(tmp_path: Path) -> None:
    """A chunk the collector dropped stays named in its range: a read that reaches its
    offsets raises, where a stream without messages in the range reads as empty."""
    store, tier_range = await _stored(tmp_path, _messages(4, 100))
    (chunk,) = tier_range.chunks
    collected = replace(tier_range, chunks=(chunk.as_collected(),))
    assert collected.stored == ()
    reader = ColdReader(store, 1 << 20)
    with pytest.raises(ChunkCollected):
        await reader.read(collected, "s", chunk.first_offset, tier_range.end, 1 << 20)
    past = await reader.read(collected, "s", chunk.last_offset + 1, tier_range.end, 1 << 20)
    assert past == ReadResult([], tier_range.end, True)  # nothing of it at those offsets
    other = await reader.read(collected, "other", tier_range.start, tier_range.end, 1 << 20)
    assert other == ReadResult([], tier_range.end, True)


def _written_since(at_ms: int, message: ColdMessage) -> bool:
    return message.timestamp_ms >= at_ms


async def test_a_lookup_by_time_bisects_the_blocks_and_finds_the_exact_first_message(
    tmp_path: Path,
) -> None:
    messages = [replace(m, timestamp_ms=1000 + 10 * i) for i, m in enumerate(_messages(256, 16384))]
    store, tier_range = await _stored(tmp_path, messages)  # 16 blocks
    for index in (0, 1, 40, 100, 128, 255):
        at_ms = messages[index].timestamp_ms - 5  # between two messages' times
        reader = ColdReader(store, 64 * 1024 * 1024)
        gets, size = store.fetched.gets, store.fetched.size
        wanted = functools.partial(_written_since, at_ms)
        found = await reader.first_at(tier_range, "s", tier_range.start, tier_range.end, wanted)
        assert found == messages[index].offset
        assert store.fetched.gets - gets <= 1 + 4 + 1  # the header, log2(16) blocks, the last
        # Each GET one block: a probe next to a cached block does not read ahead.
        assert store.fetched.size - size <= HEAD_BYTES + 6 * (BLOCK_BYTES + 1024)
    late = await ColdReader(store, 0).first_at(
        tier_range, "s", 0, tier_range.end, lambda m: m.timestamp_ms > 10**6
    )
    assert late is None
    last = await ColdReader(store, 0).last_in(tier_range, "s", 0, messages[100].offset)
    assert last == messages[99]
