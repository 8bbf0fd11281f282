"""The idempotent-producer state machine (§5.2.1): what one append does to a producer's state.

Pure: it decides, it does not store. The caller commits the new state in the same Kafka
transaction as the data, so a retry after any crash meets the state that matches the log.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.protocol.model import ProducerRecord
from topology.wire import ProducerStamp


@dataclass(frozen=True)
class ProducerPosition:
    """Where a producer is on a stream: its epoch and the highest seq accepted in it. Stored,
    it is part of the stream's `ProducerRecord`; an append carries its own (`ProducerStamp`)."""

    epoch: int
    last_seq: int


@dataclass(frozen=True)
class Accepted:
    position: ProducerPosition  # where the producer is once the append commits


@dataclass(frozen=True)
class Duplicate:
    """Already applied: answer success without writing, echoing where the producer is."""

    position: ProducerPosition


@dataclass(frozen=True)
class StaleEpoch:
    """A zombie: a newer epoch has claimed this producer id (403)."""

    current_epoch: int


@dataclass(frozen=True)
class SequenceGap:
    expected: int
    received: int


@dataclass(frozen=True)
class EpochMustStartAtZero:
    epoch: int
    seq: int


Decision = Accepted | Duplicate | StaleEpoch | SequenceGap | EpochMustStartAtZero


def decide(known: ProducerPosition | ProducerRecord | None, append: ProducerStamp) -> Decision:
    """The outcome of an append stamped `append`, given where the producer is: its stored
    record, or the position the stream's queued appends leave it at (None: never seen)."""
    epoch, seq = append.epoch, append.seq
    if known is None:
        return Accepted(ProducerPosition(epoch, 0)) if seq == 0 else SequenceGap(0, seq)
    if epoch < known.epoch:
        return StaleEpoch(known.epoch)
    if epoch > known.epoch:
        accepted = Accepted(ProducerPosition(epoch, 0))
        return accepted if seq == 0 else EpochMustStartAtZero(epoch, seq)
    if seq <= known.last_seq:
        return Duplicate(ProducerPosition(epoch, known.last_seq))
    if seq == known.last_seq + 1:
        return Accepted(ProducerPosition(epoch, seq))
    return SequenceGap(known.last_seq + 1, seq)
