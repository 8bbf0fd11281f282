"""The key indexes of the mounted topics: one indexer task per mount, following the catalog.

`reconcile` starts an indexer for every mount the catalog holds and stops those of mounts
gone from it; it is called when the set of mounts may have changed (start, a local mount or
unmount, a followed meta record). A dead indexer is restarted by the next reconcile, and its
mount answers 503 meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from adapter.log.key_index import KeyIndex
from adapter.log.mount_indexer import MountIndexer, Naming
from adapter.protocol.mount_keys import media_type, stream_id_of
from adapter.state.catalog import Catalog
from adapter.state.records import MountMeta

log = logging.getLogger(__name__)


@dataclass
class Indexed:
    mount: MountMeta
    index: KeyIndex
    indexer: MountIndexer
    task: asyncio.Task[None]


class MountIndexes:
    def __init__(
        self,
        bootstrap_servers: str,
        catalog: Catalog,
        max_positions_per_key: int,
        timeout_s: float,
        on_keys: Callable[[str, set[str]], None],
    ) -> None:
        self.bootstrap_servers = bootstrap_servers
        self.catalog = catalog
        self.max_positions_per_key = max_positions_per_key
        self.timeout_s = timeout_s
        self.on_keys = on_keys  # (bucket id, stream ids that got records)
        self._indexed: dict[str, Indexed] = {}
        self._closing: set[asyncio.Task[None]] = set()

    def get(self, bucket_id: str) -> Indexed | None:
        return self._indexed.get(bucket_id)

    def reconcile(self) -> None:
        """Index exactly the catalog's mounts (a changed mount is indexed afresh)."""
        wanted = {mount.bucket_id: mount for mount in self.catalog.mounts()}
        for bucket_id, indexed in list(self._indexed.items()):
            if wanted.get(bucket_id) != indexed.mount or indexed.task.done():
                self._stop(bucket_id)
        for bucket_id, mount in wanted.items():
            if bucket_id not in self._indexed:
                self._start(mount)

    def _start(self, mount: MountMeta) -> None:
        index = KeyIndex(self.max_positions_per_key)
        naming = Naming(
            mount.topic,
            partial(stream_id_of, mount.bucket_id),
            mount.content_type_header,
            media_type,
        )
        indexer = MountIndexer(
            self.bootstrap_servers,
            naming,
            index,
            self.timeout_s,
            lambda ids: self.on_keys(mount.bucket_id, ids),
        )
        task = asyncio.get_running_loop().create_task(indexer.run(), name=f"mount-{mount.topic}")
        task.add_done_callback(lambda done: self._died(mount, done))
        self._indexed[mount.bucket_id] = Indexed(mount, index, indexer, task)

    def _died(self, mount: MountMeta, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("indexing mounted topic %s stopped", mount.topic, exc_info=task.exception())

    def _stop(self, bucket_id: str) -> None:
        indexed = self._indexed.pop(bucket_id)
        indexed.task.cancel()
        # Live readers of its keys wake, find the mount gone (or changed) and end or go on.
        self.on_keys(bucket_id, set(indexed.index.ids("", None)))
        closing = asyncio.get_running_loop().create_task(self._close(indexed))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def _close(self, indexed: Indexed) -> None:
        await asyncio.wait([indexed.task])  # cancelled: its thread finishes its poll first
        await indexed.indexer.close()

    async def close(self) -> None:
        for bucket_id in list(self._indexed):
            self._stop(bucket_id)
        if self._closing:
            await asyncio.wait(self._closing, timeout=self.timeout_s)
