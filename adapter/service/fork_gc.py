"""The sweep that collects soft-deleted streams whose forks all expired, and expired streams.

Deleting a stream that still has live forks only soft-deletes it (its forks read its
records). Deleting its last fork collects it at once (the stream machine's `DeleteStream`); a
fork that expires instead writes nothing, so every instance sweeps now and then for
soft-deleted streams of its own write slots that no live fork needs any more, and collects them
(`StreamService.collect`): their names answer 404 and can be created again.

An expired stream writes nothing either, and would stay in the catalog (and its records in
Kafka, below the retention floor it holds) for good. So the same sweep forgets the streams of
its slots that expired more than `grace_ms` ago and that no live fork reads
(`StreamService.sweep_expired`): tombstones of their state, snapshot pointer and producer
states, like a deletion, so every instance's catalog and index drop them. The grace period
covers an instance whose clock is behind, and reads that began before the deadline.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from adapter.protocol.errors import ProtocolError
from adapter.service.background import RIDDEN_OUT
from adapter.service.streams import StreamService

log = logging.getLogger(__name__)
SWEEP_INTERVAL_S: Final = 60.0


async def sweep_forever(
    streams: StreamService, grace_ms: int, interval_s: float = SWEEP_INTERVAL_S
) -> None:
    """Sweep every interval until cancelled; a failed sweep is logged and tried again."""
    while True:
        await asyncio.sleep(interval_s)
        try:
            collected = await streams.sweep()
            expired = await streams.sweep_expired(grace_ms)
        except (ProtocolError, *RIDDEN_OUT) as error:
            log.warning("collecting soft-deleted streams failed, trying again later: %s", error)
            continue
        if collected:
            log.info("collected %d soft-deleted streams whose forks expired", len(collected))
        if expired:
            log.info("forgot %d expired streams", len(expired))
