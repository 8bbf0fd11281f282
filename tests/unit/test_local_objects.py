"""The local-folder object store: atomic writes, ranges, listing, and keys kept inside the root."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapter.objects.base import ObjectStoreError
from adapter.objects.local import LocalObjectStore


async def test_round_trip_ranges_and_listing(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "cold")
    await store.check()
    await store.put("a/1", b"0123456789")
    await store.put("a/2", b"xyz")
    await store.put("b/1", b"!")
    assert await store.get("a/1") == b"0123456789"
    assert await store.get("a/1", 3, 6) == b"345"
    assert await store.get("a/1", 8) == b"89"
    assert await store.get("a/missing") is None
    assert await store.keys("a/") == ["a/1", "a/2"]
    await store.delete("a/1")
    await store.delete("a/1")  # deleting twice is fine
    assert await store.keys("") == ["a/2", "b/1"]


async def test_keys_cannot_escape_the_root(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "cold")
    with pytest.raises(ObjectStoreError, match="invalid object key"):
        await store.put("../outside", b"x")
    assert not (tmp_path / "outside").exists()


async def _chunks(pieces: list[bytes], fail: bool = False) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece
    if fail:
        raise RuntimeError("the client went away")


async def test_a_streamed_object_appears_whole(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "cold")
    await store.put_stream("s/1", _chunks([b"ab", b"", b"cde"]))
    assert await store.get("s/1") == b"abcde"
    assert await store.keys("s/") == ["s/1"]


async def test_an_interrupted_stream_leaves_nothing(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "cold")
    with pytest.raises(RuntimeError, match="went away"):
        await store.put_stream("s/1", _chunks([b"half", b"way"], fail=True))
    assert await store.get("s/1") is None
    assert [p.name for p in (tmp_path / "cold").rglob("*") if p.is_file()] == []
