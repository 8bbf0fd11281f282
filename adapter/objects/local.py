"""Objects as files under one folder: the embedded default, for one machine.

Every `OSError` of the file system (out of descriptors, a full disk, a folder gone) is raised
as a retriable `ObjectStoreError`, as S3's failures are: the callers (the supervisor's check,
tiering, snapshots, reads) know that error and ride it out or answer 503. A raw `OSError` that
escaped a background task would stop the process: 564 idle connections under `ulimit -n 700`
made the supervisor's listing of this folder fail with EMFILE, and the instance exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections.abc import AsyncIterable, Callable
from pathlib import Path
from typing import BinaryIO, ParamSpec, TypeVar

from adapter.objects.base import Fetched, ObjectStoreError

P = ParamSpec("P")
T = TypeVar("T")


async def _in_thread(what: str, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`call` on a worker thread, its `OSError` translated for the store's callers."""
    try:
        return await asyncio.to_thread(call, *args, **kwargs)
    except OSError as error:
        raise ObjectStoreError(f"local store {what}: {error}", retriable=True) from error


class LocalObjectStore:
    """Keys map to paths under `root`; writes are atomic and durable: temp file, fsync,
    rename, then fsync of the folder holding the new name (and of each folder the write
    created, with the folder holding it). Without the folder syncs a host crash can lose the
    name of a file whose bytes were synced: the manifest would list a chunk that is gone,
    after Kafka freed its records."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.fetched = Fetched()

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()) or not key:
            raise ObjectStoreError(f"invalid object key {key!r}", retriable=False)
        return path

    async def check(self) -> None:
        try:
            await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True)
        except OSError as error:
            raise ObjectStoreError(f"cannot use {self.root}: {error}", retriable=True) from error

    async def put(self, key: str, data: bytes) -> None:
        await _in_thread(f"put {key}", self._write, self._path(key), data)

    async def put_stream(self, key: str, chunks: AsyncIterable[bytes]) -> None:
        """Chunks go to a temp file beside the object (a name `keys` never lists), which is
        renamed over the key once complete and synced; anything else deletes it."""
        path = self._path(key)
        what = f"put {key}"
        handle, tmp = await _in_thread(what, self._open_temp, path)
        try:
            async for chunk in chunks:
                await _in_thread(what, handle.write, chunk)
            await _in_thread(what, self._seal, handle, tmp, path)
        except BaseException:
            handle.close()  # local and quick: done here, so even a cancellation cleans up
            with contextlib.suppress(FileNotFoundError):  # renamed just as it was cancelled
                os.unlink(tmp)
            raise

    async def get(self, key: str, start: int = 0, end: int | None = None) -> bytes | None:
        data = await _in_thread(f"get {key}", self._read, self._path(key), start, end)
        self.fetched.count(data, start > 0 or end is not None)
        return data

    async def delete(self, key: str) -> None:
        await _in_thread(f"delete {key}", self._path(key).unlink, missing_ok=True)

    async def keys(self, prefix: str) -> list[str]:
        return await _in_thread(f"keys {prefix}", self._keys, prefix)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        _make_folders(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        _sync_folder(path.parent)

    @staticmethod
    def _open_temp(path: Path) -> tuple[BinaryIO, str]:
        _make_folders(path.parent)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        return os.fdopen(fd, "wb"), tmp

    @staticmethod
    def _seal(handle: BinaryIO, tmp: str, path: Path) -> None:
        with handle:
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        _sync_folder(path.parent)

    @staticmethod
    def _read(path: Path, start: int, end: int | None) -> bytes | None:
        try:
            with path.open("rb") as handle:
                handle.seek(start)
                return handle.read() if end is None else handle.read(max(0, end - start))
        except FileNotFoundError:
            return None

    def _keys(self, prefix: str) -> list[str]:
        top = self.root / prefix.rpartition("/")[0]  # the folder every such key is under
        if not top.is_dir():
            return []
        found = (p.relative_to(self.root).as_posix() for p in top.rglob("*") if p.is_file())
        return sorted(k for k in found if k.startswith(prefix) and "/.tmp-" not in f"/{k}")


def _make_folders(folder: Path) -> None:
    """Create `folder` and its missing parents, each one's entry synced in its parent."""
    missing: list[Path] = []
    while not folder.is_dir():
        missing.append(folder)
        folder = folder.parent
    for each in reversed(missing):
        each.mkdir(exist_ok=True)  # another put may make it at the same time
        _sync_folder(each.parent)


def _sync_folder(folder: Path) -> None:
    """fsync a folder: its entries (a rename into it, a folder made in it) reach the disk."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
