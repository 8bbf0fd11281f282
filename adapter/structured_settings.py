"""The settings whose values are tables, not scalars: how each is read from the TOML file and
from the JSON an environment variable or a flag holds (`Structured` of `adapter.declared`)."""

from __future__ import annotations

import json
from typing import Any

from adapter.declared import ConfigError, Structured
from topology.client_properties import ClientPropertiesError, checked


def _mounts(document: Any, origin: str) -> tuple[dict[str, Any], ...]:
    """Mount tables from a list of tables (TOML `[[mounts]]`) or of JSON objects."""
    if not isinstance(document, list) or not all(isinstance(t, dict) for t in document):
        raise ConfigError(f"{origin}: expected a list of mount tables")
    mounts = tuple(dict(table) for table in document)
    names = [table.get("bucket") for table in mounts]
    if len(set(map(str, names))) != len(names):
        raise ConfigError(f"{origin}: a bucket is mounted twice")
    return mounts


def _mounts_text(raw: str, origin: str) -> tuple[dict[str, Any], ...]:
    try:
        document = json.loads(raw)
    except ValueError as error:
        raise ConfigError(f"{origin}: not a JSON array of mounts: {error}") from error
    return _mounts(document, origin)


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


def _certificates_text(raw: str, origin: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    try:
        return _certificates(json.loads(raw), origin)
    except ValueError as error:
        if isinstance(error, ConfigError):
            raise
        raise ConfigError(f"{origin}: not a JSON object of subjects: {error}") from error


def _client_properties(document: Any, origin: str) -> tuple[tuple[str, str], ...]:
    """`[kafka.client]` or its JSON object, checked; errors name keys, never values."""
    if not isinstance(document, dict):
        raise ConfigError(f"{origin}: expected a table (a JSON object) of client properties")
    try:
        return tuple(checked(document, origin).items())
    except ClientPropertiesError as error:
        raise ConfigError(str(error)) from error


def _client_properties_text(raw: str, origin: str) -> tuple[tuple[str, str], ...]:
    try:
        document = json.loads(raw)
    except ValueError:  # the error would quote the text, and it holds secrets
        raise ConfigError(f"{origin}: not a JSON object of client properties") from None
    return _client_properties(document, origin)


MOUNTS = Structured(_mounts, _mounts_text)
CERTIFICATES = Structured(_certificates, _certificates_text)
CLIENT_PROPERTIES = Structured(_client_properties, _client_properties_text)
