"""librdkafka client properties as options of Spark's Kafka source (Java client keys)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_streaming.client_options import spark_kafka_options
from topology.client_properties import ClientPropertiesError


def test_scram_over_tls_becomes_a_jaas_config_and_a_pem_truststore(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    options = spark_kafka_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "app",
            "sasl.password": 'pa"ss',
            "ssl.ca.location": str(ca),
            "client.rack": "r1",
        }
    )
    assert options == {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="app" password="pa\\"ss";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.certificates": ca.read_text(),
        "kafka.client.rack": "r1",
    }


def test_plain_and_a_client_certificate_and_no_hostname_check(tmp_path: Path) -> None:
    (tmp_path / "c.pem").write_text("CERT")
    (tmp_path / "c.key").write_text("KEY")
    options = spark_kafka_options(
        {
            "security.protocol": "SSL",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.certificate.location": str(tmp_path / "c.pem"),
            "ssl.key.location": str(tmp_path / "c.key"),
            "ssl.endpoint.identification.algorithm": "none",
        }
    )
    assert options["kafka.sasl.mechanism"] == "PLAIN"
    assert options["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required"
    )
    assert options["kafka.ssl.keystore.type"] == "PEM"
    assert options["kafka.ssl.keystore.certificate.chain"] == "CERT"
    assert options["kafka.ssl.keystore.key"] == "KEY"
    assert options["kafka.ssl.endpoint.identification.algorithm"] == ""


def test_oidc_becomes_the_oauthbearer_login_module() -> None:
    options = spark_kafka_options(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "dk",
            "sasl.oauthbearer.client.secret": "s",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        }
    )
    assert options["kafka.sasl.login.callback.handler.class"].endswith(
        "OAuthBearerLoginCallbackHandler"
    )
    assert options["kafka.sasl.jaas.config"].endswith(
        'OAuthBearerLoginModule required clientId="dk" clientSecret="s";'
    )
    assert options["kafka.sasl.oauthbearer.token.endpoint.url"] == "https://idp/token"


def test_keys_the_reader_owns_and_unreadable_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ClientPropertiesError, match=r"group\.id"):
        spark_kafka_options({"group.id": "mine"})
    with pytest.raises(ClientPropertiesError, match=r"ssl\.ca\.location"):
        spark_kafka_options({"ssl.ca.location": str(tmp_path / "missing.pem")})
