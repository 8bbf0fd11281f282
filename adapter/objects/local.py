"""Objects as files under one folder: the embedded default, for one machine."""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from adapter.objects.base import ObjectStoreError


class LocalObjectStore:
    """Keys map to paths under `root`; writes are atomic (temp file, fsync, rename)."""

    def __init__(self, root: Path) -> None:
        self.root = root

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
        await asyncio.to_thread(self._write, self._path(key), data)

    async def get(self, key: str, start: int = 0, end: int | None = None) -> bytes | None:
        return await asyncio.to_thread(self._read, self._path(key), start, end)

    async def delete(self, key: str) -> None:
        await asyncio.to_thread(self._path(key).unlink, missing_ok=True)

    async def keys(self, prefix: str) -> list[str]:
        return await asyncio.to_thread(self._keys, prefix)

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
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

    @staticmethod
    def _read(path: Path, start: int, end: int | None) -> bytes | None:
        try:
            with path.open("rb") as handle:
                handle.seek(start)
                return handle.read() if end is None else handle.read(max(0, end - start))
        except FileNotFoundError:
            return None

    def _keys(self, prefix: str) -> list[str]:
        if not self.root.exists():
            return []
        found = (p.relative_to(self.root).as_posix() for p in self.root.rglob("*") if p.is_file())
        return sorted(k for k in found if k.startswith(prefix) and "/.tmp-" not in f"/{k}")
