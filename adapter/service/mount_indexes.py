"""The key indexes of the mounted topics: one indexer task per mount, following the catalog.

`reconcile` starts an indexer for every mount the catalog holds and stops those of mounts
gone from it; it is called when the set of mounts may have changed (start, a local mount or
unmount, a followed meta record). A dead indexer is logged (by the task group: one mount's
failure does not stop the instance), restarted by the next reconcile, and its mount answers
503 meanwhile. A stopped indexer is closed by a task of its own, once its thread is done.
With an `index_dir`, each mount's index is kept in a file there (`log/key_index_store.py`),
`{bucket}.sqlite`, resumed at start and removed at unmount.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from adapter.log.key_index import KeyIndex
from adapter.log.key_index_store import KeyIndexStore, remove
from adapter.log.mount_indexer import MountIndexer, Naming
from adapter.protocol.model import MountMeta
from adapter.protocol.mount_keys import media_type, stream_id_of
from adapter.state.catalog import Catalog
from adapter.tasks import Kind, Tasks
from topology.kafka_client import KafkaAccess


@dataclass
class Indexed:
    mount: MountMeta
    index: KeyIndex
    indexer: MountIndexer
    task: asyncio.Task[None]


class MountIndexes:
    def __init__(
        self,
        kafka: KafkaAccess,
        catalog: Catalog,
        max_positions_per_key: int,
        timeout_s: float,
        on_keys: Callable[[str, set[str]], None],
        tasks: Tasks,
        index_dir: str = "",
    ) -> None:
        self.kafka = kafka
        self.index_dir = Path(index_dir) if index_dir else None  # None: not persisted
        self.catalog = catalog
        self.max_positions_per_key = max_positions_per_key
        self.timeout_s = timeout_s
        self.on_keys = on_keys  # (bucket id, stream ids that got records)
        self._indexed: dict[str, Indexed] = {}
        self.tasks = tasks  # the indexers (services) and their closings (jobs)

    def get(self, bucket_id: str) -> Indexed | None:
        return self._indexed.get(bucket_id)

    def reconcile(self) -> None:
        """Index exactly the catalog's mounts (a changed mount is indexed afresh)."""
        wanted = {mount.bucket_id: mount for mount in self.catalog.mounts()}
        for bucket_id, indexed in list(self._indexed.items()):
            if wanted.get(bucket_id) != indexed.mount or indexed.task.done():
                self._stop(bucket_id, forget=bucket_id not in wanted)
        for bucket_id, mount in wanted.items():
            if bucket_id not in self._indexed:
                self._start(mount)

    def _path(self, bucket_id: str) -> Path | None:
        return self.index_dir / f"{bucket_id}.sqlite" if self.index_dir else None

    def _start(self, mount: MountMeta) -> None:
        path = self._path(mount.bucket_id)
        # What the index's content depends on: another mount of the name starts afresh.
        identity = (
            f"{mount.bucket_id} {mount.topic} {mount.key_encoding} {mount.content_type_header}"
        )
        store = KeyIndexStore(path, identity) if path else None
        index = KeyIndex(self.max_positions_per_key, track_changes=store is not None)
        naming = Naming(
            mount.topic,
            partial(stream_id_of, mount.bucket_id),
            mount.content_type_header,
            media_type,
        )
        indexer = MountIndexer(
            self.kafka,
            naming,
            index,
            self.timeout_s,
            lambda ids: self.on_keys(mount.bucket_id, ids),
            store,
        )
        task = self.tasks.spawn(indexer.run(), f"mount-{mount.topic}")
        self._indexed[mount.bucket_id] = Indexed(mount, index, indexer, task)

    def _stop(self, bucket_id: str, forget: bool = False) -> None:
        """Stop indexing the mount; `forget`: it was unmounted, its file goes too."""
        indexed = self._indexed.pop(bucket_id)
        indexed.task.cancel()
        # Live readers of its keys wake, find the mount gone (or changed) and end or go on.
        self.on_keys(bucket_id, set(indexed.index.ids("", None)))
        path = self._path(bucket_id) if forget else None
        self.tasks.spawn(self._close(indexed, path), f"close-mount-{bucket_id}", Kind.JOB)

    async def _close(self, indexed: Indexed, remove_file: Path | None) -> None:
        await asyncio.wait([indexed.task])  # cancelled: its thread finishes its poll first
        await indexed.indexer.close()
        if remove_file is not None:
            remove(remove_file)

    async def close(self) -> None:
        """Stop every indexer and let the closings run, `timeout_s` at most."""
        for bucket_id in list(self._indexed):
            self._stop(bucket_id)
        await self.tasks.wait(self.timeout_s)
        await self.tasks.close()
