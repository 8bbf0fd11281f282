"""The mount registry: existing topics served as buckets, one stream per record key.

A mount is a record (`mount:{bucket}`) in the compacted meta topic, written through the
bucket's write slot like a bucket's, so it survives restarts and every instance sees it
(the follower applies it). Mounts named in the config (`[[mounts]]`) are held by each
instance's config instead and cannot be unmounted over HTTP. Mounting and unmounting never
touch the topic: we read it, nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.model import MountMeta
from adapter.protocol.mounts import ConfiguredMount, MountSpec, check_mountable
from adapter.service.buckets import BucketService
from adapter.state.records import encode as encode_meta
from topology.internal_records import mount_key

log = logging.getLogger(__name__)


class MountService:
    def __init__(
        self,
        buckets: BucketService,
        configured: tuple[ConfiguredMount, ...],
        on_change: Callable[[], None],
        allowed: tuple[str, ...] = (),
    ) -> None:
        self.buckets = buckets
        self.allowed = allowed  # topic globs a bucket's admin may mount (`mount_topics`)
        self.catalog = buckets.catalog
        self.configured = {mount.bucket_id: mount for mount in configured}
        self.on_change = on_change  # the set of mounts changed: start or stop their indexes

    def get(self, bucket_id: str) -> MountMeta | None:
        return self.catalog.mount(bucket_id)

    def load_configured(self) -> None:
        """Put the configured mounts in the catalog (after its replay: config wins)."""
        for bucket_id, mount in self.configured.items():
            if self.catalog.bucket(bucket_id) is not None:
                raise ProtocolError(
                    ErrorCode.BUCKET_EXISTS,
                    f"[[mounts]] bucket {bucket_id!r} is already a bucket; rename the mount",
                )
            self.catalog.put_mount(_meta(bucket_id, mount.spec, 0), configured=True)
        self.on_change()

    async def mount(self, bucket_id: str, spec: MountSpec) -> MountMeta:
        buckets = self.buckets
        async with buckets.bounded(f"mounting {bucket_id!r}"), buckets.locks.hold(bucket_id):
            if self.catalog.bucket(bucket_id) is not None or self.get(bucket_id) is not None:
                raise ProtocolError(ErrorCode.BUCKET_EXISTS, f"bucket {bucket_id!r} exists")
            check_mountable(spec.topic, buckets.layout.prefix, self.allowed)
            if not await buckets.admin.topic_exists(spec.topic):
                raise ProtocolError(ErrorCode.TOPIC_NOT_FOUND, f"topic {spec.topic!r} not found")
            meta = _meta(bucket_id, spec, buckets.clock())
            entry = (buckets.topics.meta, meta.key, encode_meta(meta))
            slot = buckets.slots.of_bucket(bucket_id)
            await buckets.commit_state(slot, [entry])
            self.catalog.put_mount(meta)
        log.info("mounted topic %s as bucket %r", spec.topic, bucket_id)
        self.on_change()
        return meta

    async def unmount(self, bucket_id: str) -> None:
        """Forget the mount and its index; the topic is left exactly as it is."""
        buckets = self.buckets
        if bucket_id in self.configured:
            raise ProtocolError(
                ErrorCode.MOUNT_CONFIGURED,
                f"bucket {bucket_id!r} is mounted by the config file; remove it there",
            )
        async with buckets.bounded(f"unmounting {bucket_id!r}"), buckets.locks.hold(bucket_id):
            if self.get(bucket_id) is None:
                raise ProtocolError(ErrorCode.BUCKET_NOT_FOUND, f"bucket {bucket_id!r} not found")
            entry = (buckets.topics.meta, mount_key(bucket_id), None)
            slot = buckets.slots.of_bucket(bucket_id)
            await buckets.commit_state(slot, [entry])
            self.catalog.drop_mount(bucket_id)
        log.info("unmounted bucket %r", bucket_id)
        self.on_change()


def _meta(bucket_id: str, spec: MountSpec, now_ms: int) -> MountMeta:
    return MountMeta(
        bucket_id=bucket_id,
        topic=spec.topic,
        content_type=spec.content_type,
        content_type_header=spec.content_type_header,
        key_encoding=spec.key_encoding,
        appends=spec.appends,
        created_at_ms=now_ms,
    )
