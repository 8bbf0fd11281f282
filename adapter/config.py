"""Settings, loaded once with the precedence defaults < TOML file < environment < CLI flags."""

from __future__ import annotations

import ipaddress
import json
import os
import re
import socket
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from topology.client_properties import ClientPropertiesError, checked, read_properties_file
from topology.java_client import is_java, translated
from topology.naming import DEFAULT_PREFIX

ENV_PREFIX = "DURABLE_KAFKA_"
CONFIG_ENV = f"{ENV_PREFIX}CONFIG"
_TOPIC_PREFIX = re.compile(r"^[a-zA-Z0-9._-]{1,100}$")
_ADVERTISE = re.compile(r"^https?://[^/\s]+/?$")
# What Kafka accepts as a group.instance.id (the rule of topic names).
_INSTANCE_ID = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_NOT_IN_INSTANCE_ID = re.compile(r"[^a-zA-Z0-9._-]")

ColdBackend = Literal["fs", "s3"]
AuthMode = Literal["off", "static", "jwt"]
EventLoop = Literal["uvloop", "asyncio"]
ConsoleMode = Literal["off", "ro", "rw"]
TopicManagementMode = Literal["auto", "external"]
# Settings that accept "auto", with the value that stands for it: resolved at start (from the
# cluster, the cores, the container's memory limit).
AUTO_VALUES: dict[str, int] = {
    "replication_factor": 0,
    "min_insync_replicas": 0,
    "workers": 0,
    "max_memory_bytes": -1,
}
ClientAuth = Literal["none", "optional", "required"]
# Room for a record's key (a stream id, at most 122 bytes), headers and batch framing.
RECORD_OVERHEAD_BYTES = 16 * 1024
MAX_WORKERS = 64


class ConfigError(ValueError):
    """A setting is missing, malformed or out of range; the message names it and its source."""


@dataclass(frozen=True)
class Settings:
    """Every setting of one adapter instance. docs/reference/settings.md lists each one."""

    listen: str = "127.0.0.1:4437"
    log_level: str = "info"
    event_loop: EventLoop = "uvloop"
    # Serving processes on the listener (SO_REUSEPORT); 0: one per core (`worker_count`).
    workers: int = 1
    log_format: str = "json"
    ops_listen: str = "127.0.0.1:9464"
    drain_timeout_ms: int = 10_000
    # How often the files holding secrets are checked for new content (0: never; SIGHUP still
    # reloads the certificate): Kubernetes swaps a mounted Secret's files and signals nothing.
    secret_poll_ms: int = 5_000
    # HTTPS on `listen` when both are set (PEM files; the pair is reloaded on SIGHUP).
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""  # set: client certificates are asked for and verified
    tls_client_auth: ClientAuth = "optional"
    # Set: writes forwarded to another instance over HTTPS verify its certificate against it.
    tls_peer_ca_file: str = ""
    bootstrap_servers: str = "127.0.0.1:9092"
    # librdkafka properties of every Kafka client: `kafka_client_file` (a client.properties),
    # then `[kafka.client]` (env and flag: a JSON object) over it; `load` merges them here.
    kafka_client_file: str = ""
    kafka_client: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    topic_prefix: str = DEFAULT_PREFIX
    partitions: int = 12
    replication_factor: int = 0  # 0: auto (`topology/replication.py`)
    min_insync_replicas: int = 0  # 0: auto
    allow_unreplicated: bool = False
    require_durable_topics: bool = False
    topic_management: TopicManagementMode = "auto"
    max_message_bytes: int = 8 * 1024 * 1024
    kafka_timeout_ms: int = 10_000
    # librdkafka's statistics of every client, for the metrics; 0: off.
    kafka_statistics_interval_ms: int = 15_000
    max_append_messages: int = 10_000
    max_snapshot_bytes: int = 128 * 1024 * 1024
    snapshot_gc_grace_ms: int = 600_000
    snapshot_gc_interval_ms: int = 60_000
    age_retention_interval_ms: int = 5_000
    max_inflight_body_bytes: int = 256 * 1024 * 1024
    header_timeout_ms: int = 10_000
    body_timeout_ms: int = 60_000
    keepalive_timeout_ms: int = 75_000
    max_connections: int = 16_384
    max_connections_per_address: int = 0
    max_memory_bytes: int = -1  # -1: auto (`adapter/memory_limit.py`)
    read_chunk_bytes: int = 1024 * 1024
    read_scan_bytes: int = 16 * 1024 * 1024
    hot_cache_bytes: int = 64 * 1024 * 1024
    catalog_dir: str = ".data/catalog"
    catalog_cache_entries: int = 4096
    catalog_cache_bytes: int = 0
    catalog_checkpoint_ms: int = 30_000
    expired_gc_grace_ms: int = 600_000
    max_view_age_ms: int = 5_000
    long_poll_timeout_ms: int = 20_000
    sse_max_duration_ms: int = 60_000
    sse_heartbeat_ms: int = 15_000
    sse_write_timeout_ms: int = 10_000
    cold_backend: ColdBackend = "fs"
    cold_dir: str = ".data/cold"
    cold_dir_shared: bool = False
    s3_bucket: str = "durable-kafka"
    s3_endpoint_url: str = ""
    s3_region: str = "us-east-1"
    s3_access_key_id: str = ""
    s3_secret_access_key: str = ""
    tier_after_bytes: int = 1024 * 1024 * 1024
    tier_after_ms: int = 3_600_000
    tier_interval_ms: int = 30_000
    tier_cache_bytes: int = 64 * 1024 * 1024
    write_slots: int = 8
    concurrent_transactions: int = 4
    advertise_url: str = ""
    owner_session_timeout_ms: int = 10_000
    # How long an owner must look gone (its address refusing connections) or paused (neither
    # a forward nor its liveness probe answered) before a peer evicts it from the owners'
    # group: adapter/cluster/dead_owners.py. 0 for the latter: a paused owner keeps its slots.
    owner_refused_ms: int = 500
    owner_unanswered_ms: int = 3_000
    # How long a connection to another instance may take to open (adapter/http/peers.py).
    peer_connect_timeout_ms: int = 1_000
    # A file holding the key the instances of a deployment share: their connections to each
    # other are then not counted against max_connections_per_address.
    peer_key_file: str = ""
    instance_id: str = ""
    # Streams whose reads here are told to their owner remembered at once (cluster/access_relay.py).
    owner_renewal_entries: int = 10_000
    auth_mode: AuthMode = "off"
    auth_off_beyond_loopback: bool = False
    auth_token_file: str = ""
    auth_jwt_issuer: str = ""
    auth_jwt_audience: str = ""
    auth_jwt_jwks_file: str = ""
    auth_jwt_jwks_url: str = ""
    auth_jwt_jwks_refresh_ms: int = 300_000
    auth_jwt_algorithms: str = "RS256,ES256,EdDSA"
    auth_jwt_leeway_s: int = 30
    auth_public_read: str = ""
    auth_conceal: bool = False
    auth_query_token: bool = False
    # `[auth.certificates]`: a client certificate's subject (`CN=...`) -> its scopes, as
    # (subject, scopes) pairs; env and flag: a JSON object.
    auth_certificates: tuple[tuple[str, tuple[str, ...]], ...] = ()
    allowed_hosts: str = ""
    cors_origins: str = ""
    rate_limit_requests: int = 0
    rate_limit_burst: int = 0
    rate_limit_append_bytes: int = 0
    max_live_readers_per_bucket: int = 0
    # Existing topics served as buckets from start (`[[mounts]]`; env and flag: a JSON array),
    # as tables; `adapter.protocol.mounts.parse_configured` checks each at start.
    mounts: tuple[dict[str, Any], ...] = ()
    # Topic patterns (comma list of globs) a bucket's admin may mount over HTTP; "": none.
    mount_topics: str = ""
    mount_index_positions_per_key: int = 4096
    mount_index_dir: str = ".data/mount-index"  # "": mounts' key indexes are not persisted
    console: ConsoleMode = "rw"
    console_max_last: int = 10_000
    # OpenTelemetry traces sent over OTLP/HTTP to this collector; "": tracing off, and the SDK
    # is never imported (adapter/tracing/).
    tracing_endpoint: str = ""
    tracing_service_name: str = "durable-kafka"
    tracing_sample_ratio: float = (
        1.0  # of the traces this instance starts; a parent's decision wins
    )
    # Test-only (`[testing]`, `TEST_ONLY`: not in `--help` nor the reference): never in production.
    lose_commit_every: int = 0
    trust_unknown_outcomes: bool = False
    crash_after_forwarded_commit: bool = False
    serve_below_retention: bool = False
    cold_reads_empty: bool = False
    tier_skip_puts: bool = False

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


# Where each setting lives in the TOML file: (table, key).
TOML_KEYS: dict[str, tuple[str, str]] = {
    "listen": ("server", "listen"),
    "log_level": ("server", "log_level"),
    "event_loop": ("server", "event_loop"),
    "workers": ("server", "workers"),
    "log_format": ("server", "log_format"),
    "ops_listen": ("server", "ops_listen"),
    "drain_timeout_ms": ("server", "drain_timeout_ms"),
    "secret_poll_ms": ("server", "secret_poll_ms"),
    "tls_cert_file": ("tls", "cert_file"),
    "tls_key_file": ("tls", "key_file"),
    "tls_client_ca_file": ("tls", "client_ca_file"),
    "tls_peer_ca_file": ("tls", "peer_ca_file"),
    "tls_client_auth": ("tls", "client_auth"),
    "bootstrap_servers": ("kafka", "bootstrap_servers"),
    "kafka_client_file": ("kafka", "client_file"),
    "kafka_client": ("kafka", "client"),
    "topic_prefix": ("kafka", "topic_prefix"),
    "partitions": ("kafka", "partitions"),
    "replication_factor": ("kafka", "replication_factor"),
    "min_insync_replicas": ("kafka", "min_insync_replicas"),
    "allow_unreplicated": ("kafka", "allow_unreplicated"),
    "require_durable_topics": ("kafka", "require_durable_topics"),
    "topic_management": ("kafka", "topic_management"),
    "max_message_bytes": ("kafka", "max_message_bytes"),
    "kafka_timeout_ms": ("kafka", "timeout_ms"),
    "kafka_statistics_interval_ms": ("kafka", "statistics_interval_ms"),
    "max_append_messages": ("server", "max_append_messages"),
    "max_snapshot_bytes": ("server", "max_snapshot_bytes"),
    "snapshot_gc_grace_ms": ("server", "snapshot_gc_grace_ms"),
    "snapshot_gc_interval_ms": ("server", "snapshot_gc_interval_ms"),
    "age_retention_interval_ms": ("server", "age_retention_interval_ms"),
    "max_inflight_body_bytes": ("server", "max_inflight_body_bytes"),
    "header_timeout_ms": ("http", "header_timeout_ms"),
    "body_timeout_ms": ("http", "body_timeout_ms"),
    "keepalive_timeout_ms": ("http", "keepalive_timeout_ms"),
    "max_connections": ("http", "max_connections"),
    "max_connections_per_address": ("http", "max_connections_per_address"),
    "max_memory_bytes": ("server", "max_memory_bytes"),
    "read_chunk_bytes": ("server", "read_chunk_bytes"),
    "read_scan_bytes": ("server", "read_scan_bytes"),
    "hot_cache_bytes": ("server", "hot_cache_bytes"),
    "catalog_dir": ("server", "catalog_dir"),
    "catalog_cache_entries": ("server", "catalog_cache_entries"),
    "catalog_cache_bytes": ("server", "catalog_cache_bytes"),
    "catalog_checkpoint_ms": ("server", "catalog_checkpoint_ms"),
    "expired_gc_grace_ms": ("server", "expired_gc_grace_ms"),
    "max_view_age_ms": ("server", "max_view_age_ms"),
    "long_poll_timeout_ms": ("live", "long_poll_timeout_ms"),
    "sse_max_duration_ms": ("live", "sse_max_duration_ms"),
    "sse_heartbeat_ms": ("live", "sse_heartbeat_ms"),
    "sse_write_timeout_ms": ("live", "sse_write_timeout_ms"),
    "cold_backend": ("cold", "backend"),
    "cold_dir": ("cold", "dir"),
    "cold_dir_shared": ("cold", "dir_shared"),
    "s3_bucket": ("cold", "s3_bucket"),
    "s3_endpoint_url": ("cold", "s3_endpoint_url"),
    "s3_region": ("cold", "s3_region"),
    "s3_access_key_id": ("cold", "s3_access_key_id"),
    "s3_secret_access_key": ("cold", "s3_secret_access_key"),
    "tier_after_bytes": ("tier", "after_bytes"),
    "tier_after_ms": ("tier", "after_ms"),
    "tier_interval_ms": ("tier", "interval_ms"),
    "tier_cache_bytes": ("tier", "cache_bytes"),
    "write_slots": ("cluster", "write_slots"),
    "concurrent_transactions": ("cluster", "concurrent_transactions"),
    "advertise_url": ("cluster", "advertise_url"),
    "owner_session_timeout_ms": ("cluster", "session_timeout_ms"),
    "owner_refused_ms": ("cluster", "owner_refused_ms"),
    "owner_unanswered_ms": ("cluster", "owner_unanswered_ms"),
    "peer_connect_timeout_ms": ("cluster", "peer_connect_timeout_ms"),
    "peer_key_file": ("cluster", "peer_key_file"),
    "instance_id": ("cluster", "instance_id"),
    "owner_renewal_entries": ("cluster", "owner_renewal_entries"),
    "auth_mode": ("auth", "mode"),
    "auth_off_beyond_loopback": ("auth", "off_beyond_loopback"),
    "auth_token_file": ("auth", "token_file"),
    "auth_jwt_issuer": ("auth", "jwt_issuer"),
    "auth_jwt_audience": ("auth", "jwt_audience"),
    "auth_jwt_jwks_file": ("auth", "jwt_jwks_file"),
    "auth_jwt_jwks_url": ("auth", "jwt_jwks_url"),
    "auth_jwt_jwks_refresh_ms": ("auth", "jwt_jwks_refresh_ms"),
    "auth_jwt_algorithms": ("auth", "jwt_algorithms"),
    "auth_jwt_leeway_s": ("auth", "jwt_leeway_s"),
    "auth_public_read": ("auth", "public_read"),
    "auth_conceal": ("auth", "conceal"),
    "auth_query_token": ("auth", "query_token"),
    "auth_certificates": ("auth", "certificates"),
    "allowed_hosts": ("http", "allowed_hosts"),
    "cors_origins": ("http", "cors_origins"),
    "rate_limit_requests": ("limits", "requests_per_s"),
    "rate_limit_burst": ("limits", "request_burst"),
    "rate_limit_append_bytes": ("limits", "append_bytes_per_s"),
    "max_live_readers_per_bucket": ("limits", "live_readers_per_bucket"),
    "mount_topics": ("server", "mount_topics"),
    "mount_index_positions_per_key": ("server", "mount_index_positions_per_key"),
    "mount_index_dir": ("server", "mount_index_dir"),
    "console": ("server", "console"),
    "console_max_last": ("server", "console_max_last"),
    "tracing_endpoint": ("tracing", "endpoint"),
    "tracing_service_name": ("tracing", "service_name"),
    "tracing_sample_ratio": ("tracing", "sample_ratio"),
    "lose_commit_every": ("testing", "lose_commit_every"),
    "trust_unknown_outcomes": ("testing", "trust_unknown_outcomes"),
    "crash_after_forwarded_commit": ("testing", "crash_after_forwarded_commit"),
    "serve_below_retention": ("testing", "serve_below_retention"),
    "cold_reads_empty": ("testing", "cold_reads_empty"),
    "tier_skip_puts": ("testing", "tier_skip_puts"),
}


# Settings that exist for the test suites only (`[testing]`): accepted, but neither in `--help`
# nor in the settings reference (adapter/log/faults.py and adapter/tier/faults.py say what each
# breaks).
TEST_ONLY = frozenset(name for name, (table, _key) in TOML_KEYS.items() if table == "testing")


def env_name(name: str) -> str:
    return ENV_PREFIX + name.upper()


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def setting_names() -> list[str]:
    return [field.name for field in fields(Settings)]


def load(
    config_file: str | None,
    env: Mapping[str, str],
    flags: Mapping[str, str],
) -> Settings:
    """Merge every source into one validated Settings, or raise ConfigError."""
    path = config_file or env.get(CONFIG_ENV)
    values: dict[str, Any] = _from_toml(Path(path)) if path else {}
    values |= _from_strings(env, env_name, "environment")
    values |= _from_strings(flags, lambda name: name, "command line")
    settings = replace(Settings(), **values)
    validate(settings)
    return _with_client_file(settings)


def client_file_properties(path: str) -> dict[str, str]:
    """The librdkafka properties of a client.properties file alone (a Java one translated);
    ConfigError naming the key that cannot be used."""
    origin = f"kafka_client_file {path}"
    try:
        return translated(checked(read_properties_file(path), origin), origin)
    except ClientPropertiesError as error:
        raise ConfigError(str(error)) from error


def _with_client_file(settings: Settings) -> Settings:
    """The settings with `kafka_client_file`'s properties under those given inline, and Java
    client keys (`sasl.jaas.config`, `ssl.truststore.*`, ...) as librdkafka's."""
    origin = f"kafka_client_file {settings.kafka_client_file}"
    try:
        found = (
            checked(read_properties_file(settings.kafka_client_file), origin)
            if settings.kafka_client_file
            else {}
        )
        merged = found | dict(settings.kafka_client)
        if not is_java(merged):
            return replace(settings, kafka_client=tuple(merged.items()))
        where = origin if settings.kafka_client_file else "kafka_client"
        return replace(settings, kafka_client=tuple(translated(merged, where).items()))
    except ClientPropertiesError as error:
        raise ConfigError(str(error)) from error


def _client_properties(document: Any, origin: str) -> tuple[tuple[str, str], ...]:
    """`[kafka.client]` or its JSON object, checked; errors name keys, never values."""
    if not isinstance(document, dict):
        raise ConfigError(f"{origin}: expected a table (a JSON object) of client properties")
    try:
        return tuple(checked(document, origin).items())
    except ClientPropertiesError as error:
        raise ConfigError(str(error)) from error


def _from_toml(path: Path) -> dict[str, Any]:
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from error
    known = {(table, key) for table, key in TOML_KEYS.values()}
    values: dict[str, Any] = {}
    if "mounts" in document:
        values["mounts"] = _mounts(document.pop("mounts"), f"{path} [[mounts]]")
    for table, entries in document.items():
        for key in entries if isinstance(entries, dict) else [None]:
            if (table, key) not in known:
                raise ConfigError(f"{path}: unknown setting [{table}] {key}")
    for name, (table, key) in TOML_KEYS.items():
        if key in document.get(table, {}):
            origin = f"{path} [{table}] {key}"
            value = document[table][key]
            if name == "auth_certificates":
                values[name] = _certificates(value, f"{path} [auth.certificates]")
            else:
                values[name] = _typed(name, value, origin)
    return values


def _from_strings(
    source: Mapping[str, str], key_of: Callable[[str], str], origin: str
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for name in setting_names():
        raw = source.get(key_of(name))
        if raw is not None:
            values[name] = _parse(name, raw, f"{origin} {key_of(name)}")
    return values


def _default(name: str) -> Any:
    return getattr(Settings(), name)


def _parse(name: str, raw: str, origin: str) -> Any:
    if name in AUTO_VALUES and raw.strip().lower() == "auto":
        return AUTO_VALUES[name]
    if name == "mounts":
        try:
            document = json.loads(raw)
        except ValueError as error:
            raise ConfigError(f"{origin}: not a JSON array of mounts: {error}") from error
        return _mounts(document, origin)
    if name == "auth_certificates":
        try:
            return _certificates(json.loads(raw), origin)
        except ValueError as error:
            raise ConfigError(f"{origin}: not a JSON object of subjects: {error}") from error
    if name == "kafka_client":
        try:
            document = json.loads(raw)
        except ValueError:  # the error would quote the text, and it holds secrets
            raise ConfigError(f"{origin}: not a JSON object of client properties") from None
        return _client_properties(document, origin)
    if isinstance(_default(name), bool):  # before int: a bool is an int
        if raw.lower() not in ("true", "false"):
            raise ConfigError(f"{origin}: {raw!r} is not true or false")
        return raw.lower() == "true"
    if isinstance(_default(name), int):
        try:
            return int(raw)
        except ValueError as error:
            raise ConfigError(f"{origin}: {raw!r} is not an integer") from error
    if isinstance(_default(name), float):
        try:
            return float(raw)
        except ValueError as error:
            raise ConfigError(f"{origin}: {raw!r} is not a number") from error
    return raw


def _mounts(document: Any, origin: str) -> tuple[dict[str, Any], ...]:
    """Mount tables from a list of tables (TOML `[[mounts]]`) or of JSON objects."""
    if not isinstance(document, list) or not all(isinstance(t, dict) for t in document):
        raise ConfigError(f"{origin}: expected a list of mount tables")
    mounts = tuple(dict(table) for table in document)
    names = [table.get("bucket") for table in mounts]
    if len(set(map(str, names))) != len(names):
        raise ConfigError(f"{origin}: a bucket is mounted twice")
    return mounts


def _certificates(document: Any, origin: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Subject -> scopes pairs from a table (TOML) or a JSON object: `{"CN=bot": ["read:*"]}`."""
    if not isinstance(document, dict):
        raise ConfigError(f"{origin}: expected a table of subject = [scopes]")
    pairs = []
    for subject, scopes in document.items():
        if not subject.startswith("CN=") or len(subject) == 3:
            raise ConfigError(f"{origin}: {subject!r}: a subject is CN=<common name>")
        if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
            raise ConfigError(f"{origin}: {subject!r}: scopes must be a list of strings")
        pairs.append((subject, tuple(scopes)))
    return tuple(sorted(pairs))


def _typed(name: str, value: Any, origin: str) -> Any:
    if name in AUTO_VALUES and value == "auto":
        return AUTO_VALUES[name]
    if name == "kafka_client":
        return _client_properties(value, origin)
    expected = type(_default(name))
    if expected is float and type(value) is int:  # TOML's `1` for a ratio is as good as `1.0`
        return float(value)
    if type(value) is not expected:
        raise ConfigError(f"{origin}: expected {expected.__name__}, got {value!r}")
    return value


def validate(settings: Settings) -> None:
    """Reject values that cannot work, naming the setting."""
    checks: list[tuple[bool, str]] = [
        (_valid_listen(settings.listen), f"listen {settings.listen!r} is not HOST:PORT"),
        (bool(settings.bootstrap_servers.strip()), "bootstrap_servers is empty"),
        (bool(_TOPIC_PREFIX.match(settings.topic_prefix)), "topic_prefix: only [a-zA-Z0-9._-]"),
        (1 <= settings.partitions <= 10_000, "partitions must be in 1..10000"),
        (settings.replication_factor >= 0, "replication_factor must be >= 1 (or auto)"),
        (
            settings.min_insync_replicas >= 0
            and (
                not settings.replication_factor
                or settings.min_insync_replicas <= settings.replication_factor
            ),
            "min_insync_replicas must be in 1..replication_factor (or auto)",
        ),
        (
            settings.topic_management in ("auto", "external"),
            "topic_management must be 'auto' or 'external'",
        ),
        (settings.max_message_bytes >= 65536, "max_message_bytes must be >= 65536"),
        (settings.kafka_timeout_ms >= 100, "kafka_timeout_ms must be >= 100"),
        (
            settings.kafka_statistics_interval_ms == 0
            or 100 <= settings.kafka_statistics_interval_ms <= 86_400_000,
            "kafka_statistics_interval_ms must be 0 (off) or in 100..86400000",
        ),
        (settings.max_view_age_ms >= 100, "max_view_age_ms must be >= 100"),
        (
            1 <= settings.max_append_messages <= 50_000,
            "max_append_messages must be in 1..50000",
        ),
        (settings.max_snapshot_bytes >= 1, "max_snapshot_bytes must be >= 1"),
        (
            settings.snapshot_gc_grace_ms >= 10 * settings.kafka_timeout_ms,
            "snapshot_gc_grace_ms must be >= 10 x kafka_timeout_ms (a publish commits within "
            "half of it)",
        ),
        (settings.snapshot_gc_interval_ms >= 1000, "snapshot_gc_interval_ms must be >= 1000"),
        (settings.age_retention_interval_ms >= 100, "age_retention_interval_ms must be >= 100"),
        (
            settings.secret_poll_ms == 0 or settings.secret_poll_ms >= 100,
            "secret_poll_ms must be 0 (off) or >= 100",
        ),
        (
            settings.max_inflight_body_bytes >= settings.max_body_bytes,
            "max_inflight_body_bytes must be >= max_message_bytes - 16384 (the largest body)",
        ),
        (settings.header_timeout_ms >= 10, "header_timeout_ms must be >= 10"),
        (settings.body_timeout_ms >= 10, "body_timeout_ms must be >= 10"),
        (settings.keepalive_timeout_ms >= 10, "keepalive_timeout_ms must be >= 10"),
        (settings.max_connections >= 0, "max_connections must be >= 0 (0: no limit)"),
        (
            settings.max_connections_per_address >= 0,
            "max_connections_per_address must be >= 0 (0: no limit)",
        ),
        (
            settings.max_memory_bytes in (AUTO_VALUES["max_memory_bytes"], 0)
            or settings.max_memory_bytes >= 64 * 1024 * 1024,
            "max_memory_bytes must be auto, 0 (no cap) or >= 64 MiB",
        ),
        (settings.read_chunk_bytes >= 1, "read_chunk_bytes must be >= 1"),
        (
            settings.read_scan_bytes >= settings.read_chunk_bytes,
            "read_scan_bytes must be >= read_chunk_bytes",
        ),
        (settings.hot_cache_bytes >= 0, "hot_cache_bytes must be >= 0"),
        (settings.catalog_cache_entries >= 1, "catalog_cache_entries must be >= 1"),
        (settings.catalog_cache_bytes >= 0, "catalog_cache_bytes must be >= 0"),
        (settings.catalog_checkpoint_ms >= 0, "catalog_checkpoint_ms must be >= 0"),
        (settings.expired_gc_grace_ms >= 0, "expired_gc_grace_ms must be >= 0"),
        (settings.long_poll_timeout_ms >= 0, "long_poll_timeout_ms must be >= 0"),
        (settings.sse_max_duration_ms >= 1000, "sse_max_duration_ms must be >= 1000"),
        (settings.sse_heartbeat_ms >= 100, "sse_heartbeat_ms must be >= 100"),
        (settings.sse_write_timeout_ms >= 100, "sse_write_timeout_ms must be >= 100"),
        (settings.cold_backend in ("fs", "s3"), "cold_backend must be 'fs' or 's3'"),
        (settings.log_level in ("debug", "info", "warning", "error"), "log_level: bad level"),
        (settings.event_loop in ("uvloop", "asyncio"), "event_loop must be 'uvloop' or 'asyncio'"),
        (
            0 <= settings.workers <= MAX_WORKERS,
            f"workers must be in 0..{MAX_WORKERS} (auto or 0: one per core)",
        ),
        (settings.log_format in ("json", "text"), "log_format must be 'json' or 'text'"),
        (
            settings.ops_listen == "" or _valid_listen(settings.ops_listen),
            f"ops_listen {settings.ops_listen!r} is not HOST:PORT (or empty: no ops listener)",
        ),
        (settings.drain_timeout_ms >= 0, "drain_timeout_ms must be >= 0"),
        (settings.cold_backend != "s3" or bool(settings.s3_bucket), "s3_bucket is required"),
        (settings.tier_after_bytes >= 0, "tier_after_bytes must be >= 0"),
        (settings.tier_after_ms >= 0, "tier_after_ms must be >= 0"),
        (settings.tier_interval_ms >= 100, "tier_interval_ms must be >= 100"),
        (settings.tier_cache_bytes >= 0, "tier_cache_bytes must be >= 0"),
        (1 <= settings.write_slots <= 1024, "write_slots must be in 1..1024"),
        (
            0 <= settings.concurrent_transactions <= 1024,
            "concurrent_transactions must be in 0..1024",
        ),
        (
            not settings.advertise_url or bool(_ADVERTISE.match(settings.advertise_url)),
            "advertise_url must be http(s)://HOST[:PORT]",
        ),
        (
            1000 <= settings.owner_session_timeout_ms <= 300_000,
            "owner_session_timeout_ms must be in 1000..300000",
        ),
        (
            100 <= settings.owner_refused_ms <= 60_000,
            "owner_refused_ms must be in 100..60000",
        ),
        (
            settings.owner_unanswered_ms == 0 or 1000 <= settings.owner_unanswered_ms <= 300_000,
            "owner_unanswered_ms must be 0 or in 1000..300000",
        ),
        (
            100 <= settings.peer_connect_timeout_ms <= 60_000,
            "peer_connect_timeout_ms must be in 100..60000",
        ),
        (
            not settings.instance_id or bool(_INSTANCE_ID.match(settings.instance_id)),
            "instance_id: 1 to 249 of [a-zA-Z0-9._-]",
        ),
        (
            1 <= settings.owner_renewal_entries <= 10_000_000,
            "owner_renewal_entries must be in 1..10000000",
        ),
        (settings.console in ("off", "ro", "rw"), "console must be 'off', 'ro' or 'rw'"),
        (
            1 <= settings.console_max_last <= 1_000_000,
            "console_max_last must be in 1..1000000",
        ),
        (settings.lose_commit_every >= 0, "lose_commit_every must be >= 0"),
        *_auth_checks(settings),
        *_tls_checks(settings),
        *_tracing_checks(settings),
        (settings.rate_limit_requests >= 0, "rate_limit_requests must be >= 0 (0: off)"),
        (settings.rate_limit_burst >= 0, "rate_limit_burst must be >= 0"),
        (settings.rate_limit_append_bytes >= 0, "rate_limit_append_bytes must be >= 0 (0: off)"),
        (
            settings.max_live_readers_per_bucket >= 0,
            "max_live_readers_per_bucket must be >= 0 (0: no cap)",
        ),
        (
            2 <= settings.mount_index_positions_per_key <= 1_000_000,
            "mount_index_positions_per_key must be in 2..1000000",
        ),
    ]
    for ok, message in checks:
        if not ok:
            raise ConfigError(message)


def _tracing_checks(settings: Settings) -> list[tuple[bool, str]]:
    return [
        (
            not settings.tracing_endpoint or bool(_ADVERTISE.match(settings.tracing_endpoint)),
            "tracing_endpoint must be http(s)://HOST[:PORT] (or empty: tracing off)",
        ),
        (bool(settings.tracing_service_name.strip()), "tracing_service_name is empty"),
        (
            0.0 <= settings.tracing_sample_ratio <= 1.0,
            "tracing_sample_ratio must be in 0..1",
        ),
    ]


# Signature algorithms a JWT may use: asymmetric only, so the adapter never holds a signing key.
JWT_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


def _auth_checks(settings: Settings) -> list[tuple[bool, str]]:
    mode = settings.auth_mode
    jwt = mode == "jwt"
    return [
        (mode in ("off", "static", "jwt"), "auth_mode must be 'off', 'static' or 'jwt'"),
        (
            mode != "off" or settings.loopback or settings.auth_off_beyond_loopback,
            f"auth_mode 'off' needs a loopback listen address (not {settings.listen!r}): set "
            "auth_mode to 'static' or 'jwt', or auth_off_beyond_loopback = true if a proxy "
            "in front authenticates every request",
        ),
        (mode != "static" or bool(settings.auth_token_file), "auth_token_file is required"),
        (not jwt or bool(settings.auth_jwt_issuer), "auth_jwt_issuer is required"),
        (not jwt or bool(settings.auth_jwt_audience), "auth_jwt_audience is required"),
        (
            not jwt or bool(settings.auth_jwt_jwks_file) != bool(settings.auth_jwt_jwks_url),
            "exactly one of auth_jwt_jwks_file and auth_jwt_jwks_url is required",
        ),
        (
            bool(settings.jwt_algorithms) and set(settings.jwt_algorithms) <= JWT_ALGORITHMS,
            f"auth_jwt_algorithms: a comma list of {sorted(JWT_ALGORITHMS)} ('none' and "
            "shared-secret algorithms are refused)",
        ),
        (0 <= settings.auth_jwt_leeway_s <= 300, "auth_jwt_leeway_s must be in 0..300"),
        (
            10_000 <= settings.auth_jwt_jwks_refresh_ms <= 86_400_000,
            "auth_jwt_jwks_refresh_ms must be in 10000..86400000",
        ),
    ]


def _tls_checks(settings: Settings) -> list[tuple[bool, str]]:
    cert, key, client_ca = (
        settings.tls_cert_file,
        settings.tls_key_file,
        settings.tls_client_ca_file,
    )
    client_auth = settings.tls_client_auth
    return [
        (bool(key) or not cert, "tls_key_file is required with tls_cert_file"),
        (bool(cert) or not key, "tls_cert_file is required with tls_key_file"),
        (
            client_auth in ("none", "optional", "required"),
            "tls_client_auth must be 'none', 'optional' or 'required'",
        ),
        (not client_ca or bool(cert), "tls_client_ca_file needs tls_cert_file and tls_key_file"),
        (
            client_auth != "required" or bool(client_ca),
            "tls_client_auth 'required' needs tls_client_ca_file",
        ),
        (
            not client_ca or client_auth != "none",
            "tls_client_ca_file is set but tls_client_auth is 'none'",
        ),
        (
            not settings.auth_certificates or bool(client_ca),
            "auth_certificates needs tls_client_ca_file (certificates are verified against it)",
        ),
        (
            not settings.auth_certificates or settings.auth_mode != "off",
            "auth_certificates needs auth_mode 'static' or 'jwt'",
        ),
    ]


def _valid_listen(listen: str) -> bool:
    host, sep, port = listen.rpartition(":")
    return bool(sep and host and port.isdigit() and 0 <= int(port) <= 65535)


PEER_KEY_MIN = 16  # characters a peer key has at least


def load_peer_key(settings: Settings) -> str:
    """The key in `peer_key_file` (surrounding whitespace dropped); "" when none is set."""
    if not settings.peer_key_file:
        return ""
    try:
        key = Path(settings.peer_key_file).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"peer_key_file: cannot read it: {error}") from error
    if len(key) < PEER_KEY_MIN:
        raise ConfigError(f"peer_key_file: the key must have at least {PEER_KEY_MIN} characters")
    return key
