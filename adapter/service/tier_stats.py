"""The operator's view of the cold tier: per bucket partition, what is in Kafka and what is cold
(Ursula's `hot-cold-stats` is the model). Read from Kafka alone, so any machine can ask."""

from __future__ import annotations

from dataclasses import dataclass

from adapter.log.scanner import PartitionScanner
from adapter.state.catalog import Catalog
from adapter.tier.manifest import Place

SCAN_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class PartitionStats:
    bucket_id: str
    partition: int
    log_start: int  # Kafka's log start offset: below it, data is only in the cold tier
    high_watermark: int
    tiered_to: int | None  # end of the last tiered range
    ranges: int
    chunks: int
    cold_bytes: int  # message bytes in chunks
    cold_object_bytes: int  # bytes of the chunk objects (deflated Avro)
    hot_bytes: int  # message bytes (all records' values) still in Kafka


async def tier_stats(catalog: Catalog, scanner: PartitionScanner) -> list[PartitionStats]:
    """Every partition of every bucket; measuring hot bytes reads each partition's Kafka part."""
    found = []
    for bucket_id in catalog.bucket_ids():
        bucket = catalog.bucket(bucket_id)
        for partition in range(bucket.partitions if bucket else 0):
            if bucket is None:
                continue
            place = Place(bucket.topic, bucket.created_at_ms, partition)
            ranges = catalog.tier.ranges(place)
            chunks = [chunk for r in ranges for chunk in r.stored]
            low, high = await scanner.watermarks(bucket.topic, partition)
            found.append(
                PartitionStats(
                    bucket_id,
                    partition,
                    low,
                    high,
                    catalog.tier.tiered_to(place),
                    len(ranges),
                    len(chunks),
                    sum(chunk.payload_bytes for chunk in chunks),
                    sum(chunk.object_bytes for chunk in chunks),
                    await _hot_bytes(scanner, bucket.topic, partition, low),
                )
            )
    return found


async def _hot_bytes(scanner: PartitionScanner, topic: str, partition: int, start: int) -> int:
    total, position = 0, start
    while True:
        scan = await scanner.measure(topic, partition, position, SCAN_BYTES)
        total += sum(size for _, size, _ in scan.records)
        position = scan.next_offset
        if scan.at_end:
            return total
