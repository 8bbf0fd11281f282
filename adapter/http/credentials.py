"""Building the auth gate from the settings, and keeping a JWKS fetched from a URL fresh."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp

from adapter.auth.certificates import CertificateMappingError, CertificatePrincipals
from adapter.auth.jwt_tokens import Expectations, JwtVerifier, KeySetError, key_set
from adapter.auth.policy import Policy
from adapter.auth.principals import Verifier
from adapter.auth.static_tokens import TokenFile, TokenFileError
from adapter.config import ConfigError, Settings, comma_list
from adapter.http.auth import Gate
from adapter.tasks import Tasks

log = logging.getLogger(__name__)

JWKS_REFRESH_S = 300.0
JWKS_RETRY_S = 5.0
JWKS_TIMEOUT_S = 10.0


def build_gate(settings: Settings) -> Gate:
    """The gate for `auth_mode`; a token file or key file that cannot be used is a ConfigError."""
    policy = Policy(comma_list(settings.auth_public_read))
    try:
        verifier = _verifier(settings)
        certificates = CertificatePrincipals.of(settings.auth_certificates)
    except (TokenFileError, KeySetError, CertificateMappingError, OSError) as error:
        raise ConfigError(str(error)) from error
    return Gate(
        verifier,
        policy,
        settings.auth_conceal,
        settings.auth_query_token,
        certificates=certificates,
    )


def _verifier(settings: Settings) -> Verifier | None:
    if settings.auth_mode == "static":
        return TokenFile(Path(settings.auth_token_file))
    if settings.auth_mode == "jwt":
        return _jwt_verifier(settings)
    return None


def _jwt_verifier(settings: Settings) -> JwtVerifier:
    expect = Expectations(
        settings.auth_jwt_issuer,
        settings.auth_jwt_audience,
        settings.jwt_algorithms,
        settings.auth_jwt_leeway_s,
    )
    if settings.auth_jwt_jwks_file:
        return JwtVerifier(expect, key_set(Path(settings.auth_jwt_jwks_file).read_bytes()))
    return JwtVerifier(expect)  # keys come from the URL once the app runs


class JwksRefresh:
    """The gate's JWT keys, fetched from a URL once started and every JWKS_REFRESH_S."""

    def __init__(self, url: str, verifier: JwtVerifier, tasks: Tasks) -> None:
        self.url = url
        self.verifier = verifier
        self.tasks = tasks

    async def start(self) -> None:
        self.tasks.spawn(_keep_fresh(self.url, self.verifier), "jwks-refresh")

    async def close(self) -> None:
        await self.tasks.close()


def jwks_refresh(settings: Settings, gate: Gate, tasks: Tasks) -> JwksRefresh | None:
    """What keeps the gate's keys fresh when they come from `auth_jwt_jwks_url`."""
    if settings.auth_mode != "jwt" or not settings.auth_jwt_jwks_url:
        return None
    assert isinstance(gate.verifier, JwtVerifier)  # jwt mode: built by `build_gate`
    return JwksRefresh(settings.auth_jwt_jwks_url, gate.verifier, tasks)


async def _keep_fresh(url: str, verifier: JwtVerifier) -> None:
    timeout = aiohttp.ClientTimeout(total=JWKS_TIMEOUT_S)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            try:
                async with session.get(url, raise_for_status=True) as reply:
                    verifier.keys = key_set(await reply.read())
                await asyncio.sleep(JWKS_REFRESH_S)
            except (aiohttp.ClientError, TimeoutError, KeySetError) as error:
                # Old keys stay in use; until the first fetch, every token is refused (401).
                log.warning("fetching the JWKS from %s failed: %s", url, error)
                await asyncio.sleep(JWKS_RETRY_S)
