"""Java client properties become librdkafka's, or are refused naming the key, never a value."""

from __future__ import annotations

import datetime
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    pkcs12,
)
from cryptography.x509.oid import NameOID

from topology.client_properties import ClientPropertiesError
from topology.java_client import is_java, translated

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
OIDC = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


def certificate(name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    return key, cert


@pytest.mark.parametrize("module", [SCRAM, PLAIN])
def test_a_jaas_login_becomes_username_and_password(module: str) -> None:
    jaas = f'{module} required username="app" password="s3;cr\\"et";'
    found = translated({"sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas}, "f")
    assert found == {"sasl.mechanism": "PLAIN", "sasl.username": "app", "sasl.password": 's3;cr"et'}


def test_oauthbearer_with_the_oidc_handler_becomes_librdkafkas_oidc() -> None:
    jaas = f'{OAUTH} required clientId="dk" clientSecret="sec" scope="kafka" extension_a="1";'
    given = {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": jaas,
        "sasl.login.callback.handler.class": OIDC,
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
    }
    assert translated(given, "f") == {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": "dk",
        "sasl.oauthbearer.client.secret": "sec",
        "sasl.oauthbearer.scope": "kafka",
        "sasl.oauthbearer.extensions": "a=1",
    }


def test_an_unknown_login_module_is_refused_by_key() -> None:
    jaas = 'com.sun.security.auth.module.Krb5LoginModule required keyTab="/k" principal="p";'
    with pytest.raises(ClientPropertiesError, match=r"sasl\.jaas\.config: the login module"):
        translated({"sasl.jaas.config": jaas}, "f")


def test_a_pkcs12_truststore_becomes_inline_pem(tmp_path: Path) -> None:
    _, ca = certificate("ca")
    store = tmp_path / "trust.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            None, None, None, [ca], BestAvailableEncryption(b"changeit")
        )
    )
    given = {"ssl.truststore.location": str(store), "ssl.truststore.password": "changeit"}
    found = translated(given | {"ssl.endpoint.identification.algorithm": ""}, "f")
    assert found == {
        "ssl.ca.pem": ca.public_bytes(Encoding.PEM).decode(),
        "ssl.endpoint.identification.algorithm": "none",
    }
    with pytest.raises(ClientPropertiesError, match="does not open it") as refused:
        translated(given | {"ssl.truststore.password": "wrong"}, "f")
    assert "wrong" not in str(refused.value)


def test_a_pkcs12_keystore_is_librdkafkas_own_once_it_opens(tmp_path: Path) -> None:
    key, cert = certificate("client")
    store = tmp_path / "keys.p12"
    encryption = BestAvailableEncryption(b"changeit")
    store.write_bytes(pkcs12.serialize_key_and_certificates(b"c", key, cert, None, encryption))
    given = {
        "ssl.keystore.location": str(store),
        "ssl.keystore.password": "changeit",
        "ssl.keystore.type": "PKCS12",
        "ssl.key.password": "changeit",
    }
    assert translated(given, "f") == {
        "ssl.keystore.location": str(store),
        "ssl.keystore.password": "changeit",
    }


def test_a_jks_store_is_refused_with_the_conversion_command(tmp_path: Path) -> None:
    store = tmp_path / "trust.jks"
    store.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")  # JKS's magic and version
    with pytest.raises(ClientPropertiesError) as refused:
        translated({"ssl.truststore.location": str(store)}, "f")
    message = str(refused.value)
    assert message.startswith("f: ssl.truststore.location: a JKS truststore")
    assert f"keytool -importkeystore -srckeystore {store} -srcstoretype JKS" in message
    assert "-deststoretype PKCS12" in message
    with pytest.raises(ClientPropertiesError, match=r"ssl\.keystore\.type: a JKS keystore"):
        translated({"ssl.keystore.location": str(store), "ssl.keystore.type": "JKS"}, "f")


def test_java_only_keys_are_refused_and_librdkafka_files_pass_unchanged() -> None:
    with pytest.raises(ClientPropertiesError, match=r"ssl\.enabled\.protocols: Java client only"):
        translated({"ssl.enabled.protocols": "TLSv1.3", "sasl.jaas.config": "x"}, "f")
    plain = {"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"}
    assert not is_java(plain)
    assert translated(plain, "f") == plain
