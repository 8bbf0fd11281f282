"""Typed keys of what the app factory puts in the aiohttp application."""

from __future__ import annotations

from aiohttp import web

from adapter.http.live import LiveLimits
from adapter.live.fanout import Fanout
from adapter.service.buckets import BucketService
from adapter.service.mounted_streams import MountedStreams
from adapter.service.mounts import MountService
from adapter.service.snapshots import SnapshotService
from adapter.service.streams import StreamService

STREAMS = web.AppKey("streams", StreamService)
BUCKETS = web.AppKey("buckets", BucketService)
LIVE_LIMITS = web.AppKey("live_limits", LiveLimits)
FANOUT = web.AppKey("fanout", Fanout)
SNAPSHOTS = web.AppKey("snapshots", SnapshotService)
MOUNTS = web.AppKey("mounts", MountService)
MOUNTED = web.AppKey("mounted", MountedStreams)
