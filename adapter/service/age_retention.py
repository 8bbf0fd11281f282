"""Age retention: a background pass that trims the streams of each bucket with a `max_age_ms`
below their first message younger than that, through the same path as `POST {stream}/trim`.

Why trims and not Kafka's `retention.ms` on the bucket topic is in
docs/explanation/retention.md. Each instance passes over the partitions of the write slots it
owns, every `age_retention_interval_ms`. A stream's partition is the one holding its records:
of its bucket's topic, or for a fork of another bucket's stream of its source's topic (where
its offsets are, and whose slot writes its trims). For each partition it first notes its
streams' tails, then asks Kafka once (ListOffsets by time, as a read by time asks) for the
partition's first record written at or after `now - max_age_ms`: every record below that cut,
whatever its stream, was written earlier. Each stream noted is trimmed to the cut, or to its
noted tail when that is lower (a message committed after the note lies past it, so it is never
cut by this pass). A trim never moves back, so a stream already trimmed that far is passed
over without a write. When Kafka's oldest record is already younger than the cut's moment,
the cut lies in what Kafka freed: the cold tier, whose ranges tiered well before that moment
hold only older records (`age_cut`).

A stream whose cut or trim fails (the broker away, its slot moving to another instance) is
logged, counted (`durable_kafka_age_retention_failures_total`) and left for the next pass;
the other streams, and the buckets after it, still get theirs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeGuard

from adapter.log.reader import TimeFound
from adapter.protocol.commands import StreamRef, Trim
from adapter.protocol.errors import ProtocolError
from adapter.protocol.model import BucketMeta, StreamMeta
from adapter.service.background import RIDDEN_OUT
from adapter.service.interfaces import SlotWriting
from adapter.service.streams import StreamService
from adapter.service.time_lookups import CLOCK_SKEW_MS
from adapter.state.catalog import Catalog
from adapter.tier.manifest import Place, TierRange
from topology.slots import SlotMap

log = logging.getLogger(__name__)

STEP = 512  # streams noted between two turns of the event loop
PARALLEL_TRIMS = 32  # trims in flight at once: they share the slot's transactions

Home = tuple[str, int]  # (bucket whose topic holds the records, partition)


@dataclass(frozen=True)
class Noted:
    """A stream of the partition as the pass found it before asking Kafka."""

    stream_id: str
    tail: int
    earliest: int


def age_cut(found: TimeFound, ranges: Iterable[TierRange], moment_ms: int) -> int | None:
    """The offset below which every record of the partition was written before `moment_ms`,
    from Kafka's answer and the partition's tiered ranges; None when nothing is known to be.

    Kafka answers the first record it holds written at or after the moment. No such record:
    every record it holds is older (the caller bounds the cut by the tails it noted before
    asking). Its oldest record, with records freed below it: the cut may lie in what was
    freed, where only ranges tiered a clock skew before the moment are known to be older."""
    if found.offset is None:
        return _ALL
    if found.offset > found.earliest or found.earliest == 0:
        return found.offset
    older = [r.end for r in ranges if r.tiered_at_ms < moment_ms - CLOCK_SKEW_MS]
    return min(max(older), found.offset) if older else None


_ALL = 2**63 - 1  # every record: the streams' noted tails bound it


def trim_point(noted: Noted, cut: int) -> int | None:
    """Where the stream is trimmed to, if further than it is."""
    before = min(cut, noted.tail)
    return before if before > noted.earliest else None


class AgeRetention:
    def __init__(
        self,
        catalog: Catalog,
        streams: StreamService,
        writers: SlotWriting,
        slots: SlotMap,
        clock: Callable[[], int],
        interval_s: float,
        on_failed: Callable[[int], None] = lambda _streams: None,
    ) -> None:
        self.catalog = catalog
        self.streams = streams
        self.writers = writers
        self.slots = slots
        self.clock = clock
        self.interval_s = interval_s
        self.on_failed = on_failed  # with the number of streams a pass could not trim

    async def run(self) -> None:
        """A pass every interval until cancelled; a failed pass is logged and tried again."""
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                trimmed = await self.pass_once()
            except RIDDEN_OUT as error:
                log.warning("age retention failed, trying again later: %s", error)
                continue
            if trimmed:
                log.info("age retention trimmed %d streams", trimmed)

    async def pass_once(self) -> int:
        """Trim every stream of the owned partitions of buckets with age retention; the
        number of streams trimmed."""
        trimmed = 0
        for bucket_id in self.catalog.bucket_ids():
            bucket = self.catalog.bucket(bucket_id)
            if bucket is not None and bucket.retention_max_age_ms is not None:
                trimmed += await self._pass_bucket(bucket, bucket.retention_max_age_ms)
        return trimmed

    async def _pass_bucket(self, bucket: BucketMeta, max_age_ms: int) -> int:
        noted = await self._noted(bucket)
        moment = self.clock() - max_age_ms
        due: list[tuple[str, int]] = []
        for home, streams in noted.items():
            cut = await self._cut(home, moment, len(streams))
            if cut is not None:
                due += [(s.stream_id, p) for s in streams if (p := trim_point(s, cut)) is not None]
        return await self._trim(bucket.bucket_id, due)

    async def _cut(self, home: Home, moment_ms: int, streams: int) -> int | None:
        """The partition's cut, asked of the topic holding the records; None when it is not
        known (the `streams` noted there wait for the next pass)."""
        bucket = self.catalog.bucket(home[0])
        if bucket is None:  # deleted meanwhile: its streams, and the forks it housed, with it
            return None
        place = Place(bucket.topic, bucket.created_at_ms, home[1])
        try:
            found = await self.streams.reads.reader.held_since(bucket.topic, home[1], moment_ms)
        except RIDDEN_OUT as error:
            self._failed(streams, f"{bucket.topic}[{home[1]}]", error)
            return None
        return age_cut(found, self.catalog.tier.ranges(place), moment_ms)

    async def _noted(self, bucket: BucketMeta) -> dict[Home, list[Noted]]:
        """The live streams of the bucket whose records are in partitions of slots owned here,
        with their tails, by the partition holding their records."""
        noted: dict[Home, list[Noted]] = {}
        now = self.clock()
        for count, (meta, _pointer) in enumerate(self.catalog.streams_of(bucket.bucket_id)):
            if count % STEP == STEP - 1:
                await asyncio.sleep(0)
            home = (meta.data_bucket, meta.partition)
            if self._owned(home) and _trimmable(meta, now):
                entry = Noted(meta.stream_id, meta.next_offset, meta.earliest_offset)
                noted.setdefault(home, []).append(entry)
        return noted

    def _owned(self, home: Home) -> bool:
        """Whether this instance writes the partition's slot (a stream's trims go there)."""
        return self.writers.accepting(self.slots.of_stream(*home))

    async def _trim(self, bucket_id: str, due: Sequence[tuple[str, int]]) -> int:
        """Trim each stream to its point, `PARALLEL_TRIMS` at a time; a stream gone meanwhile
        is passed over, one whose trim could not be written is counted and left to the next
        pass."""
        trimmed = 0
        for start in range(0, len(due), PARALLEL_TRIMS):
            batch = due[start : start + PARALLEL_TRIMS]
            trims = (self.streams.trim(Trim(StreamRef(bucket_id, s), p)) for s, p in batch)
            results = await asyncio.gather(*trims, return_exceptions=True)
            for (stream_id, _point), result in zip(batch, results, strict=True):
                if isinstance(result, RIDDEN_OUT) or _retriable(result):
                    self._failed(1, f"{bucket_id}/{stream_id}", result)
                elif isinstance(result, BaseException) and not isinstance(result, ProtocolError):
                    raise result  # cancelled, or a bug: not to be taken for a broker away
                trimmed += isinstance(result, StreamMeta)
        return trimmed

    def _failed(self, streams: int, what: str, error: BaseException) -> None:
        log.warning("age retention of %s failed, trying again next pass: %s", what, error)
        self.on_failed(streams)


def _retriable(result: object) -> TypeGuard[ProtocolError]:
    """A refusal that says "not now" (503), unlike a stream gone meanwhile."""
    return isinstance(result, ProtocolError) and result.retriable


def _trimmable(meta: StreamMeta, now_ms: int) -> bool:
    """A stream clients can read: a soft-deleted one lives on for its forks alone, as is."""
    return not meta.soft_deleted and not meta.expired(now_ms)
