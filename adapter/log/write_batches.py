"""What a request hands a slot's writer, and how each batch gets its outcome.

A `WriteBatch` is one request's records and the function that turns their offsets into the
state records committed with them. Its future is resolved once: with the offsets when its
transaction commits, or with `LogUnavailable` when it fails, waited too long (see
`adapter/log/batch_queue.py`), or was decided against a batch that failed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from adapter.log import batch_queue
from adapter.log.errors import LogUnavailable, OutcomeUnknown

EXPIRED_MESSAGE = "write slot busy: this write waited too long and was not written; retry"

# (topic, key, value or None for a tombstone) of a record for a compacted state topic.
StateEntry = tuple[str, str, bytes | None]


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    key: bytes
    value: bytes
    headers: list[tuple[str, str | bytes | None]] = field(default_factory=list)


@dataclass
class WriteBatch:
    """One request's records; `finalize` maps their offsets to the state to commit with them.

    `finalize` runs on the writer's thread, in queue order, and may run more than once (again
    with the true offsets when a guess was wrong): it must depend on its offsets alone.

    `after` is the batch this one was decided against (the same stream's previous append, not
    yet committed when this one was decided): if it fails, this one must fail too, never
    commit. `on_commit` runs on the event loop once the batch has committed, in commit order.
    The future is never cancelled by a waiter (they wait through `asyncio.shield`), so it
    always tells the batch's outcome.
    """

    records: list[Record]
    finalize: Callable[[list[int]], list[StateEntry]]
    after: WriteBatch | None = None
    on_commit: Callable[[list[int]], None] | None = None
    future: asyncio.Future[list[int]] = field(init=False)

    @property
    def size(self) -> batch_queue.Size:
        return batch_queue.size_of(
            [(record.key, record.value, _header_bytes(record.headers)) for record in self.records]
        )

    @property
    def failed(self) -> bool:
        return self.future.done() and self.future.exception() is not None

    def fail(self, error: LogUnavailable | OutcomeUnknown) -> None:
        if not self.future.done():
            self.future.set_exception(error)


def unbroken(batches: list[WriteBatch]) -> list[WriteBatch]:
    """The batches that may commit: each one's predecessor committed already or goes first in
    this same transaction. The rest fail (their decision rested on a state that never was)."""
    kept: list[WriteBatch] = []
    here: set[int] = set()
    for batch in batches:
        after, batch.after = batch.after, None  # no chain of every batch stays reachable
        if after is None or id(after) in here or (after.future.done() and not after.failed):
            kept.append(batch)
            here.add(id(batch))
        else:
            batch.fail(LogUnavailable("an earlier append to this stream did not commit; retry"))
    return kept


def expired(batches: list[WriteBatch]) -> None:
    for batch in batches:
        batch.fail(LogUnavailable(EXPIRED_MESSAGE))


def _header_bytes(headers: list[tuple[str, str | bytes | None]]) -> int:
    total = 0  # a loop: a generator per record cost more than the sum (per append)
    for name, value in headers:
        total += len(name) + len(value or "")
    return total


def committed(batches: list[WriteBatch], results: list[list[int]]) -> None:
    for batch, offsets in zip(batches, results, strict=True):
        if batch.on_commit is not None:
            batch.on_commit(offsets)
        if not batch.future.done():
            batch.future.set_result(offsets)
