"""Client properties: what is refused, what is hidden, how a file is read, how faults are named;
and that every Kafka client of the server is configured through `KafkaAccess.config`."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from adapter.log.writer import _refusal
from topology.client_properties import (
    OWNED,
    REDACTED,
    ClientPropertiesError,
    checked,
    read_properties_file,
    redacted,
)
from topology.kafka_client import ClientProblems, KafkaAccess, denied, problem_reason

ROOT = Path(__file__).resolve().parents[2]
SECURE = {"security.protocol": "SASL_SSL", "sasl.username": "app", "sasl.password": "hunter2"}


def test_owned_keys_are_refused_by_name_without_values() -> None:
    with pytest.raises(ClientPropertiesError) as raised:
        checked({**SECURE, "transactional.id": "x", "isolation.level": "y"}, "[kafka.client]")
    message = str(raised.value)
    assert "isolation.level, transactional.id" in message
    assert "hunter2" not in message


def test_values_become_librdkafka_strings() -> None:
    found = checked({"socket.keepalive.enable": True, "retries": 3, "a": "b"}, "x")
    assert found == {"socket.keepalive.enable": "true", "retries": "3", "a": "b"}
    with pytest.raises(ClientPropertiesError, match="nested"):
        checked({"nested": {"table": 1}}, "x")


def test_secrets_are_redacted() -> None:
    shown = redacted(
        {
            **SECURE,
            "ssl.key.password": "k",
            "ssl.key.pem": "-----BEGIN",
            "sasl.oauthbearer.client.secret": "s",
            "sasl.jaas.config": "j",
            "ssl.ca.location": "/ca.pem",
        }
    )
    assert shown == {
        "security.protocol": "SASL_SSL",
        "sasl.username": "app",
        "sasl.password": REDACTED,
        "ssl.key.password": REDACTED,
        "ssl.key.pem": REDACTED,
        "sasl.oauthbearer.client.secret": REDACTED,
        "sasl.jaas.config": REDACTED,
        "ssl.ca.location": "/ca.pem",
    }


def test_a_java_properties_file_is_read(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# a comment\n! another\nsecurity.protocol = SASL_SSL\n"
        "sasl.mechanism:SCRAM-SHA-512\nsasl.password=long\\\n    er\n\n"
    )
    assert read_properties_file(str(path)) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.password": "longer",
    }
    with pytest.raises(ClientPropertiesError, match="cannot read"):
        read_properties_file(str(tmp_path / "missing.properties"))


def test_a_config_is_the_properties_under_the_servers_own() -> None:
    access = KafkaAccess("b:9092", "acme.dk.", {**SECURE, "client.rack": "r1"})
    config = access.config({"group.id": access.group("reader")}, "librdkafka.test")
    assert config["bootstrap.servers"] == "b:9092"
    assert config["sasl.password"] == "hunter2"
    assert config["group.id"] == "acme.dk.reader"
    assert config["error_cb"] == access.problems.report
    with pytest.raises(ValueError, match="OWNED"):
        access.config({"not.owned.key": 1}, "librdkafka.test")
    assert "hunter2" not in repr(access)


def test_group_and_transactional_ids_start_with_the_prefix() -> None:
    access = KafkaAccess("b:9092", "acme.dk.")
    assert access.group("outcome", unique=True).startswith("acme.dk.outcome-")
    assert access.group("outcome", unique=True) != access.group("outcome", unique=True)
    assert access.transactional_id("mount-writer-3") == "acme.dk.mount-writer-3"


def test_authentication_and_tls_faults_explain_a_failed_call() -> None:
    problems = ClientProblems()
    assert problems.explain("metadata request failed") == "metadata request failed"
    problems.report(KafkaError(KafkaError._TRANSPORT, "Connection refused"))
    assert problems.latest() is None
    problems.report(KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: bad"))
    assert problems.explain("x") == "authentication failed: SASL authentication error: bad"
    problems.clear()
    assert problems.latest() is None
    ssl = KafkaError(KafkaError._SSL, "SSL handshake failed: certificate verify failed")
    assert problem_reason(ssl) == "TLS handshake failed"


def test_an_acl_refusal_names_the_operation_and_resource() -> None:
    asked = {"TransactionalId": ("Write", "acme.dk.writer-3"), "Topic": ("Write", "acme.dk.t")}
    error = KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert denied(error, asked) == "DENIED: Write on TransactionalId acme.dk.writer-3"
    assert denied(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), asked) == (
        "DENIED: Write on Topic acme.dk.t"
    )
    assert denied(KafkaError(KafkaError._TRANSPORT), asked) is None


_CLIENT = re.compile(r"\b(Consumer|Producer|AdminClient)\(")


def _modules() -> list[Path]:
    return [
        path
        for top in ("adapter", "topology", "spark_streaming")
        for path in sorted((ROOT / top).rglob("*.py"))
        if path.name not in ("kafka_client.py", "client_properties.py")
    ]


def test_every_client_config_is_built_by_kafka_access() -> None:
    """A module that builds a client's config itself would connect without the operator's
    properties (no TLS, no credentials): only topology/kafka_client.py may name
    bootstrap.servers, a module creating a client must take its config from `.config(`, and
    one giving Spark's Kafka source a broker must give it `spark_kafka_options` too."""
    strays = []
    for path in _modules():
        text = path.read_text()
        where = path.relative_to(ROOT)
        if "bootstrap.servers" in text and "spark_streaming" not in where.parts:
            strays.append(f"{where}: names bootstrap.servers")
        if _CLIENT.search(text) and ".config(" not in text:
            strays.append(f"{where}: creates a client without KafkaAccess.config")
        if "kafka.bootstrap.servers" in text and "spark_kafka_options(" not in text:
            strays.append(f"{where}: a Spark Kafka source without the client properties")
    assert strays == []


def test_every_key_the_server_sets_is_refused_from_operators() -> None:
    """A key set by a module but missing from OWNED would raise at the client's creation;
    this finds it first, from the source."""
    set_by_code = set()
    # The operator's own keys, written by the modules that translate or renew them.
    operators = {"java_client.py", "live_clients.py"}
    for path in _modules():
        # adapter/tracing names OpenTelemetry attributes (`messaging.system`), no Kafka keys.
        if {"spark_streaming", "tracing"} & set(path.parts) or path.name in operators:
            continue
        set_by_code |= set(re.findall(r'"([a-z]+(?:\.[a-z]+)+)": ', path.read_text()))
    topic_configs = {
        "cleanup.policy",
        "min.insync.replicas",
        "max.message.bytes",
        "retention.ms",
        "retention.bytes",
        "delete.retention.ms",
    }
    assert set_by_code - topic_configs - OWNED == set()


def test_librdkafka_lines_about_refused_credentials_are_dropped() -> None:
    access = KafkaAccess("b:9092", "p.")
    logger = access.config({}, "librdkafka.test-quiet")["logger"]
    auth = "sasl_ssl://h:1/bootstrap: SASL authentication error: Authentication failed"
    tls = "ssl://h:1/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate"
    other = "ssl://h:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused"
    kept = [
        logger.filter(logging.LogRecord("x", logging.ERROR, "", 0, "%s [%s] %s", a, None))
        for a in (("FAIL", "rdkafka#1", auth), ("FAIL", "rdkafka#1", tls), ("FAIL", "r", other))
    ]
    assert kept == [False, False, True]
    assert problem_reason(KafkaError(KafkaError._TRANSPORT, tls)) == "TLS handshake failed"


def test_the_refused_keys_are_documented() -> None:
    operations = (ROOT / "docs" / "operations.md").read_text()
    callbacks = {
        k for k in OWNED if k.endswith("_cb") or k in ("logger", "on_commit", "on_delivery")
    }
    assert [k for k in sorted(OWNED - callbacks) if f"`{k}`" not in operations] == []


def test_a_commit_refused_on_the_transactional_id_names_it() -> None:
    """A transaction whose id lost its ACL names the id, not "(not named by Kafka)"."""
    error = KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert _refusal(error, [], "acme.dk.", "acme.dk.writer-3") == (
        "DENIED: Write on TransactionalId acme.dk.writer-3"
    )
    assert _refusal(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED), [], "acme.dk.", "x") == (
        "DENIED: Write on Topic acme.dk.internal.* (the state topics)"
    )
