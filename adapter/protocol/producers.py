"""The idempotent-producer state machine (§5.2.1): what one append does to a producer's state.

Pure: it decides, it does not store. The caller commits the new state in the same Kafka
transaction as the data, so a retry after any crash meets the state that matches the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from adapter.protocol.headers import ProducerHeaders


class Position(Protocol):
    """Where a producer stands: its epoch and highest accepted seq (a stored record has both)."""

    @property
    def epoch(self) -> int: ...

    @property
    def last_seq(self) -> int: ...


@dataclass(frozen=True)
class ProducerState:
    epoch: int
    last_seq: int  # highest sequence accepted in this epoch


@dataclass(frozen=True)
class Accepted:
    state: ProducerState


@dataclass(frozen=True)
class Duplicate:
    """Already applied: answer success without writing, echoing the highest accepted seq."""

    epoch: int
    last_seq: int


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


def decide(state: Position | None, request: ProducerHeaders) -> Decision:
    """The outcome of an append carrying `request`, given the producer's stored state."""
    epoch, seq = request.epoch, request.seq
    if state is None:
        return Accepted(ProducerState(epoch, 0)) if seq == 0 else SequenceGap(0, seq)
    if epoch < state.epoch:
        return StaleEpoch(state.epoch)
    if epoch > state.epoch:
        return Accepted(ProducerState(epoch, 0)) if seq == 0 else EpochMustStartAtZero(epoch, seq)
    if seq <= state.last_seq:
        return Duplicate(epoch, state.last_seq)
    if seq == state.last_seq + 1:
        return Accepted(ProducerState(epoch, seq))
    return SequenceGap(state.last_seq + 1, seq)
