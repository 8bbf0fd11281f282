"""The streams of one partition rebuilt from earlier states of theirs and a scan of the records
after them: what a write slot's new owner does with a checkpoint (`protocol/stream_log.py`).

The scan starts at the lowest tail among the states given (every record of those streams below
it is in their states) and reads the partition's committed records to its end; each stream
takes its own (by record key: `topology/wire.housed_key`) from its own tail on, others' are
passed over (below its tail a stream's key may also name an incarnation of it that ended). A stream
whose records show it deleted or created anew is returned as None: its metadata record, not
the log, says what it is now.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from adapter.log.scanner import Headed, PartitionScanner
from adapter.protocol.stream_log import LoggedRecord, StreamState, carry_forward, logged_record
from topology.wire import housed_key

SCAN_BYTES = 4 << 20  # read per round trip to the scanner's thread


def stream_key(state: StreamState) -> bytes:
    """The key of the stream's records in its partition."""
    meta = state.meta
    return housed_key(meta.bucket_id, meta.stream_id, meta.home).encode()


async def recover_partition(
    scanner: PartitionScanner, topic: str, partition: int, states: Mapping[bytes, StreamState]
) -> dict[bytes, StreamState | None]:
    """Each stream of `states` (by record key; all of `topic`'s `partition`) carried forward
    over its committed records from its state's tail to the partition's end."""
    return (await recover_counted(scanner, topic, partition, states)).states


class Recovery(NamedTuple):
    """The streams carried forward, and how many records the scan read."""

    states: dict[bytes, StreamState | None]
    scanned: int


async def recover_counted(
    scanner: PartitionScanner,
    topic: str,
    partition: int,
    states: Mapping[bytes, StreamState],
    floor: int = 0,
) -> Recovery:
    """`recover_partition`, scanning from `floor` at the lowest (the partition's log start:
    what retention removed is no one's to read), with the count of records read."""
    if not states:
        return Recovery({}, 0)
    logged: dict[bytes, list[LoggedRecord]] = {key: [] for key in states}
    tails = {key: state.meta.next_offset for key, state in states.items()}
    position = max(floor, min(tails.values()))
    scanned = 0
    while True:
        scan = await scanner.scan_headed(topic, partition, position, SCAN_BYTES)
        scanned += len(scan.records)
        sort_out(scan.records, logged, tails)
        position = scan.next_offset
        if scan.at_end:
            break
    carried = {key: carry_forward(states[key], records) for key, records in logged.items()}
    return Recovery(carried, scanned)


def sort_out(
    scanned: list[Headed], logged: dict[bytes, list[LoggedRecord]], tails: Mapping[bytes, int]
) -> None:
    """Each scanned record of a stream of `logged` (by record key) at or past its tail in
    `tails`, appended to its list; others passed over. Below its own tail, a stream's records
    are in its state, or of an incarnation that ended (whose `create` and `delete` would be
    taken for a later one's)."""
    for key, offset, timestamp_ms, headers in scanned:
        records = logged.get(key)
        if records is not None and offset >= tails[key]:
            records.append(logged_record(offset, timestamp_ms, headers))
