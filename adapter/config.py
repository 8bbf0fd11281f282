"""Settings, loaded once with the precedence defaults < TOML file < environment < CLI flags.

What each setting is, is declared once on its field of `adapter.settings.Settings`; this module
reads the sources, types and checks each value by its declaration, then checks the settings
that must agree with each other (`validate`)."""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, TypeVar, overload

from adapter.declared import ENV_PREFIX as ENV_PREFIX
from adapter.declared import ConfigError as ConfigError
from adapter.declared import Declaration, declarations, problem
from adapter.declared import env_name as env_name
from adapter.declared import flag_name as flag_name
from adapter.settings import RECORD_OVERHEAD_BYTES as RECORD_OVERHEAD_BYTES
from adapter.settings import ClientAuth as ClientAuth
from adapter.settings import ConsoleMode as ConsoleMode
from adapter.settings import EventLoop as EventLoop
from adapter.settings import Settings as Settings
from adapter.settings import TopicManagementMode as TopicManagementMode
from adapter.settings import comma_list as comma_list
from topology.client_properties import ClientPropertiesError, checked, read_properties_file
from topology.java_client import is_java, translated

CONFIG_ENV = f"{ENV_PREFIX}CONFIG"
# The table the test suites' faults once had: refused by name, so that a file still holding
# one is told why (the faults are planted by tests/faulty_adapter.py, never configured).
TESTING_TABLE = "testing"
S = TypeVar("S", bound=Settings)


def setting_names(settings_type: type[Settings] = Settings) -> list[str]:
    return [field.name for field in fields(settings_type)]


@overload
def load(config_file: str | None, env: Mapping[str, str], flags: Mapping[str, str]) -> Settings: ...


@overload
def load(
    config_file: str | None,
    env: Mapping[str, str],
    flags: Mapping[str, str],
    settings_type: type[S],
) -> S: ...


def load(
    config_file: str | None,
    env: Mapping[str, str],
    flags: Mapping[str, str],
    settings_type: type[Settings] = Settings,
) -> Settings:
    """Merge every source into one validated Settings, or raise ConfigError."""
    declared = list(declarations(settings_type))
    path = config_file or env.get(CONFIG_ENV)
    values: dict[str, Any] = _from_toml(Path(path), declared) if path else {}
    values |= _from_strings(declared, env, env_name, "environment")
    values |= _from_strings(declared, flags, lambda name: name, "command line")
    settings = replace(settings_type(), **values)
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


def _with_client_file(settings: S) -> S:
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


def _from_toml(path: Path, declared: list[Declaration]) -> dict[str, Any]:
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read config file {path}: {error}") from error
    if TESTING_TABLE in document:
        raise ConfigError(
            f"{path}: [{TESTING_TABLE}] is not a table of settings: the faults it held break the "
            "server on purpose and only the test suites plant them; remove the table"
        )
    at = {(d.declared.table, d.declared.key): d for d in declared}
    for table, entries in document.items():
        for key in entries if isinstance(entries, dict) and (table, "") not in at else [""]:
            if (table, key) not in at:
                raise ConfigError(f"{path}: unknown setting [{table}] {key or ''}".rstrip())
    values: dict[str, Any] = {}
    for (table, key), declaration in at.items():
        entries = document.get(table, {})
        if not key and table in document:
            values[declaration.name] = _typed(declaration, entries, f"{path} [[{table}]]")
        elif key and isinstance(entries, dict) and key in entries:
            value = entries[key]
            where = f"[{table}.{key}]" if isinstance(value, dict) else f"[{table}] {key}"
            values[declaration.name] = _typed(declaration, value, f"{path} {where}")
    return values


def _from_strings(
    declared: list[Declaration],
    source: Mapping[str, str],
    key_of: Callable[[str], str],
    origin: str,
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for declaration in declared:
        raw = source.get(key_of(declaration.name))
        if raw is not None:
            values[declaration.name] = _parse(
                declaration, raw, f"{origin} {key_of(declaration.name)}"
            )
    return values


def _parse(declaration: Declaration, raw: str, origin: str) -> Any:
    """A value from its text (an environment variable, a flag), as its default's type."""
    declared, default = declaration.declared, declaration.default
    if declared.auto is not None and raw.strip().lower() == "auto":
        return declared.auto
    if declared.structured is not None:
        return declared.structured.from_text(raw, origin)
    if isinstance(default, bool):  # before int: a bool is an int
        if raw.lower() not in ("true", "false"):
            raise ConfigError(f"{origin}: {raw!r} is not true or false")
        return raw.lower() == "true"
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError as error:
            raise ConfigError(f"{origin}: {raw!r} is not an integer") from error
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError as error:
            raise ConfigError(f"{origin}: {raw!r} is not a number") from error
    return raw


def _typed(declaration: Declaration, value: Any, origin: str) -> Any:
    """A TOML value, which must have its default's type already (TOML types its values)."""
    declared = declaration.declared
    if declared.auto is not None and value == "auto":
        return declared.auto
    if declared.structured is not None:
        return declared.structured.from_toml(value, origin)
    expected = type(declaration.default)
    if expected is float and type(value) is int:  # TOML's `1` for a ratio is as good as `1.0`
        return float(value)
    if type(value) is not expected:
        raise ConfigError(f"{origin}: expected {expected.__name__}, got {value!r}")
    return value


def validate(settings: Settings) -> None:
    """Reject values that cannot work, naming the setting: each by its own declaration, then
    the settings that must agree with each other."""
    for declaration in declarations(type(settings)):
        found = problem(declaration.name, declaration.declared, getattr(settings, declaration.name))
        if found is not None:
            raise ConfigError(found)
    for ok, message in _together(settings):
        if not ok:
            raise ConfigError(message)


def _together(settings: Settings) -> list[tuple[bool, str]]:
    """The checks of settings against each other."""
    return [
        (
            not settings.replication_factor
            or settings.min_insync_replicas <= settings.replication_factor,
            "min_insync_replicas must be in 1..replication_factor (or auto)",
        ),
        (
            settings.snapshot_gc_grace_ms >= 10 * settings.kafka_timeout_ms,
            "snapshot_gc_grace_ms must be >= 10 x kafka_timeout_ms (a publish commits within "
            "half of it)",
        ),
        (
            settings.max_inflight_body_bytes >= settings.max_body_bytes,
            "max_inflight_body_bytes must be >= max_message_bytes - 16384 (the largest body)",
        ),
        (
            settings.read_scan_bytes >= settings.read_chunk_bytes,
            "read_scan_bytes must be >= read_chunk_bytes",
        ),
        (settings.cold_backend != "s3" or bool(settings.s3_bucket), "s3_bucket is required"),
        *_auth_checks(settings),
        *_tls_checks(settings),
    ]


def _auth_checks(settings: Settings) -> list[tuple[bool, str]]:
    mode = settings.auth_mode
    jwt = mode == "jwt"
    return [
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
