"""Files holding secrets, read again every `secret_poll_ms` and reloaded when their content
changed: a Kubernetes Secret update swaps a mounted volume's files (the `..data` symlink is
replaced, atomically, by one to a new timestamped folder) and signals nothing.

What changed is told by the files' content and the path each resolves to, never by a
modification time alone (a swapped symlink keeps the old files' times). A reload runs the same
code SIGHUP does; one that fails (a file half-written, a key not matching its certificate)
logs why and keeps what was loaded, and the next change tries again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from adapter.tasks import Tasks

log = logging.getLogger(__name__)

Reload = Callable[[], bool]  # True: loaded; False: refused, the previous stays (it logged why)


@dataclass
class _Watched:
    name: str
    paths: tuple[str, ...]
    reload: Reload
    seen: bytes


def fingerprint(paths: Sequence[str]) -> bytes:
    """A digest of where each path resolves to and what it holds (an unreadable one counts
    as its error, so its return is a change too)."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(os.path.realpath(path).encode() + b"\0")
        try:
            digest.update(Path(path).read_bytes())
        except OSError as error:
            digest.update(f"\0unreadable {error.errno}".encode())
        digest.update(b"\0")
    return digest.digest()


class SecretFiles:
    """The watched files of one process, checked every `interval_s` once started."""

    def __init__(self, interval_s: float, tasks: Tasks) -> None:
        self.interval_s = interval_s
        self.tasks = tasks
        self._watched: list[_Watched] = []

    def watch(self, name: str, paths: Sequence[str], reload: Reload) -> None:
        """Call `reload` whenever one of `paths` (the empty ones left out) changes."""
        named = tuple(path for path in paths if path)
        if named:
            self._watched.append(_Watched(name, named, reload, fingerprint(named)))

    async def start(self) -> None:
        if self.interval_s > 0:
            self.tasks.spawn(self._run(), "secret-files")

    async def close(self) -> None:
        await self.tasks.close()

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await self.check()

    async def check(self) -> None:
        """Reload what changed since the last check."""
        for watched in list(self._watched):
            now = await asyncio.to_thread(fingerprint, watched.paths)  # local files: no wait
            if now != watched.seen:
                watched.seen = now
                log.info("%s changed: reloading", watched.name)
                watched.reload()
