"""`auth_mode = "jwt"`: RFC 7519 tokens, checked with PyJWT against a JSON Web Key Set.

A token must name an allowed algorithm (never `none`, never a shared secret), a key of the
set by `kid` (or the set has one key), and carry `iss`, `aud`, `exp` and `sub` that match,
within the configured clock leeway. Its scopes are the `scope` claim (space-separated, RFC
8693) or `scp` (a list or a string).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import jwt

from adapter.auth.principals import InvalidToken, Principal, UnknownKey
from adapter.auth.scopes import parse_scopes

# The JWK key type each algorithm family signs with: a token cannot pick another family.
_KEY_TYPES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
REQUIRED_CLAIMS = ["exp", "iss", "aud", "sub"]


class KeySetError(ValueError):
    """A JWKS document that does not parse or holds no usable key."""


def key_set(document: str | bytes) -> jwt.PyJWKSet:
    try:
        return jwt.PyJWKSet.from_json(
            document if isinstance(document, str) else document.decode("utf-8")
        )
    except (jwt.PyJWKSetError, jwt.PyJWKError, ValueError, UnicodeDecodeError) as error:
        raise KeySetError(f"not a usable JSON Web Key Set: {error}") from error


@dataclass(frozen=True)
class Expectations:
    issuer: str
    audience: str
    algorithms: tuple[str, ...]
    leeway_s: int


class JwtVerifier:
    """Checks tokens against the current key set (replaced whole when it is fetched again)."""

    def __init__(self, expect: Expectations, keys: jwt.PyJWKSet | None = None) -> None:
        self.expect = expect
        self.keys = keys

    def verify(self, token: str, now: float) -> Principal:
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as error:
            raise InvalidToken(f"malformed token: {error}", "malformed") from error
        algorithm = header.get("alg")
        if algorithm not in self.expect.algorithms:
            raise InvalidToken(f"algorithm {algorithm!r} is not allowed")
        key = self._key(header.get("kid"), str(algorithm))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[str(algorithm)],
                audience=self.expect.audience,
                issuer=self.expect.issuer,
                leeway=self.expect.leeway_s,
                options={"require": REQUIRED_CLAIMS},
            )
        except jwt.ExpiredSignatureError as error:
            raise InvalidToken(str(error), "expired") from error
        except jwt.InvalidTokenError as error:
            raise InvalidToken(str(error)) from error
        return _principal(claims)

    def _key(self, kid: object, algorithm: str) -> jwt.PyJWK:
        if self.keys is None:
            raise InvalidToken("the signing keys are not loaded yet")
        keys = [k for k in self.keys.keys if kid is None or k.key_id == kid]
        if not keys:
            raise UnknownKey(f"no signing key has the token's kid {kid!r}")
        if len(keys) != 1:
            raise InvalidToken("no single signing key matches the token's kid")
        key = keys[0]
        if _KEY_TYPES.get(algorithm[:2]) != key.key_type:
            raise InvalidToken(f"key {kid!r} is not a {algorithm} key")
        return key


def _principal(claims: dict[str, Any]) -> Principal:
    subject = claims["sub"]
    if not isinstance(subject, str) or not subject:
        raise InvalidToken("sub must be a non-empty string")
    exp = claims["exp"]
    return Principal(subject, parse_scopes(_scope_texts(claims)), float(exp))


def _scope_texts(claims: dict[str, Any]) -> Iterable[str]:
    for claim in ("scope", "scp"):
        value = claims.get(claim)
        if isinstance(value, str):
            yield from value.split()
        elif isinstance(value, list):
            yield from (item for item in value if isinstance(item, str))
