"""HTTPS on the API's listeners: the server's TLS context, built from the settings at start
and given a new certificate on SIGHUP without dropping a connection.

One `ssl.SSLContext` serves every TLS listener of a process. A reload loads the new pair into
that same context (`load_cert_chain`), so handshakes from then on present the new certificate
while connections already open keep the session they negotiated. The pair is first loaded
into a scratch context: a pair that is unreadable, not PEM or not matching is refused there,
and the context in use is never left half-changed (a failed reload keeps the old pair).
The pair is parsed with `cryptography` first, so each error names the file at fault and an
encrypted key is refused rather than prompted for on a terminal.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from adapter.config import ConfigError, Settings

log = logging.getLogger(__name__)


def server_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of the API's listeners; None when `tls_cert_file` is not set.
    Raises ConfigError naming the file that cannot be used."""
    if not settings.tls:
        return None
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    load_pair(context, settings)
    if settings.tls_client_ca_file:
        _trust_clients(context, settings)
    return context


def _trust_clients(context: ssl.SSLContext, settings: Settings) -> None:
    path = settings.tls_client_ca_file
    try:
        context.load_verify_locations(cafile=path)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(
            f"tls_client_ca_file {path}: no usable PEM CA certificate: {error}"
        ) from error
    required = settings.tls_client_auth == "required"
    context.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL


@dataclass(frozen=True)
class Served:
    """What the loaded certificate is, for the log line that says so."""

    subject: str
    serial: int
    not_after: str

    def __str__(self) -> str:
        return f"{self.subject} (serial {self.serial:x}, valid until {self.not_after})"


def load_pair(context: ssl.SSLContext, settings: Settings) -> Served:
    """Check the pair, then load it into `context`; ConfigError (nothing loaded) if unusable."""
    served = _checked(settings)
    try:
        context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file)
    except ssl.SSLError as error:  # both parsed: most likely a key of another certificate
        raise ConfigError(
            f"tls_key_file {settings.tls_key_file} is not the key of tls_cert_file "
            f"{settings.tls_cert_file} ({error.reason or error})"
        ) from error
    except OSError as error:  # changed since it was read
        raise ConfigError(f"tls_cert_file or tls_key_file cannot be read: {error}") from error
    return served


def _checked(settings: Settings) -> Served:
    cert = _read(settings.tls_cert_file, "tls_cert_file")
    key = _read(settings.tls_key_file, "tls_key_file")
    try:
        leaf = x509.load_pem_x509_certificates(cert)[0]
    except ValueError as error:
        raise ConfigError(
            f"tls_cert_file {settings.tls_cert_file}: not a PEM certificate"
        ) from error
    try:
        load_pem_private_key(key, password=None)
    except (ValueError, TypeError) as error:  # TypeError: encrypted, and no password given
        raise ConfigError(
            f"tls_key_file {settings.tls_key_file}: not an unencrypted PEM private key ({error})"
        ) from error
    not_after = leaf.not_valid_after_utc.isoformat()
    return Served(leaf.subject.rfc4514_string(), leaf.serial_number, not_after)


def _read(path: str, setting: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise ConfigError(f"{setting} {path}: cannot be read: {error.strerror}") from error


def reload(context: ssl.SSLContext, settings: Settings) -> bool:
    """SIGHUP: load the pair named by the settings into the context in use, once it has
    loaded into a scratch one. On failure the old pair stays and one line says why."""
    try:
        load_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), settings)
        served = load_pair(context, settings)
    except ConfigError as error:
        log.error("TLS certificate not reloaded, the previous one stays in use: %s", error)
        return False
    log.info("TLS certificate reloaded: %s", served)
    return True


# aiohttp's sites leave a TLS handshake asyncio's default of 60 s, and a connection counts
# against the connection limits, and its head's deadline starts, only once its handshake is
# done (asyncio tells the protocol of a TLS connection only then). These sites give the
# handshake the head's deadline (`header_timeout_ms`) instead, so that connections opened
# and left silent are closed as soon as an unfinished head would be.


class TlsTCPSite(web.TCPSite):
    """`web.TCPSite` whose TLS handshakes must finish within `handshake_timeout_s`."""

    def __init__(
        self,
        runner: web.BaseRunner,
        host: str,
        port: int,
        *,
        ssl_context: ssl.SSLContext,
        handshake_timeout_s: float,
        backlog: int = 128,
        reuse_port: bool | None = None,
    ) -> None:
        super().__init__(
            runner, host, port, ssl_context=ssl_context, backlog=backlog, reuse_port=reuse_port
        )
        self.handshake_timeout_s = handshake_timeout_s

    async def start(self) -> None:
        await web.BaseSite.start(self)  # registers the site with its runner
        assert self._runner.server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._runner.server,
            self._host,
            self._port,
            ssl=self._ssl_context,
            backlog=self._backlog,
            reuse_address=self._reuse_address,
            reuse_port=self._reuse_port,
            ssl_handshake_timeout=self.handshake_timeout_s,
        )
        if self._server.sockets:
            self._bound_port = self._server.sockets[0].getsockname()[1]


class TlsSockSite(web.SockSite):
    """`web.SockSite` whose TLS handshakes must finish within `handshake_timeout_s`."""

    def __init__(
        self,
        runner: web.BaseRunner,
        sock: socket.socket,
        ssl_context: ssl.SSLContext,
        handshake_timeout_s: float,
    ) -> None:
        super().__init__(runner, sock, ssl_context=ssl_context)
        self.handshake_timeout_s = handshake_timeout_s

    async def start(self) -> None:
        await web.BaseSite.start(self)
        assert self._runner.server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._runner.server,
            sock=self._sock,
            ssl=self._ssl_context,
            backlog=self._backlog,
            ssl_handshake_timeout=self.handshake_timeout_s,
        )
