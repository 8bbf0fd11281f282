"""`auth_mode = "static"`: bearer tokens listed, hashed, in a TOML file.

    [[token]]
    name = "ingest-bot"                      # the principal: logs, producer-id scope
    sha256 = "9f86d081884c7d65..."           # `durable-kafka hash-token` prints it
    scopes = ["append:telemetry-*", "read:telemetry-*"]
    expires_at = 2027-01-01T00:00:00Z        # optional TOML date-time

Tokens are random secrets of at least 128 bits (`durable-kafka hash-token --new` makes one),
so one SHA-256 is the right hash: there is nothing to brute-force, and lookup by digest costs
one hash per request. The file holds no secret a reader could replay.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import re
import secrets
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapter.auth.principals import InvalidToken, Principal
from adapter.auth.scopes import parse_scope

log = logging.getLogger(__name__)
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_NAME = re.compile(r"^[A-Za-z0-9._@:-]{1,128}$")
MIN_TOKEN_CHARS = 22  # 128 bits in url-safe base64


class TokenFileError(ValueError):
    """The token file cannot be read or holds an entry that is not valid; says which."""


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    """A fresh random token (256 bits)."""
    return secrets.token_urlsafe(32)


@dataclass(frozen=True)
class StaticTokens:
    by_digest: dict[str, Principal]

    @classmethod
    def load(cls, path: Path) -> StaticTokens:
        try:
            document = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise TokenFileError(f"cannot read token file {path}: {error}") from error
        entries = document.get("token", [])
        if set(document) - {"token"} or not isinstance(entries, list):
            raise TokenFileError(f"{path}: only [[token]] tables are allowed")
        by_digest: dict[str, Principal] = {}
        for number, entry in enumerate(entries, 1):
            sha, principal = _entry(entry, f"{path}: token #{number}")
            if sha in by_digest:
                raise TokenFileError(f"{path}: token #{number} repeats another's sha256")
            by_digest[sha] = principal
        return cls(by_digest)

    def verify(self, token: str, now: float) -> Principal:
        principal = self.by_digest.get(digest(token))
        if principal is None:
            raise InvalidToken("unknown token")
        if principal.expires_at is not None and principal.expires_at <= now:
            raise InvalidToken("the token has expired", "expired")
        return principal


class TokenFile:
    """The token file's tokens (a Verifier), replaced when the file is loaded again."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tokens = StaticTokens.load(path)

    def verify(self, token: str, now: float) -> Principal:
        return self.tokens.verify(token, now)

    def reload(self) -> bool:
        """Load the file again; one that is not valid keeps the previous tokens (logged)."""
        try:
            self.tokens = StaticTokens.load(self.path)
        except TokenFileError as error:
            log.error("auth_token_file not reloaded, the previous tokens stay: %s", error)
            return False
        log.info("auth_token_file reloaded: %d tokens", len(self.tokens.by_digest))
        return True


def _entry(entry: Any, where: str) -> tuple[str, Principal]:
    if not isinstance(entry, dict) or set(entry) - {"name", "sha256", "scopes", "expires_at"}:
        raise TokenFileError(f"{where}: keys are name, sha256, scopes, expires_at")
    name, sha, scopes = entry.get("name"), entry.get("sha256"), entry.get("scopes", [])
    if not isinstance(name, str) or not _NAME.match(name):
        raise TokenFileError(f"{where}: name must be 1 to 128 of [A-Za-z0-9._@:-]")
    if not isinstance(sha, str) or not _DIGEST.match(sha):
        raise TokenFileError(f"{where}: sha256 must be 64 lowercase hex digits")
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise TokenFileError(f"{where}: scopes must be a list of strings")
    parsed = [parse_scope(text) for text in scopes]
    if None in parsed:
        raise TokenFileError(f"{where}: scopes are read:, append: or admin: and a bucket")
    return sha, Principal(
        name, frozenset(s for s in parsed if s), _expiry(entry.get("expires_at"), where)
    )


def _expiry(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if not isinstance(value, datetime.datetime) or value.tzinfo is None:
        raise TokenFileError(f"{where}: expires_at must be a TOML date-time with an offset")
    return value.timestamp()
