"""A stream written by another instance, brought to its tail as of now from its own partition:
what an instance that does not own the stream's write slot decides at the stream's tail from.

The catalog's state of the stream (its last metadata record) may lag its data: the owner
writes every append's records to the stream's partition, and the metadata only later or never
(a checkpoint every few seconds). So before a read here says it reached the tail, the stream
is carried forward (`protocol/stream_log.carry_forward`) from its catalog state over its
committed records up to the partition's end as asked after the read began
(`PartitionEnds.written`), and the catalog takes the result: every append acknowledged before
the read is then in it. Records that show the stream deleted or created anew are metadata, not
a tail: the caller asks the meta topic instead, as when records after the tail known here were
freed from the partition already (tiered, or past retention).

A scan is bounded: past `max_bytes` of the partition (all streams' records) without reaching
the end asked, LogUnavailable naming the setting, never a tail short of it.
"""

from __future__ import annotations

from collections.abc import Callable

from adapter.log.errors import BelowLogStart, LogUnavailable
from adapter.log.scanner import PartitionScanner
from adapter.protocol.model import StreamMeta
from adapter.protocol.stream_log import LoggedRecord, StreamState, carry_forward
from adapter.state.catalog import Catalog, ahead_of, with_tail_of
from adapter.state.partition_ends import PartitionEnds
from adapter.state.stream_recovery import SCAN_BYTES, sort_out, stream_key

StreamKey = tuple[str, str]
MAX_REMEMBERED = 65_536  # streams whose last scan is remembered; past this the table starts again


class DataTails:
    def __init__(
        self,
        catalog: Catalog,
        ends: PartitionEnds,
        scanner: PartitionScanner,
        max_bytes: int,
        on_moved: Callable[[StreamKey], None],
    ) -> None:
        self.catalog = catalog
        self.ends = ends
        self.scanner = scanner
        self.max_bytes = max_bytes  # read_scan_bytes
        self.on_moved = on_moved  # the stream's tail (or closure) moved here: wake its readers
        # Per stream: (its tail, how far its partition was scanned with nothing of it past
        # that tail). A partition's end is past every tail (a commit marker at least): without
        # this, each read at an idle stream's tail would scan that marker again.
        self._scanned: dict[tuple[str, str, int], tuple[int, int]] = {}  # by incarnation

    async def close(self) -> None:
        await self.ends.close()
        await self.scanner.close()

    async def caught_up(
        self, topic: str, meta: StreamMeta, end: int | None = None, followed: bool = False
    ) -> bool:
        """Carry the stream (`meta`, the catalog's) forward over its committed records below
        `end` (None: the partition's end asked now) into the catalog. False when its records
        show it deleted or created anew, or lie below the partition's log start;
        LogUnavailable when the end cannot be reached in time or within `max_bytes` (what
        was scanned is kept: the next call goes on from there). `followed` as
        `caught_up_together` takes it."""
        if end is None:
            end = await self.ends.written(topic, meta.partition)
        left = await self._carried(topic, meta.partition, [meta], followed, end)
        return left == []

    async def caught_up_together(
        self, topic: str, partition: int, metas: list[StreamMeta], followed: bool = False
    ) -> bool:
        """`caught_up` for many streams of one partition (a page of a bucket's listing), by
        one scan from the lowest point any of them was not scanned past yet: what each
        stream's records show is put in the catalog (a stream whose records show it deleted
        or made anew is left as it is). False when records after a tail known here were
        freed: the metadata says more.

        `followed`: the tails are the meta topic's followed to now, so none lies below a
        record of its stream Kafka freed (the owner checkpoints a stream first): the scan
        starts no lower than the partition's log start. A quiet stream's tail lies far below
        it, other streams' records freed past it; from that tail no scan could start."""
        end = await self.ends.written(topic, partition)
        return await self._carried(topic, partition, metas, followed, end) is not None

    async def _carried(
        self, topic: str, partition: int, metas: list[StreamMeta], followed: bool, end: int
    ) -> list[StreamMeta] | None:
        """The streams carried forward to `end` as `caught_up_together` says; those whose
        records show them deleted or made anew are returned, None when the scan would start
        below the log start; LogUnavailable, after what was scanned is kept, when `max_bytes`
        ran out short of `end`."""
        behind = {
            stream_key(StreamState(meta)): meta for meta in metas if not self._known_to(meta, end)
        }
        if not behind:
            return []
        floor = await self._floor(topic, partition, followed)
        starts = {key: self._scanned_from(meta) for key, meta in behind.items()}
        try:
            found, reached = await self._scanned_for(topic, partition, starts, end, floor)
        except BelowLogStart:
            return None
        left: list[StreamMeta] = []
        for key, meta in behind.items():
            state = StreamState(meta, self.catalog.producer_states(meta.bucket_id, meta.stream_id))
            carried = carry_forward(state, found[key])
            if carried is None:
                left.append(meta)
                continue
            self._apply(meta, carried)
            self._remember(_incarnation(meta), carried.meta.next_offset, reached)
        if reached < end:
            what = ", ".join(f"{m.bucket_id}/{m.stream_id}" for m in behind.values())
            raise LogUnavailable(
                f"{what}: more than read_scan_bytes ({self.max_bytes}) of its partition lie "
                f"between the tail known here and the partition's end ({end}); scanned to "
                f"{reached}, retry"
            )
        return left

    def _known_to(self, meta: StreamMeta, end: int) -> bool:
        """Whether nothing of the stream's lies past its tail below `end`, as last scanned."""
        return end <= self._scanned_from(meta)

    def _scanned_from(self, meta: StreamMeta) -> int:
        """Where a scan for the stream starts: its tail, or past it as far as its partition
        was scanned already with nothing of it found there."""
        tail, scanned = self._scanned.get(_incarnation(meta), (-1, meta.next_offset))
        return scanned if tail == meta.next_offset else meta.next_offset

    async def _floor(self, topic: str, partition: int, followed: bool) -> int:
        """Where a scan may start at the lowest: the partition's log start for tails followed
        to now, else 0 (a scan below the log start then says the metadata knows more)."""
        return (await self.scanner.watermarks(topic, partition))[0] if followed else 0

    async def _scanned_for(
        self, topic: str, partition: int, starts: dict[bytes, int], end: int, floor: int
    ) -> tuple[dict[bytes, list[LoggedRecord]], int]:
        """Each stream's (by record key) committed records from where its scan starts
        (`starts`) up to `end`, and where the scan stopped: one scan from the lowest start
        (`floor` at the lowest), stopped short of `end` once `max_bytes` were read."""
        found: dict[bytes, list[LoggedRecord]] = {key: [] for key in starts}
        position = max(floor, min(starts.values()))
        read = 0
        while position < end and read < self.max_bytes:
            budget = min(SCAN_BYTES, self.max_bytes - read)
            scan = await self.scanner.scan_headed(topic, partition, position, budget, end)
            sort_out(scan.records, found, starts)
            position, read = scan.next_offset, read + max(scan.size, 1)
        return found, position

    def _remember(self, key: tuple[str, str, int], tail: int, scanned: int) -> None:
        if len(self._scanned) >= MAX_REMEMBERED:
            self._scanned.clear()
        known = self._scanned.get(key)
        if known is None or known[0] != tail or known[1] < scanned:
            self._scanned[key] = (tail, scanned)

    def _apply(self, known: StreamMeta, carried: StreamState) -> None:
        """The carried state into the catalog, unless the stream changed meanwhile into
        another incarnation; its readers told when its tail or closure moved. The producer
        states its records moved go in with the tail: a new owner of the stream's slot carries
        it forward from the catalog's tail, so states left behind it would never be seen again
        (a retry then refused as a sequence gap). The stream is then ahead of its state record
        (`state/unrecorded.py`) until its owner's checkpoint is followed here."""
        key = (known.bucket_id, known.stream_id)
        current = self.catalog.stream(*key)
        if current is None or current.created_at_ms != known.created_at_ms:
            return
        tail = carried.meta
        if (tail.next_offset, tail.closed) <= (current.next_offset, current.closed):
            return
        held = self.catalog.producer_states(*key)
        for producer_id, record in carried.producers.items():
            if ahead_of(record, held.get(producer_id)):
                self.catalog.put_producer(record)
        self.catalog.put_stream(with_tail_of(current, tail))
        self.catalog.unrecorded.moved(key)  # no state record shows it: a takeover here writes it
        self.on_moved(key)


def _incarnation(meta: StreamMeta) -> tuple[str, str, int]:
    return meta.bucket_id, meta.stream_id, meta.created_at_ms
