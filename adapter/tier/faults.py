"""Test-only broken builds of the cold tier, which the fault suite's checker must catch.

Never for production: `cold_reads_empty` serves every tiered range as if its chunk held
nothing (a chunk that reads as empty and complete), and `tier_skip_puts` commits ranges whose
chunks were never stored (a chunk gone under a committed manifest). They exist so that
`tests/faults/test_broken_build.py` can show the checker reports such a build.
"""

from __future__ import annotations

from collections.abc import AsyncIterable

from adapter.log.reader import UNBOUNDED, Budget, ReadResult
from adapter.objects.base import ObjectStore
from adapter.tier.cold import ColdReader
from adapter.tier.manifest import TierRange


class EmptyColdReader(ColdReader):
    """Every read of a tiered range finds nothing there, and says the range is done."""

    async def read(
        self,
        tier_range: TierRange,
        stream_id: str,
        start: int,
        stop: int,
        max_bytes: int,
        already: int = 0,
        budget: Budget = UNBOUNDED,
    ) -> ReadResult:
        return ReadResult([], stop, True)


class UnwrittenStore:
    """`inner`, except that puts store nothing (given to the tier worker alone)."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.fetched = inner.fetched

    async def check(self) -> None:
        await self.inner.check()

    async def put(self, key: str, data: bytes) -> None:
        return None

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> None:
        async for _ in chunks:
            pass

    async def get(self, key: str, start: int = 0, end: int | None = None) -> bytes | None:
        return await self.inner.get(key, start, end)

    async def delete(self, key: str) -> None:
        await self.inner.delete(key)

    async def keys(self, prefix: str) -> list[str]:
        return await self.inner.keys(prefix)
