"""The tier worker: moves each owned partition's data beyond its hot window to cold chunks,
then frees that Kafka space.

Run on every instance for the partitions of the write slots it owns. One pass per partition:

1. measure the partition from where tiering stopped to its head (`tier/meter.py`) and find
   the cut: the last record boundary with `tier_after_bytes` behind the head and nothing
   younger than `tier_after_ms` before it;
2. read the committed records of [tiered_to, cut) (bounded per range), group the data records
   by key, write the slot's checkpoint with every stream the range holds
   (`SlotCheckpoints.flush`: each one's metadata then shows a tail at or past its records
   here, which other instances will no longer find in Kafka), and write one chunk object per
   stream, under keys of this attempt's own (a redone pass writes new objects:
   `tier/chunks.py`);
3. commit the range's manifest record with the slot's transactional producer (so a fenced
   former owner cannot), and put it in the index reads use;
4. only then DeleteRecords up to the range's end (`tier/freeing.py`: the one rule for where
   Kafka may free a partition), if the bucket is still the one the pass began with: the same
   `created_at_ms` in the catalog and the same Kafka topic id, checked right before (a bucket
   deleted and created again during the pass's awaits has a new topic of the same name).

Before that, a pass frees what no stream needs any more (`protocol/snapshots.py`
`retention_floors`): when every stream whose records the partition holds (forks reading older
ranges of their sources, forks of other buckets housed in its topic, soft-deleted and expired
streams included; not the bucket's forks of other buckets' streams, which live in their
source's topic: `Catalog.streams_in_topic`) starts at or past a point, because
snapshots moved their retention there at least a grace period ago, the records below it are
dropped without being tiered: an empty range (no chunks) up to that point is committed, like
any range, then DeleteRecords. Consecutive such ranges are one record (rewritten with a later
end), so the index does not grow with publishes.

A crash between any two steps leaves either the old state (Kafka still has everything; at most
unreferenced objects stay behind) or the new one (the range is readable from chunks), never a
hole; the next pass starts at the last committed range's end and frees what step 4 missed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from itertools import islice

from adapter.cluster.slot_writers import SlotWriters
from adapter.log.errors import LogUnavailable
from adapter.log.scanner import PartitionScanner, Scanned
from adapter.objects.base import ObjectStore
from adapter.protocol.model import BucketMeta, SnapshotPointer, StreamMeta
from adapter.protocol.snapshots import retention_floors
from adapter.service.background import RIDDEN_OUT
from adapter.service.snapshot_gc import windowed
from adapter.state.catalog import Catalog
from adapter.tier import chunks, manifest
from adapter.tier.chunks import ColdMessage
from adapter.tier.freeing import free_to, to_free
from adapter.tier.manifest import Place, TierChunk, TierRange
from adapter.tier.meter import Meter
from topology.admin import TopologyAdmin
from topology.errors import TopologyError
from topology.slots import SlotMap
from topology.wire import owner_of_key

log = logging.getLogger(__name__)

StreamKey = tuple[str, str]  # (bucket, stream)

FLOOR_STEP = 512  # streams judged between two turns of the event loop

SCAN_BYTES = 4 * 1024 * 1024  # per measuring read
RANGE_BYTES = 64 * 1024 * 1024  # of values per tiered range, at most (one record more)
RANGES_PER_PASS = 16  # per partition, so one backlog does not starve the others
MIN_RANGE_SHARE = 16  # a range holds at least 1/16 of the hot window
PARALLEL_PUTS = 8
MAX_BACKOFF = 32  # intervals
# What a pass may meet and try again later: the store or the broker away, a topic just deleted.
_RETRIED = RIDDEN_OUT


@dataclass(frozen=True)
class TierPolicy:
    after_bytes: int
    after_ms: int
    interval_s: float
    max_streams_per_range: int  # so a range's manifest record fits in one Kafka record
    # A range is committed this soon after its first put or not at all, so the collector
    # (`tier_gc.py`, half its grace period) never takes its objects for orphans.
    commit_within_ms: int
    # A snapshot's retention frees Kafka once it has been visible this long (every instance
    # has followed it, and a reader that took the older state has finished).
    retention_grace_ms: int


@dataclass(frozen=True)
class PartitionTier:
    """Where tiering of one partition stands, as the last pass of this instance saw it."""

    bucket_id: str
    partition: int
    log_start: int
    tiered_to: int | None
    hot_bytes: int
    lag_bytes: int  # bytes due to be tiered (past both hot windows) and not tiered yet


async def _nothing_to_write(_slot: int, _streams: list[StreamKey]) -> None:
    return None


class TierWorker:
    def __init__(
        self,
        catalog: Catalog,
        writers: SlotWriters,
        slots: SlotMap,
        scanner: PartitionScanner,
        admin: TopologyAdmin,
        store: ObjectStore,
        tier_topic: str,
        policy: TierPolicy,
        clock: Callable[[], int],
        on_pass: Callable[[TierWorker], None] = lambda _worker: None,
        before_free: Callable[[int, list[StreamKey]], Awaitable[None]] = _nothing_to_write,
    ) -> None:
        self.catalog = catalog
        self.writers = writers
        self.slots = slots
        self.scanner = scanner
        self.admin = admin
        self.store = store
        self.tier_topic = tier_topic
        self.policy = policy
        self.clock = clock
        self.last_error: str | None = None
        self.partitions: dict[Place, PartitionTier] = {}
        self.on_pass = on_pass  # after every pass, failed or not
        # A slot's checkpoint, with every stream whose records a range holds, written before
        # the range frees Kafka (`SlotCheckpoints.flush`): each stream's metadata then shows
        # every record of it freed.
        self.before_free = before_free
        self._meters: dict[Place, Meter] = {}
        self._topic_ids: dict[Place, str] = {}  # of the topic each partition's pass reads

    def lag_bytes(self) -> int:
        """Bytes due to be tiered and not tiered yet, over the partitions last passed."""
        return sum(tier.lag_bytes for tier in self.partitions.values())

    def hot_bytes(self) -> int:
        """Bytes held only in Kafka, over the partitions last passed."""
        return sum(tier.hot_bytes for tier in self.partitions.values())

    async def run(self) -> None:
        """A pass every interval until cancelled; a failed pass backs off (doubling the wait,
        up to 32 intervals) and is tried again. Kafka keeps everything meanwhile."""
        failures = 0
        while True:
            await asyncio.sleep(self.policy.interval_s * min(2**failures, MAX_BACKOFF))
            try:
                await self.tier_once()
            except _RETRIED as error:
                failures += 1
                self.last_error = str(error)
                log.warning("tiering failed (attempt %d), trying again later: %s", failures, error)
            else:
                failures, self.last_error = 0, None
            self.on_pass(self)

    async def tier_once(self) -> int:
        """One pass over every owned partition; the number of ranges committed."""
        committed = 0
        owned: set[Place] = set()
        failed: Exception | None = None
        for bucket_id in self.catalog.bucket_ids():
            bucket = self.catalog.bucket(bucket_id)
            floors = await self._floors(bucket_id)
            for partition in range(bucket.partitions if bucket else 0):
                if bucket is None or not self._owned(bucket_id, partition):
                    continue
                owned.add(Place(bucket.topic, bucket.created_at_ms, partition))
                try:
                    committed += await self.tier_partition(bucket, partition, floors.get(partition))
                except _RETRIED as error:  # the other partitions still get their turn
                    log.debug("tiering %s[%d] failed: %s", bucket.topic, partition, error)
                    failed = failed or error
        for place in set(self._meters) - owned:  # slots lost, buckets deleted
            self._meters.pop(place)
            self.partitions.pop(place, None)
        for place in set(self._topic_ids) - owned:
            self._topic_ids.pop(place)
        if failed is not None:
            raise failed
        return committed

    def _owned(self, bucket_id: str, partition: int) -> bool:
        return self.writers.accepting(self.slots.of_stream(bucket_id, partition))

    async def _floors(self, bucket_id: str) -> dict[int, int]:
        """Per partition of the bucket, where the records no stream needs end. Taken from the
        catalog of the partitions' owner, whose commits it applies in commit order: a stream
        not in it yet was committed after every one that is, so it starts past their floor."""
        settled_before = self.clock() - self.policy.retention_grace_ms
        # The streams whose records are in the bucket's topic: forks of other buckets living
        # in it count, and its own forks of other buckets' streams, whose offsets are of
        # their source's topic, do not (counted here they freed its own streams' records).
        return await floors_gently(self.catalog.streams_in_topic(bucket_id), settled_before)

    async def tier_partition(
        self, bucket: BucketMeta, partition: int, floor: int | None = None
    ) -> int:
        place = Place(bucket.topic, bucket.created_at_ms, partition)
        # Taken before anything is read: the topic this pass reads, and the only one it frees.
        self._topic_ids[place] = await self.admin.topic_id(bucket.topic)
        log_start, _ = await self.scanner.watermarks(bucket.topic, partition)
        tiered_to = self.catalog.tier.tiered_to(place)
        freeable = to_free(self.catalog.tier, place, log_start)
        if freeable is not None:
            # A crash (or a lost slot) between a range's commit and its DeleteRecords.
            log_start = await self._free(bucket.bucket_id, place, freeable)
        begin = log_start if tiered_to is None else max(tiered_to, log_start)
        if floor is not None and floor > begin:
            begin = log_start = await self._free_below(bucket, place, begin, floor)
        meter = await self._measured(place, begin)
        meter.tiered(begin)
        committed = 0
        cutoff = self.clock() - self.policy.after_ms
        while committed < RANGES_PER_PASS:
            cut = meter.cut(self.policy.after_bytes, cutoff)
            if cut is None or cut <= begin or not self._worth_a_range(meter, cutoff):
                break
            begin = await self._tier_range(bucket, place, begin, cut)
            log_start = begin
            meter.tiered(begin)
            committed += 1
        self.partitions[place] = PartitionTier(
            bucket.bucket_id,
            partition,
            log_start,
            self.catalog.tier.tiered_to(place),
            meter.hot_bytes,
            meter.due_bytes(self.policy.after_bytes, cutoff),
        )
        return committed

    def _worth_a_range(self, meter: Meter, cutoff: int) -> bool:
        """Ranges of at least 1/MIN_RANGE_SHARE of the hot window (or 64 MiB): the index,
        held in memory on every instance, grows with the data tiered, not with time."""
        least = min(RANGE_BYTES, self.policy.after_bytes // MIN_RANGE_SHARE)
        return meter.due_bytes(self.policy.after_bytes, cutoff) >= max(1, least)

    async def _measured(self, place: Place, begin: int) -> Meter:
        """The partition's meter, brought up to the head."""
        meter = self._meters.get(place)
        if meter is None or meter.position < begin:
            meter = self._meters[place] = Meter.of(begin, self.policy.after_bytes)
        while True:
            scan = await self.scanner.measure(
                place.topic, place.partition, meter.position, SCAN_BYTES
            )
            meter.observe(scan.records, scan.next_offset)
            if scan.at_end:
                return meter

    async def _free_below(self, bucket: BucketMeta, place: Place, begin: int, floor: int) -> int:
        """Drop [begin, floor), which no stream needs: an empty range (merged into the last
        one when that is empty too and ends at `begin`), committed, then DeleteRecords."""
        ranges = self.catalog.tier.ranges(place)
        last = ranges[-1] if ranges else None
        start = last.start if last is not None and last.end == begin and not last.chunks else begin
        tier_range = TierRange(
            bucket.bucket_id,
            place.topic,
            place.epoch_ms,
            place.partition,
            start,
            floor,
            self.clock(),
            (),
        )
        await self.before_free(self.slots.of_stream(bucket.bucket_id, place.partition), [])
        await self._commit_range(bucket.bucket_id, tier_range)
        log.info("freed %s[%d] below %d: no stream needs it", place.topic, place.partition, floor)
        return floor

    async def _commit_range(self, bucket_id: str, tier_range: TierRange) -> None:
        """Commit a range's record with the slot's producer, index it, then free Kafka."""
        entry = (self.tier_topic, tier_range.key, manifest.encode(tier_range))
        slot = self.slots.of_stream(bucket_id, tier_range.partition)
        await self.writers.submit(slot, [], lambda _offsets: [entry])
        self.catalog.tier.put(tier_range)
        freeable = free_to(self.catalog.tier, tier_range.place)
        if freeable is not None:  # the range's end, unless an earlier range's reaches further
            await self._free(bucket_id, tier_range.place, freeable)

    async def _free(self, bucket_id: str, place: Place, before: int) -> int:
        """DeleteRecords below `before`, only if the partition is still the one the pass read
        (checked right before): a bucket deleted and created again during the pass's awaits
        has a new topic of the same name, whose offsets say nothing of what was tiered."""
        bucket = self.catalog.bucket(bucket_id)
        same = bucket is not None and bucket.created_at_ms == place.epoch_ms
        if not same or await self.admin.topic_id(place.topic) != self._topic_ids.get(place):
            raise TopologyError(
                f"bucket {bucket_id!r} was deleted (and perhaps created again) during a tier "
                f"pass: {place.topic}[{place.partition}] is not freed by it"
            )
        return await self.admin.delete_records(place.topic, place.partition, before)

    async def _tier_range(self, bucket: BucketMeta, place: Place, begin: int, cut: int) -> int:
        """Tier [begin, cut) or a bounded first part of it; return where it ended."""
        scan = await self.scanner.scan(place.topic, place.partition, begin, cut, RANGE_BYTES)
        end, groups = _grouped(scan.records, scan.next_offset, self.policy.max_streams_per_range)
        streams = [owner_of_key(bucket.bucket_id, record_id) for record_id in groups]
        await self.before_free(self.slots.of_stream(bucket.bucket_id, place.partition), streams)
        started = self.clock()
        # The key names the window, so every instance's collector waits for it (`windowed`).
        attempt = windowed(chunks.new_attempt(), self.policy.commit_within_ms)
        written = await self._write_chunks(bucket.bucket_id, place, (begin, end, attempt), groups)
        if self.clock() - started > self.policy.commit_within_ms:
            raise LogUnavailable(f"tiering {place.topic}[{place.partition}] took too long")
        tier_range = TierRange(
            bucket.bucket_id,
            place.topic,
            place.epoch_ms,
            place.partition,
            begin,
            end,
            self.clock(),
            tuple(written),
        )
        await self._commit_range(bucket.bucket_id, tier_range)
        log.info(
            "tiered %s[%d] %d..%d: %d chunks",
            place.topic,
            place.partition,
            begin,
            end,
            len(written),
        )
        return end

    async def _write_chunks(
        self,
        bucket_id: str,
        place: Place,
        attempt: tuple[int, int, str],  # the range's start and end, and the attempt's id
        groups: dict[str, list[ColdMessage]],
    ) -> list[TierChunk]:
        gate = asyncio.Semaphore(PARALLEL_PUTS)
        begin, end, attempt_id = attempt

        async def put(stream_id: str, messages: list[ColdMessage]) -> TierChunk:
            key = chunks.object_key(
                place.topic, place.epoch_ms, place.partition, begin, end, stream_id, attempt_id
            )
            async with gate:
                # In a worker thread: deflating a range (up to 64 MiB) on the event loop held
                # appends for seconds (bench/tier_catchup.py: append p99 x10 while tiering).
                data = await asyncio.to_thread(
                    chunks.encode, bucket_id, stream_id, place.partition, messages
                )
                await self.store.put(key, data)
            return TierChunk(
                stream_id,
                key,
                messages[0].offset,
                messages[-1].offset,
                len(messages),
                sum(len(m.payload) for m in messages),
                len(data),
            )

        return list(await asyncio.gather(*(put(s, m) for s, m in groups.items())))


def _grouped(
    records: list[Scanned], end: int, max_streams: int
) -> tuple[int, dict[str, list[ColdMessage]]]:
    """(where the range ends, each stream's data records below it). The range ends early
    rather than hold more than `max_streams` streams. Keys that are no stream id (not UTF-8,
    empty: records no reader asks for) are left out."""
    groups: dict[str, list[ColdMessage]] = {}
    for record in records:
        stream_id = _stream_id(record.key)
        if record.control or stream_id is None:
            continue
        if stream_id not in groups and len(groups) >= max_streams:
            return record.offset, groups
        groups.setdefault(stream_id, []).append(
            ColdMessage(
                record.offset,
                record.content_type,
                record.value,
                record.timestamp_ms,
                record.producer,
            )
        )
    return end, groups


def _stream_id(key: bytes) -> str | None:
    try:
        return key.decode() or None
    except UnicodeDecodeError:
        return None


async def floors_gently(
    streams: Iterable[tuple[StreamMeta, SnapshotPointer | None]], settled_before_ms: int
) -> dict[int, int]:
    """`retention_floors` over a scan of the catalog, `FLOOR_STEP` streams at a time with the
    event loop's other work in between (at ≈ 10 µs a stream, a bucket of 100,000 streams in
    one go stalled every request for a second or more, every pass).

    Streams that change between two steps are judged as they are when reached, which is as
    safe as a scan taken at once and followed by the awaits of the pass: `settled_before_ms`
    is fixed before the scan, so a stream's need only falls with a newer snapshot (not
    settled yet: its history's start counts); a deleted stream needs nothing; and a stream
    created meanwhile, missed or not, was committed after those scanned before it, so it
    starts past their floor, as one created just after a scan at once would."""
    floors: dict[int, int] = {}
    scan = iter(streams)
    while step := list(islice(scan, FLOOR_STEP)):
        for partition, floor in retention_floors(step, settled_before_ms).items():
            floors[partition] = min(floors.get(partition, floor), floor)
        await asyncio.sleep(0)
    return floors
