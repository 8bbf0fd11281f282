"""Real X.509 certificates for tests: a CA made at fixture time, server and client pairs it
signs, written as the PEM files an operator would give the adapter. Nothing is faked: the
adapter and the clients verify them with OpenSSL."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import http.client
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from devstack.certificates import SERVER_NAMES, Issued, issue, new_authority


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, as PEM files, with the certificate's serial number."""

    cert: Path
    key: Path
    serial: int


class TestCA:
    """A self-signed EC CA (`devstack/certificates.py`) whose certificate is `path`."""

    __test__ = False  # not a pytest class

    def __init__(self, folder: Path, name: str = "durable-kafka test CA") -> None:
        self.folder = folder
        self.authority = new_authority(folder, name.replace(" ", "-"))
        self.path = self.authority.cert_file

    def server(self, file_name: str, names: tuple[str, ...] = SERVER_NAMES) -> Pair:
        """A server certificate for `names` (DNS names or IP addresses)."""
        return _pair(issue(self.authority, self.folder, names[0], True, names, file_name))

    def client(self, file_name: str, common_name: str) -> Pair:
        """A client certificate whose subject is `CN=<common_name>`."""
        return _pair(issue(self.authority, self.folder, common_name, False, file_name=file_name))


def _pair(issued: Issued) -> Pair:
    return Pair(issued.cert_file, issued.key_file, issued.serial)


def spki_sha256(cert: Path) -> str:
    """base64(SHA-256 of the certificate's SubjectPublicKeyInfo), as Chromium's
    `--ignore-certificate-errors-spki-list` takes it."""
    public = x509.load_pem_x509_certificate(cert.read_bytes()).public_key()
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


def serial_of(der: bytes) -> int:
    """The serial number of a DER certificate (what a TLS peer presented)."""
    return x509.load_der_x509_certificate(der).serial_number


def presented_serial(port: int, context: ssl.SSLContext) -> int:
    """The serial of the certificate a new connection to 127.0.0.1:`port` is shown."""
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        return serial_of(tls.getpeercert(binary_form=True) or b"")


def fresh_status(port: int, context: ssl.SSLContext, path: str = "/healthz") -> int:
    """The status of `GET path` over a new HTTPS connection to 127.0.0.1:`port` made with
    `context` (presenting its client certificate, if it holds one); 0 when the server refused
    the connection (TLS 1.3 says so after the handshake: at the first read)."""
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    except (OSError, http.client.HTTPException):
        return 0
    finally:
        connection.close()


async def until_presented(port: int, context: ssl.SSLContext, serial: int) -> None:
    """Until a fresh connection to `port` is shown `serial` (a reload follows its signal)."""
    async with asyncio.timeout(30):
        while True:
            if await asyncio.to_thread(presented_serial, port, context) == serial:
                return
            await asyncio.sleep(0.1)
