"""The small interface every object store implements."""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Protocol


class ObjectStoreError(Exception):
    """The store failed; `retriable` says whether trying again can help."""

    def __init__(self, message: str, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


@dataclass
class Fetched:
    """What `get` has returned since the store was made: a measure of what reads cost."""

    gets: int = 0
    ranged_gets: int = 0  # of them, those of part of an object
    size: int = 0  # bytes returned

    def count(self, data: bytes | None, ranged: bool) -> None:
        if data is not None:
            self.gets += 1
            self.ranged_gets += ranged
            self.size += len(data)


class ObjectStore(Protocol):
    """Immutable objects by key. Every method completes or raises within the store's timeout."""

    fetched: Fetched

    async def check(self) -> None:
        """Raise ObjectStoreError unless the store is reachable and writable."""

    async def put(self, key: str, data: bytes) -> None: ...

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> None:
        """Store the chunks as one object, holding only a bounded part of it at a time. The
        object becomes visible whole once every chunk is stored, or never: an exception from
        `chunks` (or the store, or a cancellation) leaves nothing under `key`."""

    async def get(self, key: str, start: int = 0, end: int | None = None) -> bytes | None:
        """Bytes [start, end) of the object (a ranged GET on S3), or None when there is no
        such object."""

    async def delete(self, key: str) -> None: ...

    async def keys(self, prefix: str) -> list[str]: ...
