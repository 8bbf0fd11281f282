"""A throw-away certificate authority and the certificates it signs, as PEM files for tests.

Keys are unencrypted PKCS#8 (what a PEM keystore of Kafka's and librdkafka both read).
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 2
SERVER_NAMES = ("127.0.0.1", "localhost")


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM text and as files."""

    cert_pem: str
    key_pem: str
    cert_file: Path
    key_file: Path
    serial: int


@dataclass(frozen=True)
class Authority:
    """A CA: its certificate file is what a client or broker trusts."""

    name: str
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    cert_file: Path

    @property
    def cert_pem(self) -> str:
        return self.cert.public_bytes(serialization.Encoding.PEM).decode()


def new_authority(home: Path, name: str) -> Authority:
    """A self-signed CA written to `home/<name>.pem`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (
        _builder(subject, subject, key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(key, hashes.SHA256())
    )
    home.mkdir(parents=True, exist_ok=True)
    cert_file = home / f"{name}.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return Authority(name, key, cert, cert_file)


def issue(
    authority: Authority,
    home: Path,
    common_name: str,
    server: bool,
    names: Sequence[str] = SERVER_NAMES,
    file_name: str | None = None,
) -> Issued:
    """A server certificate for `names` (IP addresses or DNS names), or a client certificate
    whose subject is `CN=<common_name>`, written to `home/<file_name or common_name>.pem|.key`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    # A broker's certificate also serves its own connections as a client.
    usage = [ExtendedKeyUsageOID.SERVER_AUTH] if server else []
    builder = _builder(subject, authority.cert.subject, key.public_key()).add_extension(
        x509.ExtendedKeyUsage([*usage, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
    )
    if server:
        alt = [_alt_name(name) for name in names]
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    cert = builder.sign(authority.key, hashes.SHA256())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    stem = file_name or common_name
    cert_file, key_file = home / f"{stem}.pem", home / f"{stem}.key"
    cert_file.write_text(cert_pem)
    key_file.write_text(key_pem)
    key_file.chmod(0o600)
    return Issued(cert_pem, key_pem, cert_file, key_file, cert.serial_number)


def _alt_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _builder(
    subject: x509.Name, issuer: x509.Name, public_key: ec.EllipticCurvePublicKey
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
    )
