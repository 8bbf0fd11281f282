"""A verified caller: its name, its scopes and when its credential stops being valid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from adapter.auth.scopes import Operation, Scope


class InvalidToken(Exception):
    """A bearer token that is malformed, unknown, expired or signed by someone else.

    The message says why, for the operator's log and the client; it never holds the token.
    `reason` is one of `expired`, `malformed` and `invalid` (anything else): a metric label.
    """

    def __init__(self, message: str, reason: str = "invalid") -> None:
        super().__init__(message)
        self.reason = reason


class UnknownKey(InvalidToken):
    """A token signed with a key (`kid`) the verifier does not hold: worth fetching the key set
    again once, in case the identity provider has rotated its keys."""


@dataclass(frozen=True)
class Principal:
    name: str  # static: the token's name; jwt: the `sub` claim
    scopes: frozenset[Scope]
    expires_at: float | None  # Unix seconds; None when the credential never expires

    def may(self, operation: Operation, bucket_id: str) -> bool:
        return any(scope.covers(operation, bucket_id) for scope in self.scopes)

    def seconds_left(self, now: float) -> float | None:
        return None if self.expires_at is None else self.expires_at - now


class Verifier(Protocol):
    """Turns a bearer token into the principal it proves, or raises InvalidToken."""

    def verify(self, token: str, now: float) -> Principal: ...
