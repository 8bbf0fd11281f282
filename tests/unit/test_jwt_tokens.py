"""JWT verification with PyJWT: issuer, audience, expiry, leeway, algorithms, keys."""

from __future__ import annotations

import base64
import json
import time

import jwt
import pytest

from adapter.auth.jwt_tokens import Expectations, JwtVerifier, KeySetError, key_set
from adapter.auth.principals import InvalidToken
from adapter.auth.scopes import Operation
from tests.tokens import AUDIENCE, ISSUER, Signer, unsigned

SIGNER = Signer()


def verifier(leeway_s: int = 0, algorithms: tuple[str, ...] = ("ES256",)) -> JwtVerifier:
    expect = Expectations(ISSUER, AUDIENCE, algorithms, leeway_s)
    return JwtVerifier(expect, key_set(SIGNER.jwks()))


def test_a_good_token_gives_its_subject_scopes_and_expiry() -> None:
    token = SIGNER.token(["read:a", "append:b*", "openid"], ttl_s=60)
    principal = verifier().verify(token, time.time())
    assert principal.name == "alice"
    assert principal.may(Operation.READ, "a")
    assert principal.may(Operation.APPEND, "bee")
    assert not principal.may(Operation.ADMIN, "a")
    assert principal.expires_at is not None
    assert 0 < principal.expires_at - time.time() <= 60


def test_scp_lists_are_read_too() -> None:
    token = SIGNER.token([], claims={"scp": ["admin:x"]})
    assert verifier().verify(token, time.time()).may(Operation.ADMIN, "x")


@pytest.mark.parametrize(
    ("claims", "message"),
    [
        ({"iss": "https://evil.test"}, "issuer"),
        ({"aud": "someone-else"}, "Audience"),
        ({"sub": ""}, "sub"),
    ],
)
def test_claims_must_match(claims: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidToken, match=message):
        verifier().verify(SIGNER.token(["read:a"], claims=claims), time.time())


def test_an_expired_token_is_refused_past_the_leeway() -> None:
    token = SIGNER.token(["read:a"], ttl_s=-10)
    with pytest.raises(InvalidToken, match="expired"):
        verifier().verify(token, time.time())
    assert verifier(leeway_s=60).verify(token, time.time()).name == "alice"


def test_alg_none_is_refused() -> None:
    with pytest.raises(InvalidToken, match="not allowed"):
        verifier().verify(unsigned(["admin:*"]), time.time())


def test_an_algorithm_outside_the_list_is_refused() -> None:
    token = jwt.encode({"sub": "x"}, "secret-secret-secret-secret-secret", algorithm="HS256")
    with pytest.raises(InvalidToken, match="not allowed"):
        verifier(algorithms=("ES256", "RS256")).verify(token, time.time())


def test_a_token_of_another_family_than_its_key_is_refused() -> None:
    _, claims, signature = SIGNER.token(["admin:*"]).split(".")
    header = base64.urlsafe_b64encode(json.dumps({"alg": "RS256", "kid": SIGNER.kid}).encode())
    token = f"{header.rstrip(b'=').decode()}.{claims}.{signature}"
    with pytest.raises(InvalidToken, match="not a RS256 key"):
        verifier(algorithms=("ES256", "RS256")).verify(token, time.time())


def test_another_key_is_refused() -> None:
    forger = Signer()  # same kid, other key
    with pytest.raises(InvalidToken, match="Signature"):
        verifier().verify(forger.token(["admin:*"]), time.time())
    stranger = Signer(kid="other")
    with pytest.raises(InvalidToken, match="kid"):
        verifier().verify(stranger.token(["admin:*"]), time.time())


@pytest.mark.parametrize("token", ["", "abc", "a.b.c", "x" * 50])
def test_garbage_is_refused(token: str) -> None:
    with pytest.raises(InvalidToken):
        verifier().verify(token, time.time())


def test_no_keys_yet_refuses_everything() -> None:
    unloaded = JwtVerifier(Expectations(ISSUER, AUDIENCE, ("ES256",), 0))
    with pytest.raises(InvalidToken, match="not loaded"):
        unloaded.verify(SIGNER.token(["read:a"]), time.time())


@pytest.mark.parametrize("document", ["", "{}", '{"keys": []}', '{"keys": [{"kty": "nope"}]}'])
def test_bad_key_sets_are_refused(document: str) -> None:
    with pytest.raises(KeySetError):
        key_set(document)
