"""What a forwarded write changed, as its owner tells the instance that forwarded it.

The owner of a write's slot answers a forwarded write as it answers any, and the forwarder
relays that answer to the client as it came. Before relaying a success, the forwarder waits
(bounded) until its own catalog shows what the write changed, so that a client reading
through the same instance next sees its own write (`Coordinator.after_forward`). What
changed comes from the owner, in one peer header on its answer, `Durable-Kafka-Effect` (never
shown to a client): a compact JSON object with one key per kind of change.

    {"tail": 42}                      an append or creation: the stream's tail is at least 42
    {"tail": null}                    the stream was deleted
    {"snapshot": 42}                  a snapshot of the stream was published at offset 42
    {"trimmed": 42}                   the stream's earliest offset is at least 42
    {"bucket": true, "etag": "..."}   the bucket (or mount) exists, configured as that ETag says
    {"bucket": false}                 the bucket was deleted

The stream or bucket is the request's own. Offsets are Kafka offsets.
"""

from __future__ import annotations

import json
from typing import Any

from adapter.cluster.coordinator import (
    BucketChanged,
    Change,
    SnapshotPublished,
    TailMoved,
    Trimmed,
)
from adapter.protocol.commands import StreamRef


def encode(change: Change) -> str:
    """The header's value for `change`."""
    document: dict[str, Any]
    match change:
        case TailMoved(_ref, tail):
            document = {"tail": tail}
        case SnapshotPublished(_ref, offset):
            document = {"snapshot": offset}
        case Trimmed(_ref, earliest):
            document = {"trimmed": earliest}
        case BucketChanged(_bucket, exists, etag):
            document = {"bucket": exists} | ({"etag": etag} if etag is not None else {})
    return json.dumps(document, separators=(",", ":"))


def decode(value: str, ref: StreamRef | None, bucket_id: str | None) -> Change | None:
    """The change a header's value names, of the request's stream (`ref`) or bucket; None
    when it is not one this instance knows (it then waits for nothing)."""
    try:
        document = json.loads(value)
    except ValueError:
        return None
    if not isinstance(document, dict):
        return None
    match document:
        case {"tail": tail} if ref is not None and (tail is None or _offset(tail)):
            return TailMoved(ref, tail)
        case {"snapshot": offset} if ref is not None and _offset(offset):
            return SnapshotPublished(ref, offset)
        case {"trimmed": earliest} if ref is not None and _offset(earliest):
            return Trimmed(ref, earliest)
        case {"bucket": bool() as exists} if bucket_id is not None:
            etag = document.get("etag")
            return BucketChanged(bucket_id, exists, etag if isinstance(etag, str) else None)
    return None


def _offset(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
