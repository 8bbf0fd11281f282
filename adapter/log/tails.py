"""Where a write slot's next records will land, known before Kafka answers.

A slot's writer is the only producer of its partitions, so after one of its transactions
commits, a partition it wrote to takes its next record two offsets past the transaction's
last record there: the one between is the commit marker. Knowing that, the writer can build
the metadata (which names data offsets) before the data is acknowledged and send both in one
round trip. A guess is only ever used if Kafka put every record exactly where it was guessed:
the writer compares before it commits, and aborts and writes again the slow way if not. So a
wrong guess (a partition written by someone else, a topic deleted and made again) costs time,
never correctness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

MAX_PARTITIONS = 65_536  # remembered per writer; past this the table starts again


class Placed(Protocol):
    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...


TopicPartition = tuple[str, int]


class PartitionTails:
    """The next offset of each partition this writer has committed to, while it is known."""

    def __init__(self) -> None:
        self._next: dict[TopicPartition, int] = {}

    def guess(self, batches: Sequence[Sequence[Placed]]) -> list[list[int]] | None:
        """Each record's offset, if every partition written to is known; else None."""
        cursor: dict[TopicPartition, int] = {}
        guessed: list[list[int]] = []
        for records in batches:
            row: list[int] = []
            for record in records:
                place = (record.topic, record.partition)
                offset = cursor.get(place, self._next.get(place))
                if offset is None:
                    return None
                row.append(offset)
                cursor[place] = offset + 1
            guessed.append(row)
        return guessed

    def committed(self, batches: Sequence[Sequence[Placed]], offsets: list[list[int]]) -> None:
        """Learn from a committed transaction: its last record per partition, then a marker."""
        if len(self._next) > MAX_PARTITIONS:
            self._next.clear()
        for records, placed in zip(batches, offsets, strict=True):
            for record, offset in zip(records, placed, strict=True):
                self._next[(record.topic, record.partition)] = offset + 2

    def forget(self) -> None:
        """Nothing is known any more (a transaction failed or aborted; a new producer)."""
        self._next.clear()

    def __len__(self) -> int:
        return len(self._next)
