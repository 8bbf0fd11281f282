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

JWKS_RETRY_S = 5.0
JWKS_TIMEOUT_S = 10.0
# A token naming a kid the set lacks fetches the set again, but not more often than this: a
# stream of forged kids must not turn into a stream of requests to the identity provider.
JWKS_REFETCH_MIN_S = 10.0
# A response's `Cache-Control: max-age` below this is read as this.
JWKS_LIFETIME_FLOOR_S = 10.0


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
        keys=_key_source(settings, verifier),
    )


def _key_source(settings: Settings, verifier: Verifier | None) -> JwksKeys | None:
    """What keeps the keys fresh when they come from `auth_jwt_jwks_url`."""
    if not isinstance(verifier, JwtVerifier) or not settings.auth_jwt_jwks_url:
        return None
    return JwksKeys(settings.auth_jwt_jwks_url, verifier, settings.auth_jwt_jwks_refresh_ms / 1000)


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


class JwksKeys:
    """The JWT keys from a URL: fetched once started, again when the response's lifetime
    (`Cache-Control: max-age`, at most `refresh_s`) ends, and at once, rate-limited, when a
    token names a `kid` the set lacks (the identity provider rotated its keys)."""

    def __init__(self, url: str, verifier: JwtVerifier, refresh_s: float) -> None:
        self.url = url
        self.verifier = verifier
        self.refresh_s = refresh_s
        self.tasks = Tasks()
        self._session: aiohttp.ClientSession | None = None
        self._fetching: asyncio.Future[float] | None = None
        self._last_refetch = -JWKS_REFETCH_MIN_S

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=JWKS_TIMEOUT_S))
        self.tasks.spawn(self._keep_fresh(), "jwks-refresh")

    async def close(self) -> None:
        await self.tasks.close()
        if self._session is not None:
            await self._session.close()

    async def refetch(self) -> bool:
        """Fetch the set now for a token whose `kid` it lacks, unless an unknown kid fetched it
        within JWKS_REFETCH_MIN_S (then the token is refused as it is). True: a new set is in."""
        if self._fetching is None:
            if _now() - self._last_refetch < JWKS_REFETCH_MIN_S:
                return False
            self._last_refetch = _now()
        try:
            await self._fetch()
        except (aiohttp.ClientError, TimeoutError, KeySetError) as error:
            log.warning("fetching the JWKS from %s for an unknown kid failed: %s", self.url, error)
            return False
        return True

    async def _keep_fresh(self) -> None:
        while True:
            try:
                lifetime = await self._fetch()
            except (aiohttp.ClientError, TimeoutError, KeySetError) as error:
                # Old keys stay in use; until the first fetch, every token is refused (401).
                log.warning("fetching the JWKS from %s failed: %s", self.url, error)
                lifetime = JWKS_RETRY_S
            await asyncio.sleep(lifetime)

    async def _fetch(self) -> float:
        """One fetch, shared by every caller that asks while it runs; the set's lifetime."""
        if self._fetching is None:
            self._fetching = asyncio.ensure_future(self._fetch_once())
            self._fetching.add_done_callback(self._fetched)
        return await asyncio.shield(self._fetching)

    def _fetched(self, _: asyncio.Future[float]) -> None:
        self._fetching = None

    async def _fetch_once(self) -> float:
        assert self._session is not None  # started
        async with self._session.get(self.url, raise_for_status=True) as reply:
            self.verifier.keys = key_set(await reply.read())
            return lifetime(reply.headers.get("Cache-Control"), self.refresh_s)


def lifetime(cache_control: str | None, refresh_s: float) -> float:
    """How long a fetched set is fresh: its `max-age`, within [JWKS_LIFETIME_FLOOR_S,
    refresh_s]; `refresh_s` without one (or with `no-cache`/`no-store`, the floor)."""
    if cache_control is None:
        return refresh_s
    directives = [part.strip().lower() for part in cache_control.split(",")]
    if "no-cache" in directives or "no-store" in directives:
        return min(JWKS_LIFETIME_FLOOR_S, refresh_s)
    for directive in directives:
        name, _, value = directive.partition("=")
        if name == "max-age" and value.strip().isdigit():
            return min(max(float(value), JWKS_LIFETIME_FLOOR_S), refresh_s)
    return refresh_s


def _now() -> float:
    return asyncio.get_running_loop().time()
