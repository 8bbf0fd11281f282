"""Real X.509 certificates for tests: a CA made at fixture time, server and client pairs it
signs, written as the PEM files an operator would give the adapter. Nothing is faked: the
adapter and the clients verify them with OpenSSL."""

from __future__ import annotations

import asyncio
import base64
import datetime
import hashlib
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVER_NAMES = ("localhost", "127.0.0.1")
_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Pair:
    """A certificate and its key, as PEM files, with the certificate's serial number."""

    cert: Path
    key: Path
    serial: int


class TestCA:
    """A self-signed EC CA whose certificate is written to `<folder>/ca.pem`."""

    __test__ = False  # not a pytest class

    def __init__(self, folder: Path, name: str = "durable-kafka test CA") -> None:
        self.folder = folder
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = _name(name)
        self.cert = (
            _builder(subject, subject, self.key.public_key())
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.path = folder / f"{name.replace(' ', '-')}.pem"
        self.path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def server(self, file_name: str, names: tuple[str, ...] = SERVER_NAMES) -> Pair:
        """A server certificate for `names` (DNS names or IP addresses)."""
        alt = [_alt_name(name) for name in names]
        return self._issue(file_name, names[0], ExtendedKeyUsageOID.SERVER_AUTH, alt)

    def client(self, file_name: str, common_name: str) -> Pair:
        """A client certificate whose subject is `CN=<common_name>`."""
        return self._issue(file_name, common_name, ExtendedKeyUsageOID.CLIENT_AUTH, [])

    def _issue(
        self,
        file_name: str,
        common_name: str,
        usage: x509.ObjectIdentifier,
        alt: list[x509.GeneralName],
    ) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = _builder(_name(common_name), self.cert.subject, key.public_key())
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        if alt:
            builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        pair = Pair(
            self.folder / f"{file_name}.crt", self.folder / f"{file_name}.key", cert.serial_number
        )
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return pair


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


async def until_presented(port: int, context: ssl.SSLContext, serial: int) -> None:
    """Until a fresh connection to `port` is shown `serial` (a reload follows its signal)."""
    async with asyncio.timeout(30):
        while True:
            if await asyncio.to_thread(presented_serial, port, context) == serial:
                return
            await asyncio.sleep(0.1)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name, issuer: x509.Name, public: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY)
        .not_valid_after(now + _DAY)
    )


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)
