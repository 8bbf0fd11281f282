"""A stream's appends in flight: the state they will leave, known before they commit.

Appends to one stream are decided one at a time under the stream's lock, but the lock is let
go once an append's batch is queued, so the next append is decided against the *pending*
state (closure, last Stream-Seq, producer states, message count; everything but offsets) and
many appends of one stream share one transaction. Each queued batch names the one it was
decided against (`WriteBatch.after`); the writer fails a batch whose predecessor failed, so
no batch commits on a state that never was. A chain lives while *any* of its batches is in
flight: a later batch can fail (expired in the queue) while an earlier one is still committing
or having its outcome learned, and an append decided on the committed state meanwhile would
repeat what that earlier one wrote (a producer's seq written twice).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from adapter.log.errors import LogUnavailable
from adapter.log.writer import WriteBatch
from adapter.protocol.model import StreamMeta
from adapter.protocol.producers import ProducerPosition

StreamKey = tuple[str, str]


@dataclass
class Chain:
    """The state after the last queued batch of a stream (its next_offset is stale)."""

    meta: StreamMeta
    last: WriteBatch
    producers: dict[str, ProducerPosition] = field(default_factory=dict)
    broken: bool = False  # a batch of it failed: the pending state is not to be trusted
    inflight: dict[int, WriteBatch] = field(default_factory=dict)  # by id: not answered yet


class Chains:
    def __init__(self) -> None:
        self._chains: dict[StreamKey, Chain] = {}

    def get(self, key: StreamKey) -> Chain | None:
        """The stream's chain while any batch of it is in flight."""
        return self._chains.get(key)

    def extend(
        self,
        key: StreamKey,
        meta: StreamMeta,
        batch: WriteBatch,
        producer: tuple[str, ProducerPosition] | None,
    ) -> None:
        """Record a batch just queued and the state it leaves."""
        chain = self.get(key)
        if chain is None:
            chain = self._chains[key] = Chain(meta, batch)
        chain.meta, chain.last = meta, batch
        chain.inflight[id(batch)] = batch
        if producer is not None:
            chain.producers[producer[0]] = producer[1]
        batch.future.add_done_callback(lambda _f: self._settled(key, chain, batch))

    async def settle(self, key: StreamKey, timeout_s: float) -> None:
        """Wait until every batch of the stream in flight has its outcome (not only the last:
        a later batch can fail, expired in the queue, while an earlier one still commits)."""
        chain = self._chains.get(key)
        if chain is None:
            return
        batches = list(chain.inflight.values())
        if batches:
            _done, pending = await asyncio.wait([b.future for b in batches], timeout=timeout_s)
            if pending:
                raise LogUnavailable("earlier appends to this stream are still in flight; retry")
        for batch in batches:  # retired now, not when their done-callbacks run (idempotent)
            self._settled(key, chain, batch)

    def _settled(self, key: StreamKey, chain: Chain, batch: WriteBatch) -> None:
        if batch.failed:
            chain.broken = True
        chain.inflight.pop(id(batch), None)
        if not chain.inflight and self._chains.get(key) is chain:
            del self._chains[key]

    def __len__(self) -> int:
        return len(self._chains)
