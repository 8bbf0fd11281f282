"""Typed commands and results: what the HTTP edge (and the background sweeps) hand to the
stream logic and get back."""

from __future__ import annotations

from dataclasses import dataclass, field

from adapter.protocol.json_mode import SplitBody
from adapter.protocol.model import StreamMeta
from adapter.protocol.offsets import ReadFrom
from adapter.protocol.producers import ProducerPosition
from adapter.protocol.read_options import UNBOUNDED, Bounds
from topology.wire import ProducerStamp


@dataclass(frozen=True)
class StreamRef:
    bucket_id: str
    stream_id: str
    # On the /v1/stream surface buckets are created on demand; on /{bucket} they must exist.
    create_bucket: bool = False


@dataclass(frozen=True)
class ForkFrom:
    """Where a fork branches: `Stream-Forked-From`, `Stream-Fork-Offset`, `-Sub-Offset`."""

    source_id: str  # a stream of `source_bucket`
    offset: int | None  # a Kafka offset of the source's history; None: the source's tail
    sub_offset: int = 0  # bytes (binary) or messages (JSON) past `offset`, copied
    source_bucket: str | None = None  # None: the fork's own bucket

    def source_of(self, ref: StreamRef) -> tuple[str, str]:
        """(bucket, stream) of the source of a fork created at `ref`."""
        bucket_id = ref.bucket_id if self.source_bucket is None else self.source_bucket
        return bucket_id, self.source_id


@dataclass(frozen=True)
class CreateStream:
    ref: StreamRef
    content_type: str | None  # None: omitted (the source's for a fork, else the default)
    ttl_seconds: int | None
    expires_at_ms: int | None
    closed: bool
    body: bytes
    fork: ForkFrom | None = None
    forward_id: str | None = None  # set by the instance that forwarded it here (its records')
    if_match: str | None = None  # the stream must exist with this ETag (or `*`: exist at all)
    if_none_match: str | None = None  # `*`: the stream must not exist yet
    split: SplitBody | None = None  # a JSON body's messages, split in steps; None: not yet


@dataclass(frozen=True)
class Append:
    ref: StreamRef
    content_type: str | None
    body: bytes
    close: bool
    seq: str | None
    if_match: str | None
    producer: ProducerStamp | None = None
    forward_id: str | None = None  # set by the instance that forwarded it here (its records')
    fencing_token: str | None = None  # `Stream-Fencing-Token`: must equal the stream's token
    split: SplitBody | None = None  # a JSON body's messages, split in steps; None: not yet


@dataclass(frozen=True)
class Fence:
    """Set the token every later append to the stream must carry (`POST {stream}/fence`)."""

    ref: StreamRef
    token: str


@dataclass(frozen=True)
class Trim:
    """Remove the stream's messages below `before` (`POST {stream}/trim`): a Kafka offset, or
    `now` (its tail) or `-1` (its beginning: nothing)."""

    ref: StreamRef
    before: ReadFrom


@dataclass(frozen=True)
class PublishSnapshot:
    """A snapshot blob already stored under `object_key`, to become the stream's latest."""

    ref: StreamRef
    offset: int  # a Kafka offset decoded from the path's token
    content_type: str
    size: int
    object_key: str
    sha256: str
    commit_by_ms: int  # past it the blob may be collected as an orphan: refuse, never commit


@dataclass(frozen=True)
class DeleteStream:
    """Delete the stream (`DELETE {stream}`): soft-deleted while forks of it still read it."""

    ref: StreamRef


@dataclass(frozen=True)
class Collect:
    """Forget a soft-deleted stream whose forks are all gone (a sweep's command)."""


@dataclass(frozen=True)
class Expire:
    """Forget a stream that expired before `before_ms` (a sweep's command)."""

    before_ms: int


@dataclass(frozen=True)
class Access:
    """The stream was read (or written) at `at_ms`: here, or on another instance that said so."""

    at_ms: int


@dataclass(frozen=True)
class Read:
    ref: StreamRef
    start: ReadFrom  # a sentinel, or a Kafka offset decoded from a token
    bounds: Bounds = UNBOUNDED  # `max_bytes` and `max_messages`


@dataclass(frozen=True)
class Created:
    meta: StreamMeta
    created: bool  # False: it existed already with the same configuration


@dataclass(frozen=True)
class KafkaPosition:
    """Where an append's first record is in Kafka (for the request's log line)."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Appended:
    meta: StreamMeta
    appended: bool  # False: nothing written (a duplicate, or closing a closed stream)
    producer: ProducerPosition | None = None  # epoch and highest accepted seq, to echo
    kafka: KafkaPosition | None = None  # where it was written, when it was


@dataclass(frozen=True)
class Chunk:
    meta: StreamMeta
    messages: list[bytes]
    start: int  # Kafka offset the read started at
    next_offset: int
    up_to_date: bool  # the chunk reaches the stream's tail as of this read
    # The W3C trace contexts its messages' records carry (tracing on), each once: the appends
    # a live delivery of it links to.
    traces: list[bytes] = field(default_factory=list)
