"""A Java client.properties (`sasl.jaas.config`, `ssl.truststore.*` / `ssl.keystore.*` stores
made by `keytool`) serves as it is against the secured broker: `durable-kafka serve` starts,
and appends are committed; a JKS store stops the start (exit 2) with the conversion command."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import aiohttp
import pytest

from adapter.cli import main
from devstack.secure_kafka import APP, MTLS_CLIENT, SecureKafka
from tests.adapter_process import running_adapter
from tests.cluster import cluster_env
from tests.secure_kafka import new_prefix, read_committed
from topology.acls import instance_grants

STORE_PASSWORD = "changeit"
TEXT = {"Content-Type": "text/plain"}


def keytool(*args: str) -> None:
    subprocess.run(["keytool", "-noprompt", *args], check=True, capture_output=True, timeout=60)


def truststore(kafka: SecureKafka, path: Path, storetype: str) -> Path:
    """The broker's CA in a Java truststore, as `keytool -importcert` makes it."""
    keytool(
        "-importcert", "-alias", "ca", "-file", str(kafka.ca_file), "-keystore", str(path),
        "-storetype", storetype, "-storepass", STORE_PASSWORD,
    )  # fmt: skip
    return path


def keystore(kafka: SecureKafka, path: Path) -> Path:
    """The mTLS client's certificate and key as a PKCS12 keystore (as `openssl pkcs12 -export`
    or a `keytool -importkeystore` of it makes it)."""
    subprocess.run(
        [
            "openssl", "pkcs12", "-export", "-in", str(kafka.client_cert),
            "-inkey", str(kafka.client_key), "-out", str(path), "-name", "client",
            "-passout", f"pass:{STORE_PASSWORD}",
        ],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return path


def java_scram(kafka: SecureKafka, store: Path, storetype: str | None) -> str:
    lines = [
        "security.protocol=SASL_SSL",
        "sasl.mechanism=SCRAM-SHA-512",
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\",
        f'    username="{APP}" password="{kafka.app_password}";',
        f"ssl.truststore.location={store}",
        f"ssl.truststore.password={STORE_PASSWORD}",
        "ssl.endpoint.identification.algorithm=https",
    ]
    return "\n".join(lines + ([f"ssl.truststore.type={storetype}"] if storetype else [])) + "\n"


def env_of(
    kafka: SecureKafka, bootstrap: str, prefix: str, path: Path, tmp: Path
) -> dict[str, str]:
    return cluster_env(bootstrap, prefix, tmp) | {
        "DURABLE_KAFKA_KAFKA_CLIENT_FILE": str(path),
        "DURABLE_KAFKA_TIER_AFTER_BYTES": str(1 << 30),  # all stays in Kafka, to read back
        "DURABLE_KAFKA_PARTITIONS": "1",
    }


@pytest.mark.timeout(180)
async def test_serve_reads_a_java_scram_file_with_a_pkcs12_truststore(
    secured_kafka: SecureKafka, tmp_path: Path
) -> None:
    prefix = new_prefix()
    secured_kafka.grant(APP, instance_grants(prefix))
    store = truststore(secured_kafka, tmp_path / "truststore.p12", "PKCS12")
    path = tmp_path / "client.properties"
    path.write_text(java_scram(secured_kafka, store, "PKCS12"))
    env = env_of(secured_kafka, secured_kafka.sasl_bootstrap, prefix, path, tmp_path)
    await _appended(secured_kafka, env, tmp_path / "serve.log", prefix)


@pytest.mark.timeout(180)
async def test_serve_reads_a_java_mtls_file_with_pkcs12_stores(
    secured_kafka: SecureKafka, tmp_path: Path
) -> None:
    """The keystore: the client certificate the SSL listener requires (its CN the principal)."""
    prefix = new_prefix()
    secured_kafka.grant(MTLS_CLIENT, instance_grants(prefix))
    trust = truststore(secured_kafka, tmp_path / "truststore.p12", "PKCS12")
    keys = keystore(secured_kafka, tmp_path / "keystore.p12")
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.location={trust}\nssl.truststore.password={STORE_PASSWORD}\n"
        f"ssl.keystore.location={keys}\nssl.keystore.password={STORE_PASSWORD}\n"
        f"ssl.key.password={STORE_PASSWORD}\nssl.keystore.type=PKCS12\n"
    )
    env = env_of(secured_kafka, secured_kafka.ssl_bootstrap, prefix, path, tmp_path)
    await _appended(secured_kafka, env, tmp_path / "serve.log", prefix)


async def _appended(kafka: SecureKafka, env: dict[str, str], log: Path, prefix: str) -> None:
    bucket = f"j{uuid.uuid4().hex[:8]}"
    with running_adapter(env, log) as url:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
            assert (await session.put(f"{url}/{bucket}")).status == 201
            stream = f"{url}/{bucket}/doc"
            assert (await session.put(stream, headers=TEXT)).status == 201
            for n in range(3):
                response = await session.post(stream, data=f"m{n}".encode(), headers=TEXT)
                assert response.status in (200, 204), await response.text()
    admin = kafka.sasl_properties("admin")
    values = read_committed(kafka.sasl_bootstrap, admin, prefix, bucket)
    assert [v for v in values if v.startswith(b"m")] == [b"m0", b"m1", b"m2"], values


def test_a_jks_truststore_stops_the_start_with_the_conversion_command(
    secured_kafka: SecureKafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = truststore(secured_kafka, tmp_path / "truststore.jks", "JKS")
    path = tmp_path / "client.properties"
    path.write_text(java_scram(secured_kafka, store, None))  # no type: Java's default, JKS
    for command in (["serve"], ["topics", "plan"]):
        argv = [*command, "--kafka-client-file", str(path)]
        argv += ["--bootstrap-servers", secured_kafka.sasl_bootstrap]
        assert main(argv) == 2
        error = capsys.readouterr().err
        print(error)
        assert "ssl.truststore.location" in error
        assert "keytool -importkeystore" in error
        assert "-srcstoretype JKS" in error
        assert "-deststoretype PKCS12" in error
        assert secured_kafka.app_password not in error
