"""When each error code is answered and what a client should do, for `docs/reference/errors.md`.

One entry per `ErrorCode`; a unit test fails when one is missing."""

from __future__ import annotations

# code: (when it is answered, what a client should do)
HELP: dict[str, tuple[str, str]] = {
    "bad_request": (
        "an append with a body and no `Content-Type`; a malformed request (a NUL or bare CR, a bad chunk size, a body shorter than its length); a gzip or zstd body that is malformed or ends early; a path that is not UTF-8 once percent-decoded",
        "Fix the request; retrying it unchanged fails again.",
    ),
    "invalid_bucket_id": (
        "a bucket id the surface does not accept, or a reserved one",
        "Use an id of 1 to 128 characters the surface accepts; do not retry unchanged.",
    ),
    "invalid_stream_id": (
        "a stream id the surface does not accept (on `/v1/stream/`, `streams` too: `/{bucket}/streams` is the listing)",
        "Use a stream id the surface accepts; do not retry unchanged.",
    ),
    "invalid_offset": (
        "an `offset` that is not `-1`, `now` or a token",
        "Send `-1`, `now` or a token taken from `Stream-Next-Offset`; never build tokens yourself.",
    ),
    "invalid_header": (
        "a malformed `Stream-TTL`, `Stream-Expires-At` (or one outside years 1 to 9999 in UTC), `Content-Type`, `Stream-Seq`, `Producer-Id` (empty, or not UTF-8), `Producer-Epoch`, `Producer-Seq` or `Stream-Fencing-Token` (a fence without one, too); TTL and Expires-At together; only some of the three `Producer-*` headers",
        "Fix the named header; the message says which and why.",
    ),
    "invalid_query": (
        "a bad `limit`, `live`, `timeout`, `max_bytes` or `max_messages`; a listing's `prefix` or `after` no stream id could start with (over 122 bytes, a NUL, a query not UTF-8 once percent-decoded); `live` without `offset` or `at`; `offset` and `at` together",
        "Fix the named query parameter.",
    ),
    "invalid_time": (
        "an `at` that is neither milliseconds since 1970 (at most 2^53 - 1) nor an RFC 3339 date-time such as `2030-01-02T03:04:05Z`",
        "Send the moment as a whole number of milliseconds or as an RFC 3339 date-time with its offset.",
    ),
    "invalid_json": (
        "a JSON-mode body that is not one JSON text in UTF-8",
        "Send one JSON text in UTF-8.",
    ),
    "invalid_trim": (
        'a `POST {stream}/trim` JSON body that is neither `{"before": "<offset token>"}` nor `{"at": <time>}` (another field, both, or a `before` that is not a string)',
        'Send `{"before": "<offset token>"}` with a token taken from `Stream-Next-Offset` (or `now`), or `{"at": <ms or RFC 3339 time>}`.',
    ),
    "invalid_retention": (
        'a bucket configuration (the body of `PUT /{bucket}` or `PUT /{bucket}/config`) other than `{"retention": {"max_age_ms": <ms>}}`: another field, a `retention` that is not an object or null, a `max_age_ms` that is not an integer in 1000..2^53-1 or null',
        'Send `{"retention": {"max_age_ms": <milliseconds, at least 1000>}}`, or `{}` (or `max_age_ms: null`) for no age retention.',
    ),
    "trim_beyond_tail": (
        "a trim whose `before` is past the stream's tail (a trim never clamps)",
        "Trim at most to the tail: send a token the server gave you, or `now`.",
    ),
    "invalid_mount": (
        'a `PUT /{bucket}` JSON body that is not `{"mount": {...}}` with a valid topic name, media type, header name, `key_encoding` `utf8`, a boolean `appends` and no unknown field',
        "Fix the mount body as the message says.",
    ),
    "empty_body": (
        "an append with no body and no `Stream-Closed: true`",
        "Send a body, or `Stream-Closed: true` to close the stream.",
    ),
    "empty_json_array": (
        "a JSON-mode append of `[]`",
        "Send at least one message; `[]` appends nothing.",
    ),
    "invalid_producer_epoch": (
        "a new `Producer-Epoch` whose `Producer-Seq` is not 0",
        "Start a new epoch at `Producer-Seq: 0`.",
    ),
    "unauthorized": (
        "no bearer token, or one that is not valid (`WWW-Authenticate` says which)",
        "Send a valid bearer token (`Authorization: Bearer ...`, or `?access_token=` where allowed); get a new one if it expired.",
    ),
    "forbidden": ("not used", "Not sent today."),
    "insufficient_scope": (
        "a valid token without the route's scope (`WWW-Authenticate` names it)",
        "Use a token whose scopes cover the operation and bucket named in `WWW-Authenticate`.",
    ),
    "origin_not_allowed": (
        "a request (or preflight) from an origin not in `cors_origins`, not the server's own",
        "Serve the page from an allowed origin, or ask the operator to list it in `cors_origins`.",
    ),
    "stale_producer_epoch": (
        "a `Producer-Epoch` older than the producer's current one (answer carries `Producer-Epoch`)",
        "This producer was superseded: stop writing with it, or start a higher epoch at seq 0.",
    ),
    "topic_not_allowed": (
        "a mount over HTTP of a topic `mount_topics` does not allow, or of any deployment's internal topics (`*internal.*`) or Kafka's own (`__*`)",
        "Ask the operator to allow the topic in `mount_topics`, or mount it from the configuration (`[[mounts]]`); internal topics are never mountable.",
    ),
    "not_found": ("no such route", "Check the path."),
    "bucket_not_found": (
        "the bucket does not exist (or is being deleted, for a stream creation)",
        "Create the bucket first (`PUT /{bucket}`), or check its name.",
    ),
    "stream_not_found": (
        "the stream does not exist or has expired",
        "Create the stream first, or check its name; it may have expired or been deleted.",
    ),
    "snapshot_not_found": (
        "no visible snapshot (at that offset)",
        "Read from `-1` or from the stream's `Stream-Earliest-Offset`; no snapshot is published there.",
    ),
    "topic_not_found": (
        "a mount of a topic the cluster does not have",
        "Check the topic name of the mount.",
    ),
    "method_not_allowed": ("the route has no such method", "Use one of the methods in `Allow`."),
    "mount_read_only": (
        '`PUT` or `DELETE` of a stream of a mounted topic, `POST` unless the mount has `"appends": true` (with `Allow`)',
        "This mount does not take appends; write with a Kafka producer, or mount with `appends: true`.",
    ),
    "bucket_exists": (
        "`PUT /{bucket}` on an existing bucket",
        "The bucket is there already with other settings; use it, or pick another name.",
    ),
    "bucket_not_empty": (
        "`DELETE /{bucket}` while it has live streams, a stream creation is in flight, or forks of other buckets' streams keep their records in its topic (the message names them)",
        "Delete its streams first (and the forks of other buckets it names).",
    ),
    "stream_exists": (
        "PUT on a live stream with another configuration, or on a soft-deleted one",
        "The stream exists with another configuration; use it as it is, or pick another name.",
    ),
    "format_not_finalized": (
        "a fork across buckets, or a bucket's age retention, while format level 6 is not in force yet (during a rolling upgrade)",
        "Upgrade every instance, then run `durable-kafka upgrade finalize` (docs/how-to/upgrades.md).",
    ),
    "source_deleted": (
        "a fork of a soft-deleted stream",
        "The fork's source is deleted; fork from a live stream.",
    ),
    "topic_conflict": (
        '`PUT /{bucket}` (or a bucket created on demand) where a topic of the bucket topic\'s name exists with another `cleanup.policy` (with `topic_management = "external"`, also `retention.ms`/`retention.bytes` other than `-1` or a smaller `max.message.bytes`)',
        "A topic by that name exists and is not ours (or not as configured); the message names what differs.",
    ),
    "topic_missing": (
        'with `topic_management = "external"`: `PUT /{bucket}` (or a bucket created on demand, or a stream of a bucket whose topic is gone) whose topic does not exist; the message is the `kafka-topics.sh` command that creates it',
        "The platform team must create the topic first: the message carries the `kafka-topics.sh` command.",
    ),
    "stream_closed": (
        "an append to a closed stream",
        "The stream is closed; nothing more can be appended. Read it to its end.",
    ),
    "content_type_mismatch": (
        "an append whose media type is not the stream's",
        "Append with the stream's own `Content-Type`.",
    ),
    "sequence_conflict": (
        "a `Stream-Seq` not greater than the last one",
        "`Stream-Seq` must grow; a retry of an applied write is answered as a duplicate, not this.",
    ),
    "producer_sequence_gap": (
        "a `Producer-Seq` past the next expected one (answer carries `Producer-Expected-Seq`, `Producer-Received-Seq`)",
        "Resend the missing sequence numbers first (the answer carries the expected `Producer-Seq`).",
    ),
    "offset_beyond_tail": (
        "a snapshot offset past the stream's tail",
        "Read from an offset the server gave you, at most the tail.",
    ),
    "snapshot_in_use": (
        "`DELETE` of the latest snapshot (`/bootstrap` needs it)",
        "Wait until the snapshot is no longer needed, or publish a newer one first.",
    ),
    "mount_configured": (
        "`DELETE /{bucket}` of a mount from the config file",
        "This mount is set in the server's configuration; change it there.",
    ),
    "mount_not_configurable": (
        "`PUT /{bucket}/config` of a mounted topic: its retention is the topic's own (`retention.ms`), set in Kafka",
        "Change the topic's retention in Kafka, or copy the data into a bucket of its own.",
    ),
    "gone": (
        "any request to a soft-deleted stream (deleted while forks of it live)",
        "The stream or bucket was deleted; it will not come back under this URL's history.",
    ),
    "offset_gone": (
        "a read (or a snapshot, or a fork) below the earliest retained offset, moved by a snapshot or a trim; carries `Stream-Earliest-Offset`",
        "That data is below the retained range: read from `Stream-Earliest-Offset`, or rebuild from `/bootstrap`.",
    ),
    "precondition_failed": (
        "an append's or a PUT's `If-Match` names neither `*` nor the stream's ETag (or the PUT's stream does not exist); a PUT's `If-None-Match: *` finds the stream existing; a `PUT /{bucket}/config` whose `If-Match` is neither `*` nor the bucket's ETag (another writer changed it since)",
        "The `If-Match`/`If-None-Match` condition did not hold; read the current state and decide again.",
    ),
    "fencing_token_mismatch": (
        "an append whose `Stream-Fencing-Token` is not the stream's token (or carries none once a token is set, or one when none is set); the message says whether a token is set, never which",
        "Another writer fenced this one off: stop writing; a writer that should own the stream sets its own token with `POST {stream}/fence`.",
    ),
    "request_timeout": (
        "a request's head or body came later than `header_timeout_ms` / `body_timeout_ms` (the connection is closed; nothing written)",
        "Send the request's head and body promptly; retry the request.",
    ),
    "payload_too_large": (
        "a body over `max_message_bytes` − 16 KiB (refused from its `Content-Length` before it is read; a gzip or zstd body as soon as its decoded bytes pass it); a snapshot over `max_snapshot_bytes`",
        "Send less per request (split the append) or ask for larger limits.",
    ),
    "uri_too_long": ("a request line over 8,192 bytes", "Shorten the URL."),
    "unsupported_media_type": (
        "a request with a `Content-Encoding` other than `identity`, `gzip` (`x-gzip`) or `zstd`, or with two codings stacked; a coded snapshot publish",
        "Send the body uncoded, or coded once in gzip or zstd (a snapshot uncoded).",
    ),
    "host_not_allowed": (
        "a `Host` not in the allow-list (DNS rebinding)",
        "Address the server by a host it serves (`allowed_hosts`).",
    ),
    "rate_limited": (
        "a (principal, bucket) over `rate_limit_requests` or `rate_limit_append_bytes` (carries `Retry-After`)",
        "Wait for `Retry-After` seconds, then retry.",
    ),
    "too_many_readers": (
        "a live read past `max_live_readers_per_bucket` (carries `Retry-After`)",
        "Too many live readers on this bucket; retry after `Retry-After`, or share a reader.",
    ),
    "expectation_failed": (
        "an `Expect` other than `100-continue`",
        "Send no `Expect` header but `100-continue`.",
    ),
    "headers_too_large": (
        "a header field over 8,190 bytes, or more than 128 header fields",
        "Send fewer or smaller headers.",
    ),
    "not_ready": (
        "the catalog is not loaded yet; a read of a mount whose key index is still being built",
        "Retry after `Retry-After`: the instance is still loading (or a mount's index is being built).",
    ),
    "worker_unresponsive": (
        "`/healthz` or `/readyz` on the ops listener of `serve --workers N`: another worker of the instance did not answer its own probe within a second (its event loop is stalled or the process is stopped)",
        "Nothing for a client: the orchestrator takes the instance out of service (readiness) and restarts it if it stays so (liveness).",
    ),
    "unavailable": (
        "Kafka did not take or serve the data in time; a read of a mount whose indexer stopped; a write whose slot is changing owner, whose owner did not answer a forward, or whose writer was fenced; a bucket operation past its deadline (`3 × kafka_timeout_ms`), e.g. a bucket re-created while its old topic is still being deleted",
        "Retry after `Retry-After`: nothing was written. With `Producer-*` headers a retry is always safe.",
    ),
    "too_many_connections": (
        "the connection is past `max_connections` or `max_connections_per_address`, or the instance is short of file descriptors; answered as soon as it is made, then closed",
        "Retry on a new connection after `Retry-After`, or reuse fewer connections.",
    ),
    "outcome_unknown": (
        "a write whose Kafka commit got no answer and whose outcome could not be learned within the learning budget: it may or may not have been written",
        "The write may or may not have happened: retry with the same `Producer-*` headers (answered 204 as a duplicate if it landed), or read the stream to find out.",
    ),
    "internal_error": (
        "a bug (logged with its traceback)",
        "A bug: retry once, and report it with the request id from `X-Request-Id` and the server's log line.",
    ),
}
