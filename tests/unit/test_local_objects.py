"""The local-folder object store: atomic writes, ranges, listing, and keys kept inside the root."""

from __future__ import annotations

import contextlib
import os
import resource
import stat
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Synced:
    """One `os.fsync` call: the file it synced (device, inode) and whether it is a folder."""

    identity: tuple[int, int]
    folder: bool


def _identity(path: Path) -> tuple[int, int]:
    status = path.stat()
    return status.st_dev, status.st_ino


def _record_syncs(monkeypatch: pytest.MonkeyPatch) -> list[_Synced | str]:
    """Every fsync (and, in order with them, every os.replace) made from now on."""
    calls: list[_Synced | str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        status = os.fstat(fd)
        calls.append(_Synced((status.st_dev, status.st_ino), stat.S_ISDIR(status.st_mode)))
        real_fsync(fd)

    def replace(source: str, target: str) -> None:
        real_replace(source, target)
        calls.append(f"replace {Path(target).name}")

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return calls


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_put_syncs_the_file_then_every_folder_whose_entries_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, streamed: bool
) -> None:
    """On a real folder: the object's file is synced before its rename, and after it the
    folder holding the new name, and each folder the put created (with the folder holding
    it). What this proves is the calls made and their order, on this file system: not that
    the disk keeps them across a power cut, which only a crash test on real hardware shows."""
    root = tmp_path / "cold"
    store = LocalObjectStore(root)
    await store.check()
    calls = _record_syncs(monkeypatch)
    if streamed:
        await store.put_stream("tier/t/0/chunk", _chunks([b"ab", b"cd"]))
    else:
        await store.put("tier/t/0/chunk", b"abcd")
    renamed = calls.index("replace chunk")
    file_sync = calls[renamed - 1]
    assert isinstance(file_sync, _Synced)
    assert (file_sync.identity, file_sync.folder) == (_identity(root / "tier/t/0/chunk"), False)
    folders_after = {c.identity for c in calls[renamed:] if isinstance(c, _Synced) and c.folder}
    assert _identity(root / "tier/t/0") in folders_after  # the new name's entry
    for created in ("tier", "tier/t"):  # the entries of folders made for this put
        assert _identity(root / created) in {
            c.identity for c in calls if isinstance(c, _Synced) and c.folder
        }
    assert _identity(root) in {c.identity for c in calls if isinstance(c, _Synced) and c.folder}


@contextlib.contextmanager
def _no_descriptor_left() -> Iterator[None]:
    """Every descriptor this process may open is open (as under a flood of connections)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    # A new descriptor takes the lowest free number, which must be below the limit.
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def test_out_of_descriptors_every_operation_fails_retriably(tmp_path: Path) -> None:
    store = LocalObjectStore(tmp_path / "cold")
    await store.put("a/b/1", b"x")
    attempts: dict[str, Callable[[], Awaitable[object]]] = {
        "put": lambda: store.put("a/b/2", b"y"),
        "put_stream": lambda: store.put_stream("a/b/3", _chunks([b"z"])),
        "get": lambda: store.get("a/b/1"),
        "keys": lambda: store.keys("a/"),
    }
    for name, attempt in attempts.items():
        with _no_descriptor_left(), pytest.raises(ObjectStoreError) as failed:
            await attempt()
        assert failed.value.retriable, name
        assert "Too many open files" in str(failed.value), name
    assert await store.keys("a/") == ["a/b/1"]  # nothing half-written is left behind
