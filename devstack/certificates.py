"""A throw-away certificate authority and the certificates it signs, as PEM files for tests.

Keys are unencrypted PKCS#8 (what a PEM keystore of Kafka's and librdkafka both read).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_DAYS = 2


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM text and as files."""

    cert_pem: str
    key_pem: str
    cert_file: Path
    key_file: Path


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


def issue(authority: Authority, home: Path, common_name: str, server: bool) -> Issued:
    """A certificate for 127.0.0.1/localhost (server) or a client named `common_name`."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = _builder(subject, authority.cert.subject, key.public_key()).add_extension(
        x509.ExtendedKeyUsage([usage, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
    )
    if server:
        names = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = builder.sign(authority.key, hashes.SHA256())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM).decode()
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    cert_file, key_file = home / f"{common_name}.pem", home / f"{common_name}.key"
    cert_file.write_text(cert_pem)
    key_file.write_text(key_pem)
    key_file.chmod(0o600)
    return Issued(cert_pem, key_pem, cert_file, key_file)


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
