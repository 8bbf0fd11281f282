"""HTTPS on the API's listeners: the server's TLS context, built from the settings at start
and rebuilt when its files change (or on SIGHUP) without dropping a connection.

One `ssl.SSLContext` serves every TLS listener of a process; its `sni_callback` (which OpenSSL
calls in every handshake, with or without a server name) hands the handshake the context built
from the files as they were last loaded. A reload builds a whole new context from the files
and makes it that one: a context can only ever add CAs to its trust store, so a CA removed
from `tls_client_ca_file` would stay trusted had the new file been loaded into the old one.
Handshakes from then on present the new certificate and verify against the new CAs, while
connections already open keep the session they negotiated. A reload that cannot build its
context (a file unreadable, not PEM, a key not matching) changes nothing and says why.
The pair is parsed with `cryptography` first, so each error names the file at fault and an
encrypted key is refused rather than prompted for on a terminal.
"""

from __future__ import annotations

import logging
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from adapter.config import ConfigError, Settings

log = logging.getLogger(__name__)


def server_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of the API's listeners; None when `tls_cert_file` is not set.
    Raises ConfigError naming the file that cannot be used."""
    if not settings.tls:
        return None
    context = _built(settings)
    context.sni_callback = Handshakes(context)
    return context


def _built(settings: Settings) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    load_pair(context, settings)
    if settings.tls_client_ca_file:
        _trust_clients(context, settings)
    return context


class Handshakes:
    """The listeners' context's `sni_callback`: each handshake continues with `current`, the
    context built from the files last loaded (OpenSSL then presents its certificate and
    verifies a client's against its CAs; the verify mode, fixed by the settings, stays)."""

    def __init__(self, current: ssl.SSLContext) -> None:
        self.current = current

    def __call__(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, used: ssl.SSLContext
    ) -> None:
        if used is not self.current:
            connection.context = self.current


def _handshakes(context: ssl.SSLContext) -> Handshakes:
    handshakes = context.sni_callback
    if not isinstance(handshakes, Handshakes):
        raise TypeError("not a context made by server_context")
    return handshakes


def peer_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context of the clients that forward writes to other instances; None (the
    system's trust store, names checked) without `tls_peer_ca_file`. With it, a peer is
    whoever holds a certificate of that CA: its names are not compared, because instances
    are reached at an address (a pod's IP) that a certificate rarely names."""
    path = settings.tls_peer_ca_file
    if not path:
        return None
    context = ssl.create_default_context()
    context.check_hostname = False
    try:
        context.load_verify_locations(cadata=_read(path, "tls_peer_ca_file").decode())
    except (ValueError, ssl.SSLError) as error:
        raise ConfigError(f"tls_peer_ca_file {path}: not PEM CA certificates ({error})") from error
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


def reload_client_ca(context: ssl.SSLContext, settings: Settings) -> bool:
    """`tls_client_ca_file` changed: from the next handshake on, its CAs and no others are
    trusted (a new context: a CA removed from the file is no longer trusted)."""
    try:
        fresh = _built(settings)
    except ConfigError as error:
        log.error("tls_client_ca_file not reloaded, the previous CAs stay: %s", error)
        return False
    _handshakes(context).current = fresh
    log.info("tls_client_ca_file reloaded: %s", settings.tls_client_ca_file)
    return True


def reload(context: ssl.SSLContext, settings: Settings) -> bool:
    """SIGHUP, or the pair's files changed: handshakes from now on use a context built from
    the files named by the settings. On failure the old one stays and one line says why."""
    try:
        served = _checked(settings)
        fresh = _built(settings)
    except ConfigError as error:
        log.error("TLS certificate not reloaded, the previous one stays in use: %s", error)
        return False
    _handshakes(context).current = fresh
    log.info("TLS certificate reloaded: %s", served)
    return True
