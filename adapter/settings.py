"""Every setting of an instance, each declared once: type, default, TOML table and key, bounds
or allowed values, help text (`adapter.declared`). The loader (`adapter.config`), `serve --help`
and docs/reference/settings.md are derived from these declarations."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from typing import Any, Literal

from adapter.declared import Rule, setting
from adapter.memory_limit import AUTO as MEMORY_AUTO
from adapter.structured_settings import CERTIFICATES, CLIENT_PROPERTIES, MOUNTS
from topology.naming import DEFAULT_PREFIX
from topology.replication import AUTO as REPLICATION_AUTO

ColdBackend = Literal["fs", "s3"]
AuthMode = Literal["off", "static", "jwt"]
EventLoop = Literal["uvloop", "asyncio"]
ConsoleMode = Literal["off", "ro", "rw"]
TopicManagementMode = Literal["auto", "external"]
ClientAuth = Literal["none", "optional", "required"]
# Room for a record's key (a stream id, at most 122 bytes), headers and batch framing.
RECORD_OVERHEAD_BYTES = 16 * 1024
MAX_WORKERS = 64
# What Kafka accepts as a group.instance.id (the rule of topic names).
_INSTANCE_ID = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_NOT_IN_INSTANCE_ID = re.compile(r"[^a-zA-Z0-9._-]")
_TOPIC_PREFIX = re.compile(r"^[a-zA-Z0-9._-]{1,100}$")
_HTTP_BASE = re.compile(r"^https?://[^/\s]+/?$")
# Signature algorithms a JWT may use: asymmetric only, so the adapter never holds a signing key.
JWT_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


def _valid_listen(listen: str) -> bool:
    host, sep, port = listen.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 <= int(port) <= 65535)


def _http_base_or_empty(value: str) -> bool:
    return not value or bool(_HTTP_BASE.match(value))


def _algorithms(value: str) -> bool:
    chosen = comma_list(value)
    return bool(chosen) and set(chosen) <= JWT_ALGORITHMS


LISTEN = Rule(_valid_listen, "{name} {value} is not HOST:PORT")
OPS_LISTEN = Rule(
    lambda value: value == "" or _valid_listen(value),
    "{name} {value} is not HOST:PORT (or empty: no ops listener)",
)
NOT_BLANK = Rule(lambda value: bool(value.strip()), "{name} is empty")
TOPIC_PREFIX = Rule(lambda value: bool(_TOPIC_PREFIX.match(value)), "{name}: only [a-zA-Z0-9._-]")
ADVERTISE_URL = Rule(_http_base_or_empty, "{name} must be http(s)://HOST[:PORT]")
TRACING_ENDPOINT = Rule(
    _http_base_or_empty, "{name} must be http(s)://HOST[:PORT] (or empty: tracing off)"
)
INSTANCE_ID = Rule(
    lambda value: not value or bool(_INSTANCE_ID.match(value)),
    "{name}: 1 to 249 of [a-zA-Z0-9._-]",
)
ALGORITHMS = Rule(
    _algorithms,
    f"{{name}}: a comma list of {sorted(JWT_ALGORITHMS)} ('none' and shared-secret algorithms "
    "are refused)",
)


@dataclass(frozen=True)
class Settings:
    """Every setting of one adapter instance. docs/reference/settings.md lists each one."""

    listen: str = setting(
        "127.0.0.1:4437",
        "server",
        "listen",
        "HTTP listen address, `HOST:PORT`. An address this process cannot listen on (a port in use, a host not its own) stops the start with one line naming it (exit 2)",
        rule=LISTEN,
    )
    log_level: str = setting(
        "info",
        "server",
        "log_level",
        "debug, info, warning, error",
        choices=("debug", "info", "warning", "error"),
    )
    event_loop: EventLoop = setting(
        "uvloop",
        "server",
        "event_loop",
        "`uvloop` (libuv's loop, a pinned dependency: less CPU per request, see docs/performance.md) or `asyncio` (the standard library's, the fallback should uvloop misbehave on a platform); start-up logs which one serves",
        choices=("uvloop", "asyncio"),
    )
    # Serving processes on the listener (SO_REUSEPORT); 0: one per core (`worker_count`).
    workers: int = setting(
        1,
        "server",
        "workers",
        'serving processes on `listen` (`SO_REUSEPORT`), each a whole adapter owning its share of the write slots; `auto` (or `0`): one per core (at most `write_slots`); `1`: a single process. Not one per core by default: on a 2-core machine shared with the broker, `auto` (2 workers) served 0.73–0.86× the appends per second of one worker (a forwarded append costs about twice a local one, and the broker needs the second core); a second process helps once the server has cores the broker does not use. See "Workers"',
        low=0,
        high=MAX_WORKERS,
        auto=0,
        note="(auto or 0: one per core)",
    )
    log_format: str = setting(
        "json",
        "server",
        "log_format",
        '`json`: one JSON object a line (see "Logs"); `text`: `time LEVEL logger: message`',
        choices=("json", "text"),
    )
    ops_listen: str = setting(
        "127.0.0.1:9464",
        "server",
        "ops_listen",
        "the ops listener (`/metrics`, `/healthz`, `/readyz`), `HOST:PORT`; port 0 picks a free one (logged); empty: none. An address this process cannot listen on (a port in use: a second instance on the host needs its own) stops the start with one line naming it (exit 2)",
        rule=OPS_LISTEN,
    )
    drain_timeout_ms: int = setting(
        10_000,
        "server",
        "drain_timeout_ms",
        "on SIGTERM, how long requests in flight (long-polls included) may take to finish before they are cut off; ≥ 0",
        low=0,
    )
    # How often the files holding secrets are checked for new content (0: never; SIGHUP still
    # reloads the certificate): Kubernetes swaps a mounted Secret's files and signals nothing.
    secret_poll_ms: int = setting(
        5_000,
        "server",
        "secret_poll_ms",
        'how often the files holding secrets are read again (every few seconds: a Kubernetes Secret update replaces them without a signal): `tls_cert_file` and `tls_key_file`, `tls_client_ca_file`, `auth_token_file`, `kafka_client_file` and the Kafka certificate files it names; a changed one is reloaded, without a restart (see "Rotating secrets"). 0: never (SIGHUP still reloads the certificate); else ≥ 100',
        low=100,
        off=0,
    )
    # HTTPS on `listen` when both are set (PEM files; the pair is reloaded on SIGHUP).
    tls_cert_file: str = setting(
        "",
        "tls",
        "cert_file",
        "the server's certificate chain (PEM: the certificate first, then any intermediates); with `tls_key_file`, the API is served over HTTPS on `listen` (and on each worker's own port). Reloaded when it changes (`secret_poll_ms`) and on SIGHUP; see \"HTTPS\"",
    )
    tls_key_file: str = setting(
        "",
        "tls",
        "key_file",
        "the certificate's private key (PEM, unencrypted). Setting only one of the pair is a start error naming the other",
    )
    # Set: client certificates are asked for and verified.
    tls_client_ca_file: str = setting(
        "",
        "tls",
        "client_ca_file",
        "CA certificates (PEM) that client certificates are verified against; needs `tls_cert_file`. Read at start and again once it changes (`secret_poll_ms`): a certificate added is trusted, and one removed refused, from the next handshake",
    )
    tls_client_auth: ClientAuth = setting(
        "optional",
        "tls",
        "client_auth",
        "with `tls_client_ca_file`: `optional` (a client may present a certificate; one presented must verify) or `required` (a connection without a verified certificate is refused in the handshake); `none` is refused with a CA file (it would be ignored)",
        choices=("none", "optional", "required"),
    )
    # Set: writes forwarded to another instance over HTTPS verify its certificate against it.
    tls_peer_ca_file: str = setting(
        "",
        "tls",
        "peer_ca_file",
        "CA certificates (PEM) that verify another instance's HTTPS certificate when a write is forwarded to it. Set, the chain must verify against these alone and the certificate's names are not compared: instances are reached at their advertised address (on Kubernetes a pod's IP), which certificates rarely name, so use a CA that issues only this deployment's certificates (cert-manager's `ca.crt`). Empty: the system's trust store, and the advertised host must be a name in the certificate. Read at start",
    )
    bootstrap_servers: str = setting(
        "127.0.0.1:9092", "kafka", "bootstrap_servers", "Kafka bootstrap list", rule=NOT_BLANK
    )
    # librdkafka properties of every Kafka client: `kafka_client_file` (a client.properties),
    # then `[kafka.client]` (env and flag: a JSON object) over it; `load` merges them here.
    kafka_client_file: str = setting(
        "",
        "kafka",
        "client_file",
        'a Java-style `client.properties` of librdkafka keys for every Kafka client; a Java client\'s keys (`sasl.jaas.config`, PKCS12 `ssl.truststore.*`/`ssl.keystore.*`) are translated at start, JKS stores refused (see "Secure Kafka")',
    )
    kafka_client: tuple[tuple[str, str], ...] = setting(
        (),
        "kafka",
        "client",
        'librdkafka properties for every Kafka client, over the file\'s; keys the server sets are refused (see "Secure Kafka")',
        structured=CLIENT_PROPERTIES,
        secret=True,
    )
    topic_prefix: str = setting(
        DEFAULT_PREFIX,
        "kafka",
        "topic_prefix",
        "prefix of every topic we create and of the transactional id; 1 to 100 of `[a-zA-Z0-9._-]`",
        rule=TOPIC_PREFIX,
    )
    partitions: int = setting(
        12,
        "kafka",
        "partitions",
        "partitions of each **new** bucket topic (1..10000); existing buckets keep theirs",
        low=1,
        high=10_000,
    )
    # `auto`: resolved from the cluster at start (`topology/replication.py`).
    replication_factor: int = setting(
        REPLICATION_AUTO,
        "kafka",
        "replication_factor",
        "replicas of every topic we create; `auto` (or 0): resolved from the cluster's broker count at start, 3 on 3 brokers or more, else one per broker (1 on a single-broker dev stack); or a count ≥ 1. A count of 1 on 3 brokers or more is refused at start (exit 1) unless `allow_unreplicated`",
        low=1,
        auto=REPLICATION_AUTO,
        shown="`auto`",
    )
    min_insync_replicas: int = setting(
        REPLICATION_AUTO,
        "kafka",
        "min_insync_replicas",
        "`min.insync.replicas` of our topics; `auto` (or 0): 2 when the replication factor is 3 or more, else 1; or a count in 1..replication_factor (more than the resolved factor is refused at start)",
        low=1,
        auto=REPLICATION_AUTO,
        shown="`auto`",
    )
    allow_unreplicated: bool = setting(
        False,
        "kafka",
        "allow_unreplicated",
        '`true`: accept an explicit `replication_factor = 1` on a cluster of 3 brokers or more (still warned as weak, see "Durability at start")',
    )
    require_durable_topics: bool = setting(
        False,
        "kafka",
        "require_durable_topics",
        '`true` or `false` (a TOML bool): refuse to start (exit 1) when the cluster has 3 brokers or more but `replication_factor` < 3 or `min_insync_replicas` < 2, instead of only warning (see "Durability at start")',
    )
    topic_management: TopicManagementMode = setting(
        "auto",
        "kafka",
        "topic_management",
        '`auto`: the server creates the topics it needs and deletes a bucket\'s topic with the bucket; `external`: a platform team creates them, the server never creates, alters or deletes a topic (see "Topics managed by a platform team")',
        choices=("auto", "external"),
    )
    max_message_bytes: int = setting(
        8 * 1024 * 1024,
        "kafka",
        "max_message_bytes",
        "`max.message.bytes` of our topics; the largest request body is this minus 16384 (larger: 413); ≥ 65536",
        low=65536,
    )
    kafka_timeout_ms: int = setting(
        10_000,
        "kafka",
        "timeout_ms",
        "deadline of each broker or S3 call; a read fails after twice this; ≥ 100",
        low=100,
    )
    # librdkafka's statistics of every client, for the metrics; 0: off.
    kafka_statistics_interval_ms: int = setting(
        15_000,
        "kafka",
        "statistics_interval_ms",
        "how often each Kafka client hands librdkafka's statistics to the metrics (`statistics.interval.ms`): broker round-trips, transaction states, queued messages (`durable_kafka_kafka_*`); `0`: off (those series then stay empty); 100..86400000. A few kilobytes of JSON parsed per client each time",
        low=100,
        high=86_400_000,
        off=0,
        shown="`15000` (`0`: off)",
    )
    max_append_messages: int = setting(
        10_000,
        "server",
        "max_append_messages",
        "most messages one request writes (a JSON array is one message per element, counted as it is split: past this, 413 `payload_too_large` at once, nothing written; appends to writable mounts too); 1..50000",
        low=1,
        high=50_000,
    )
    max_snapshot_bytes: int = setting(
        128 * 1024 * 1024,
        "server",
        "max_snapshot_bytes",
        "largest snapshot blob `PUT {stream}/snapshot/{offset}` accepts (more: 413 `payload_too_large`, nothing stored); >= 1",
        low=1,
    )
    snapshot_gc_grace_ms: int = setting(
        600_000,
        "server",
        "snapshot_gc_grace_ms",
        "a snapshot blob nothing points to (superseded, of a deleted stream, of a publish that never committed) is deleted once the collector has seen it so for this long; a publish must commit within half of it (else 503, nothing visible); a snapshot's retention (or a trim) frees Kafka and the cold tier this long after its publish (or the trim); ≥ 10 × `kafka_timeout_ms`. Instances may differ: a blob's key names its publisher's window, and a collector waits twice that for an upload it never saw committed",
    )
    snapshot_gc_interval_ms: int = setting(
        60_000,
        "server",
        "snapshot_gc_interval_ms",
        "how often the collector lists the blobs (and the cold tier's collector its chunks, with the same grace period); ≥ 1000",
        low=1000,
    )
    age_retention_interval_ms: int = setting(
        5_000,
        "server",
        "age_retention_interval_ms",
        'how often each instance trims the streams of the partitions it owns in buckets with age retention (`retention.max_age_ms`) below their first message younger than that: a message stays readable at most this long past its age (longer where the cut lies in the cold tier, see "Age retention"); ≥ 100',
        low=100,
    )
    max_inflight_body_bytes: int = setting(
        256 * 1024 * 1024,
        "server",
        "max_inflight_body_bytes",
        "most request body bytes held by the requests in flight (a body counts its `Content-Length`, a chunked or gzip/zstd-coded one the largest body, until its request is answered); a request with a body past it: 503 `unavailable` + `Retry-After` before its body is read; ≥ max_message_bytes − 16384",
    )
    header_timeout_ms: int = setting(
        10_000,
        "http",
        "header_timeout_ms",
        "from a request's first byte to the end of its head (request line and headers); later: 408 `request_timeout`, connection closed",
        low=10,
    )
    body_timeout_ms: int = setting(
        60_000,
        "http",
        "body_timeout_ms",
        "from the end of a request's head to the end of its body (a body shorter than its `Content-Length`, an endless chunked body); later: 408 `request_timeout`, nothing written, connection closed",
        low=10,
    )
    keepalive_timeout_ms: int = setting(
        75_000,
        "http",
        "keepalive_timeout_ms",
        "an idle connection (between requests, or before its first) is closed after it (aiohttp's `keepalive_timeout`)",
        low=10,
    )
    max_connections: int = setting(
        16_384,
        "http",
        "max_connections",
        "client connections open at once (TLS handshakes under way included); lowered at start to the descriptor limit (`RLIMIT_NOFILE`) less 512 (with a warning), `0` is that bound. A connection past it is answered 503 `too_many_connections` + `Retry-After` at once, before any request, and closed (over HTTPS: closed before its handshake)",
        low=0,
        note="(0: no limit)",
    )
    max_connections_per_address: int = setting(
        0,
        "http",
        "max_connections_per_address",
        "client connections open at once from one client address; past it as `max_connections`. Off by default: behind a proxy or NAT every client shares one address (and the SSE fan-out bench opens 10,000 from loopback); set it when clients reach the adapter directly",
        low=0,
        note="(0: no limit)",
        shown="`0` (no limit)",
    )
    # `auto`: from the container's limit at start (`adapter/memory_limit.py`).
    max_memory_bytes: int = setting(
        MEMORY_AUTO,
        "server",
        "max_memory_bytes",
        "resident memory (RSS, read from `/proc/self/statm` at most every 50 ms) at or past which every request but `/healthz` and `/readyz` is answered 503 `unavailable` + `Retry-After` and its connection closed, until it is back under; ≥ 64 MiB, or `0` (no cap). `auto`: 75 % of the container's memory limit (cgroup v2 `/sys/fs/cgroup/memory.max`, logged at start), so a pod sheds load before it is OOM-killed; no cap where there is no limit. Leave headroom when setting it: Python does not always give freed memory back, so set it well above the steady state (e.g. 1.5× the RSS under normal load) and below the container's limit",
        low=64 * 1024 * 1024,
        auto=MEMORY_AUTO,
        off=0,
        off_means="no cap",
        note="(64 MiB)",
        shown="`auto`",
    )
    read_chunk_bytes: int = setting(
        1024 * 1024,
        "server",
        "read_chunk_bytes",
        "most message bytes of one stream in one read response or SSE data event (a larger single message comes alone); ≥ 1",
        low=1,
    )
    read_scan_bytes: int = setting(
        16 * 1024 * 1024,
        "server",
        "read_scan_bytes",
        "most bytes of the partition (all streams' records, each counting its key, value, headers and 256 bytes for itself) one read, or one lookup by time, scans; also the most record values (bytes) of its partition an instance not writing a stream reads to learn its tail (past it: no `Stream-Up-To-Date`, 503 with nothing to serve; the next read goes on from where that scan stopped); ≥ read_chunk_bytes",
    )
    hot_cache_bytes: int = setting(
        64 * 1024 * 1024,
        "server",
        "hot_cache_bytes",
        "most payload bytes of recently committed messages kept in memory to answer reads (and woken live readers) without Kafka (of at most `catalog_cache_entries` streams); past it, the streams written longest ago are dropped; 0 = off; ≥ 0",
        low=0,
    )
    catalog_dir: str = setting(
        ".data/catalog",
        "server",
        "catalog_dir",
        "folder of the catalog's index (a SQLite file per process, `catalog-{prefix}.{n}.sqlite3`, kept across restarts: a start resumes the replay of the state topics from the file's checkpoint when it is still valid, and rebuilds it from the log otherwise; see docs/architecture.md, \"The catalog's memory\"); local disk, a few hundred bytes per stream; deleting the folder while stopped only makes the next start rebuild",
    )
    catalog_cache_entries: int = setting(
        4096,
        "server",
        "catalog_cache_entries",
        "streams whose metadata (and, separately, producer states and snapshot pointers) stay in memory, the most recently used; the rest are read from the catalog's index on use (≈ 0.6–1.5 KiB of memory per entry); also the most streams whose hot tail is kept (`hot_cache_bytes`); ≥ 1",
        low=1,
    )
    catalog_cache_bytes: int = setting(
        0,
        "server",
        "catalog_cache_bytes",
        "when > 0, the catalog's three caches (stream metadata, producer states, snapshot pointers) also hold at most a third of this each, by an estimate of each entry's Python objects (≈ 600 bytes a stream, ≈ 640 a stream's single producer state, +365 per further producer, ≈ 200 a known absence), evicting the least recently used past it; bounds memory by bytes whatever the ids' lengths, forks' histories or producers per stream; `catalog_cache_entries` still applies; 0 = by entries only; ≥ 0",
        low=0,
    )
    catalog_checkpoint_ms: int = setting(
        30_000,
        "server",
        "catalog_checkpoint_ms",
        "how often the catalog's file is saved with the state topics' positions (and at every clean stop); a restart after a crash replays the log from the last one; 0 = only at stop; ≥ 0",
        low=0,
    )
    slot_checkpoint_ms: int = setting(
        5_000,
        "server",
        "slot_checkpoint_ms",
        "how often the owner of a write slot writes the state (`StreamMeta` and producer states, to the meta and producers topics) of the slot's streams whose appends wrote none since (format level 7: a pure append writes only its data record), in one transaction of the slot's writer, and at a clean hand-over; at most one record per stream per interval; a new owner carries the streams forward from there over their records (see \"Writing\" in the architecture); ≥ 100",
        low=100,
    )
    expired_gc_grace_ms: int = setting(
        600_000,
        "server",
        "expired_gc_grace_ms",
        "how long after its TTL or `Expires-At` passed an expired stream is forgotten (tombstones of its state, snapshot pointer and producer states, written by its slot's owner in the sweep that runs every 60 s), unless a live fork reads it; until then it answers 404 but stays in the catalog and holds its records in Kafka; ≥ 0",
        low=0,
    )
    max_view_age_ms: int = setting(
        5_000,
        "server",
        "max_view_age_ms",
        "how recently this instance must have known that it followed every acknowledged write (the meta topic's high watermark reached, measured twice a second) to say `Stream-Up-To-Date`; past it (the broker or a transaction coordinator unreachable), reads that reach the tail serve their messages without it, or answer 503 when they have none, and so do long-polls and `/bootstrap` (an SSE session at the tail ends); ≥ 100",
        low=100,
    )
    long_poll_timeout_ms: int = setting(
        20_000,
        "live",
        "long_poll_timeout_ms",
        "longest wait of a `live=long-poll` read before its 204; a client's `timeout` (seconds) can only shorten it; 0 = never wait; ≥ 0",
        low=0,
    )
    sse_max_duration_ms: int = setting(
        60_000,
        "live",
        "sse_max_duration_ms",
        "an SSE response ends after this; the client reconnects from its last offset; ≥ 1000",
        low=1000,
    )
    sse_heartbeat_ms: int = setting(
        15_000,
        "live",
        "sse_heartbeat_ms",
        "quiet time after which an SSE response gets a `: keep-alive` comment; ≥ 100",
        low=100,
    )
    sse_write_timeout_ms: int = setting(
        10_000,
        "live",
        "sse_write_timeout_ms",
        "an SSE write that does not complete in this time (a client not reading) ends that client's session; ≥ 100",
        low=100,
    )
    cold_backend: ColdBackend = setting(
        "fs", "cold", "backend", "`fs` (a local folder) or `s3`", choices=("fs", "s3")
    )
    cold_dir: str = setting(".data/cold", "cold", "dir", "folder of the `fs` backend")
    cold_dir_shared: bool = setting(
        False,
        "cold",
        "dir_shared",
        "`true` or `false` (a TOML bool). With `fs`, an instance refuses to start (exit 1) when another instance of the deployment (a member of the owners' group) has left no marker `instances/<instance id>` in its `cold_dir`, i.e. does not share the folder, and one that later sees a write slot taken by an instance without a marker `instances/url/<its advertised URL>` turns its `object_store` check false; `true` skips that check (every instance mounts the same folder). Workers of one instance, and instances on one machine with the same `cold_dir`, share it and need nothing (but instances of a version that wrote no markers count as not sharing it: when several instances share one folder, upgrade them with `true` for the upgrade, or stop them all first)",
    )
    s3_bucket: str = setting(
        "durable-kafka",
        "cold",
        "s3_bucket",
        "bucket of the `s3` backend (created if missing; required with `s3`)",
    )
    s3_endpoint_url: str = setting(
        "", "cold", "s3_endpoint_url", "e.g. `http://minio:9000`", shown="none (AWS)"
    )
    s3_region: str = setting(
        "us-east-1",
        "cold",
        "s3_region",
        "the region boto3 signs S3 requests for (any value works for MinIO)",
    )
    s3_access_key_id: str = setting(
        "",
        "cold",
        "s3_access_key_id",
        "prefer the environment for secrets; unset means boto3's own chain (AWS_* variables, profile, instance role)",
        shown="none (boto3's chain)",
    )
    s3_secret_access_key: str = setting(
        "", "cold", "s3_secret_access_key", "as above", shown="none (boto3's chain)"
    )
    tier_after_bytes: int = setting(
        1024 * 1024 * 1024,
        "tier",
        "after_bytes",
        "the hot window by size: a partition's records more than this many value bytes behind its head are tiered to the cold store and then freed in Kafka (DeleteRecords); ≥ 0",
        low=0,
    )
    tier_after_ms: int = setting(
        3_600_000,
        "tier",
        "after_ms",
        "the hot window by age: only records older than this (by their Kafka timestamp) are tiered; both windows must be passed; ≥ 0",
        low=0,
    )
    tier_interval_ms: int = setting(
        30_000,
        "tier",
        "interval_ms",
        "how often the tier worker runs over the partitions this instance owns; after a failed pass the wait doubles, up to 32 intervals; ≥ 100",
        low=100,
    )
    tier_cache_bytes: int = setting(
        64 * 1024 * 1024,
        "tier",
        "cache_bytes",
        "most payload bytes of decoded cold chunk blocks (~256 KiB each) kept in memory for cold reads (least recently used out), plus 1/16 of it (at least 64 KiB) for chunk headers; 0 = no block cache; ≥ 0",
        low=0,
    )
    write_slots: int = setting(
        8,
        "cluster",
        "write_slots",
        "write slots (1..1024): the partitions of `{topic_prefix}internal.slots`, the transactional producers an instance may run, the most instances that share the writes; the same on every instance",
        low=1,
        high=1024,
    )
    concurrent_transactions: int = setting(
        4,
        "cluster",
        "concurrent_transactions",
        "how many of this process's write slots write a Kafka transaction at once (0: every slot, no limit; 0..1024); a slot that waits gathers the appends arriving meanwhile into its next transaction, so the same appends go in fewer, larger transactions, which cost the server and the broker less CPU each. A slot never waits more than 100 ms for a turn (one held up by a partition leader moving does not stop the others). On 2 cores, 100 writers on 8 slots: 4 served 1.15–1.2× the appends per second of 0",
        low=0,
        high=1024,
    )
    advertise_url: str = setting(
        "",
        "cluster",
        "advertise_url",
        "the base URL (`http(s)://HOST[:PORT]`) other instances forward writes to; published in `{topic_prefix}internal.owners` for each slot this instance takes (and as its owners' consumer `client.id`, followed by `#reads=N`: the newest record format level it reads)",
        rule=ADVERTISE_URL,
        shown="none (`http://{listen host}:{port}`)",
    )
    owner_session_timeout_ms: int = setting(
        10_000,
        "cluster",
        "session_timeout_ms",
        "`session.timeout.ms` of the owners' group: how long a crashed instance's slots wait before moving, unless it is restarted first (1000..300000, within the broker's `group.min/max.session.timeout.ms`)",
        low=1000,
        high=300_000,
    )
    # How long an owner must look gone (its address refusing connections) or paused (neither
    # a forward nor its liveness probe answered) before a peer evicts it from the owners'
    # group: adapter/cluster/dead_owners.py. 0 for the latter: a paused owner keeps its slots.
    owner_refused_ms: int = setting(
        500,
        "cluster",
        "owner_refused_ms",
        "how long the advertised address of an owner a forwarded write failed to must refuse every connection (one every 0.25 s at most) before the forwarding instance removes it from the owners' group, so that its slots move at once instead of after `owner_session_timeout_ms`. A live process never refuses (its kernel accepts connections however loaded or paused it is), so a longer bound only slows the takeover of a dead owner (100..60000)",
        low=100,
        high=60_000,
    )
    owner_unanswered_ms: int = setting(
        3_000,
        "cluster",
        "owner_unanswered_ms",
        "how long an owner that has not answered a forwarded write for 0.5 s may also leave its `/healthz` unanswered (while its address accepts connections: a paused or hung process) before the forwarding instance removes it from the owners' group; when it resumes it is fenced and writes nothing. Too short takes slots from instances whose event loop stalls that long under load (false takeovers: each moves their slots twice); 0: never, such an owner keeps its slots until `owner_session_timeout_ms` runs out (0 or 1000..300000)",
        low=1000,
        high=300_000,
        off=0,
    )
    # How long a connection to another instance may take to open (adapter/http/peers.py).
    peer_connect_timeout_ms: int = setting(
        1_000,
        "cluster",
        "peer_connect_timeout_ms",
        "how long a connection to another instance (a forwarded write, a read's renewal told to its owner, the check of this instance's own advertised URL) may take to open; a forwarded write whose connection does not open in time was never sent and is answered 503 at once, as not written (100..60000)",
        low=100,
        high=60_000,
    )
    # A file holding the key the instances of a deployment share: their connections to each
    # other are then not counted against max_connections_per_address.
    peer_key_file: str = setting(
        "",
        "cluster",
        "peer_key_file",
        "a file holding a key (at least 16 characters) every instance of the deployment shares; each sends it on its requests to the others, and a connection whose request carries it is an instance's, not counted against `max_connections_per_address` (forwarded writes all come from a few addresses); with it set, a request naming a header instances send each other (`Durable-Kafka-Forwarded`, ...) without it is 403. Keep it as secret as a token",
    )
    instance_id: str = setting(
        "",
        "cluster",
        "instance_id",
        "this instance's `group.instance.id` in the owners' group (1 to 249 of `[a-zA-Z0-9._-]`): stable across restarts, different on every instance. Set it where the advertised URL changes on a restart (e.g. a pod IP) but the instance is the same (e.g. a StatefulSet ordinal)",
        rule=INSTANCE_ID,
        shown="none (the advertised URL, `[^a-zA-Z0-9._-]` made `_`)",
    )
    # Streams whose reads here are told to their owner remembered at once
    # (cluster/access_relay.py).
    owner_renewal_entries: int = setting(
        10_000,
        "cluster",
        "owner_renewal_entries",
        "most streams with a sliding TTL, owned by other instances and read here, whose renewals this instance remembers (about 400 bytes each, names included) to tell their owners at most once per quarter of the TTL; past it, the stream read longest ago is forgotten and its next read is told at once (1..10000000)",
        low=1,
        high=10_000_000,
    )
    auth_mode: AuthMode = setting(
        "off",
        "auth",
        "mode",
        '`off`, `static` (a token file) or `jwt`; see "Authentication and authorization". `off` is refused unless `listen` is a loopback address (or `auth_off_beyond_loopback`)',
        choices=("off", "static", "jwt"),
    )
    auth_off_beyond_loopback: bool = setting(
        False,
        "auth",
        "off_beyond_loopback",
        'allow `auth_mode = "off"` on a non-loopback listener: only where something else keeps strangers out (a container published on the host\'s loopback, as `docker-compose.yml` does; a proxy that authenticates)',
    )
    auth_token_file: str = setting(
        "",
        "auth",
        "token_file",
        "`static` mode: the TOML file of hashed tokens (read at start, and again when it changes: `secret_poll_ms`)",
    )
    auth_jwt_issuer: str = setting(
        "", "auth", "jwt_issuer", "`jwt` mode: the `iss` every token must carry (required)"
    )
    auth_jwt_audience: str = setting(
        "", "auth", "jwt_audience", "`jwt` mode: the `aud` every token must carry (required)"
    )
    auth_jwt_jwks_file: str = setting(
        "",
        "auth",
        "jwt_jwks_file",
        "`jwt` mode: a JSON Web Key Set file, read at start (one of file and URL)",
    )
    auth_jwt_jwks_url: str = setting(
        "",
        "auth",
        "jwt_jwks_url",
        "`jwt` mode: the identity provider's JWKS URL, fetched at start, again when the response's `Cache-Control: max-age` ends (at least 10 s, at most `auth_jwt_jwks_refresh_ms`), and at once when a token names a `kid` the set lacks (at most every 10 s); retried every 5 s after a failure, old keys kept; until the first fetch every token is 401",
    )
    auth_jwt_jwks_refresh_ms: int = setting(
        300_000,
        "auth",
        "jwt_jwks_refresh_ms",
        "`jwt` mode: the longest a JWKS fetched from `auth_jwt_jwks_url` is used before it is fetched again (a key the provider removed is refused from then on); 10000..86400000",
        low=10_000,
        high=86_400_000,
    )
    auth_jwt_algorithms: str = setting(
        "RS256,ES256,EdDSA",
        "auth",
        "jwt_algorithms",
        "the algorithms a token may use, comma-separated, from RS/PS/ES 256/384/512 and EdDSA; `none` and shared-secret (HS*) algorithms are refused",
        rule=ALGORITHMS,
    )
    auth_jwt_leeway_s: int = setting(
        30,
        "auth",
        "jwt_leeway_s",
        "clock skew allowed on `exp`, `nbf`, `iat`; 0 to 300",
        low=0,
        high=300,
    )
    auth_public_read: str = setting(
        "",
        "auth",
        "public_read",
        "buckets anyone may read without a token: comma-separated ids or prefixes ending in `*`",
    )
    auth_conceal: bool = setting(
        False,
        "auth",
        "conceal",
        "answer 404 `not_found` instead of 403 to a caller that may not even read the bucket, so it learns nothing about what exists there",
    )
    auth_query_token: bool = setting(
        False,
        "auth",
        "query_token",
        "also accept the token as `?access_token=` (for `EventSource`, which cannot send headers). URLs end up in proxy logs and browser history: prefer short-lived tokens",
    )
    # `[auth.certificates]`: a client certificate's subject (`CN=...`) -> its scopes, as
    # (subject, scopes) pairs; env and flag: a JSON object.
    auth_certificates: tuple[tuple[str, tuple[str, ...]], ...] = setting(
        (),
        "auth",
        "certificates",
        'client certificates that are principals: `"CN=<common name>" = ["append:logs", ...]`; needs `tls_client_ca_file` and `auth_mode` `static` or `jwt`. See "HTTPS"',
        structured=CERTIFICATES,
    )
    allowed_hosts: str = setting(
        "",
        "http",
        "allowed_hosts",
        "host names a request's `Host` may carry besides the defaults (the listen host, or the machine's name when listening on all addresses; the advertised URL's host; `localhost`, `127.0.0.1`, `::1`); `*` turns the check off. Others get 421 `host_not_allowed` (DNS rebinding)",
    )
    cors_origins: str = setting(
        "",
        "http",
        "cors_origins",
        "origins (`https://app.example`) whose pages may call the API, comma-separated; `*` lets any origin in. A request from any other origin is 403 `origin_not_allowed`",
        shown="none (same origin only)",
    )
    rate_limit_requests: int = setting(
        0,
        "limits",
        "requests_per_s",
        "requests per second each (principal, bucket) may make on one instance; past it 429 `rate_limited` with `Retry-After` (with auth off every caller is one principal)",
        low=0,
        note="(0: off)",
        shown="`0` (off)",
    )
    rate_limit_burst: int = setting(
        0,
        "limits",
        "request_burst",
        "requests a (principal, bucket) may make at once before the rate applies",
        low=0,
        shown="`0` (= the rate)",
    )
    rate_limit_append_bytes: int = setting(
        0,
        "limits",
        "append_bytes_per_s",
        "appended body bytes per second per (principal, bucket); a body larger than a second's worth passes when the budget is not in debt and puts it in debt; past it 429 `rate_limited`, the body unread",
        low=0,
        note="(0: off)",
        shown="`0` (off)",
    )
    max_live_readers_per_bucket: int = setting(
        0,
        "limits",
        "live_readers_per_bucket",
        "long-polls and SSE responses in flight per bucket on one instance; past it 429 `too_many_readers` with `Retry-After: 1`",
        low=0,
        note="(0: no cap)",
        shown="`0` (no cap)",
    )
    # Existing topics served as buckets from start (`[[mounts]]`; env and flag: a JSON array),
    # as tables; `adapter.protocol.mounts.parse_configured` checks each at start.
    mounts: tuple[dict[str, Any], ...] = setting(
        (),
        "mounts",
        "",
        'existing topics served as buckets from start (see "Mounting an existing topic"); a bad table stops the start (exit 2); a mount whose bucket name is a bucket stops serving (exit 1)',
        structured=MOUNTS,
    )
    # Topic patterns (comma list of globs) a bucket's admin may mount over HTTP; "": none.
    mount_topics: str = setting(
        "",
        "server",
        "mount_topics",
        'topics a bucket\'s admin may mount over HTTP (`PUT /{bucket}` with `{"mount": ...}`): comma-separated glob patterns (`*`, `?`, `[...]`), e.g. `orders,shared-*`; `""`: none, only `[[mounts]]` mount. Never, whatever it says: a topic under `topic_prefix` (409 `topic_conflict`), any deployment\'s internal topics (`*internal.*`) and Kafka\'s own (`__*`) (403 `topic_not_allowed`)',
    )
    mount_index_positions_per_key: int = setting(
        4096,
        "server",
        "mount_index_positions_per_key",
        "most record positions the index of a mounted topic keeps per key (8 bytes each); older ones are found by scanning the key's partitions; 2..1000000",
        low=2,
        high=1_000_000,
    )
    mount_index_dir: str = setting(
        ".data/mount-index",
        "server",
        "mount_index_dir",
        'folder of the mounted topics\' key index files (one SQLite file per mount, resumed at start instead of re-reading the topic; a cache, safe to delete while stopped); `""`: none kept',
    )
    console: ConsoleMode = setting(
        "rw",
        "server",
        "console",
        'the web console at `/ui/` (see "The web console"): `rw` shows every action, `ro` hides the write actions (append, close, delete, fork, create) — the API itself stays writable, so `ro` guards against slips, not people —, `off` answers 404 on every `/ui` path',
        choices=("off", "ro", "rw"),
    )
    console_max_last: int = setting(
        10_000,
        "server",
        "console_max_last",
        "most messages the console's seek to the last N messages (`/ui/api/seek?last=N`) takes; a larger N is 400 `invalid_query`. Its memory grows with N (~100 bytes a message), never with the stream; 1..1000000",
        low=1,
        high=1_000_000,
    )
    # OpenTelemetry traces sent over OTLP/HTTP to this collector; "": tracing off, and the SDK
    # is never imported (adapter/tracing/).
    tracing_endpoint: str = setting(
        "",
        "tracing",
        "endpoint",
        "OpenTelemetry: the collector's OTLP/HTTP base URL, `http(s)://HOST[:PORT]` (spans go to `{endpoint}/v1/traces`); empty: tracing off, the SDK not even imported. The SDK's own `OTEL_EXPORTER_OTLP_*` (headers, timeout, certificate) and `OTEL_BSP_*` (batching) variables apply. See \"Tracing\"",
        rule=TRACING_ENDPOINT,
        shown="none (tracing off)",
    )
    tracing_service_name: str = setting(
        "durable-kafka",
        "tracing",
        "service_name",
        "`service.name` of this instance's spans (its `service.instance.id` is `instance_id`, else the advertised URL)",
        rule=NOT_BLANK,
    )
    tracing_sample_ratio: float = setting(
        1.0,
        "tracing",
        "sample_ratio",
        "share of the traces this instance starts that are recorded, 0..1; a request carrying a `traceparent` follows its caller's decision instead",
        low=0.0,
        high=1.0,
    )

    @property
    def host(self) -> str:
        return self.listen.rpartition(":")[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rpartition(":")[2])

    @property
    def ops_address(self) -> tuple[str, int] | None:
        """Where the ops listener listens (`ops_listen`), or None when it is off."""
        if not self.ops_listen:
            return None
        host, _, port = self.ops_listen.rpartition(":")
        return host.strip("[]"), int(port)

    @property
    def max_body_bytes(self) -> int:
        """The largest request body: a record of it, with its key and headers, must still fit
        in `max_message_bytes`, or the broker would refuse it and fail its whole transaction."""
        return self.max_message_bytes - RECORD_OVERHEAD_BYTES

    @property
    def advertised_url(self) -> str:
        """The base URL other instances forward writes to: `advertise_url`, else from `listen`."""
        if self.advertise_url:
            return self.advertise_url.rstrip("/")
        host = self.host
        if host in ("", "0.0.0.0", "::"):
            host = socket.gethostname()
        elif ":" in host:
            host = f"[{host}]"
        return f"{self.scheme}://{host}:{self.port}"

    @property
    def tls(self) -> bool:
        """Whether the API is served over HTTPS."""
        return bool(self.tls_cert_file)

    @property
    def scheme(self) -> str:
        return "https" if self.tls else "http"

    @property
    def group_instance_id(self) -> str:
        """This instance's static member id in the owners' group: `instance_id`, else derived
        from the advertised URL (every character Kafka refuses in an id made `_`)."""
        return self.instance_id or _NOT_IN_INSTANCE_ID.sub("_", self.advertised_url)[:249]

    @property
    def worker_count(self) -> int:
        """How many serving processes: `workers`, or one per core when it is 0 (at most one
        per write slot: a worker owning none would only forward)."""
        return self.workers or min(MAX_WORKERS, self.write_slots, os.cpu_count() or 1)

    @property
    def kafka_timeout_s(self) -> float:
        return self.kafka_timeout_ms / 1000

    @property
    def loopback(self) -> bool:
        """Whether the listener is reachable only from this machine."""
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False

    @property
    def jwt_algorithms(self) -> tuple[str, ...]:
        return comma_list(self.auth_jwt_algorithms)


def comma_list(value: str) -> tuple[str, ...]:
    """A comma-separated setting as its non-empty, stripped items."""
    return tuple(item.strip() for item in value.split(",") if item.strip())
