"""The compose `secure` profile's broker, run for real from Kafka's jars: the SCRAM user and the
ACLs kafka-secure-setup grants let the adapter's client.properties do what the server does
under its prefix, and nothing outside it."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from tests import compose_broker
from tests.deployment import Acl
from tests.unit.test_compose import (
    SECURE_FILES,
    client_file,
    environment,
    granted_acls,
    host_file,
    host_port,
    listeners,
    mounted,
    properties,
    secure_settings,
    service,
    shell,
)

pytestmark = pytest.mark.integration

TIMEOUT_S = 30.0
RESOURCE_TYPES = {
    "topic": ResourceType.TOPIC,
    "group": ResourceType.GROUP,
    "transactional-id": ResourceType.TRANSACTIONAL_ID,
    "cluster": ResourceType.BROKER,
}
PATTERNS = {"prefixed": ResourcePatternType.PREFIXED, "literal": ResourcePatternType.LITERAL}


@dataclass(frozen=True)
class Broker:
    addresses: dict[str, str]  # listener name -> localhost:port
    volumes: Path  # a folder per compose volume


def admin_config(address: str) -> dict[str, str]:
    """admin.properties (a Java client's) in librdkafka's words."""
    admin = properties(SECURE_FILES / "admin.properties")
    found = re.search(r'username="([^"]+)" password="([^"]+)"', admin["sasl.jaas.config"])
    assert found
    return {
        "bootstrap.servers": address,
        "security.protocol": admin["security.protocol"],
        "sasl.mechanism": admin["sasl.mechanism"],
        "sasl.username": found.group(1),
        "sasl.password": found.group(2),
    }


def answers(config: Mapping[str, str]) -> bool:
    try:
        return bool(AdminClient(dict(config)).list_topics(timeout=2).brokers)
    except KafkaException:
        return False


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """kafka-secure, after kafka-secure-certs made its keystore and CA, set up as
    kafka-secure-setup does."""
    home = tmp_path_factory.mktemp("kafka-secure")
    folders = {target: home / volume for target, volume in mounted("kafka-secure-certs").items()}
    # The script the service's shell runs (compose turns `$$` into `$`).
    script = str(service("kafka-secure-certs")["entrypoint"][-1]).replace("$$", "$")
    compose_broker.make_certificates(script, environment("kafka-secure-certs"), folders)
    env = environment("kafka-secure")
    secrets = home / mounted("kafka-secure")["/etc/kafka/secrets"]
    jaas = host_file("kafka-secure", env["KAFKA_OPTS"].removeprefix(compose_broker.JAAS_OPTION))
    inter_broker = env["KAFKA_INTER_BROKER_LISTENER_NAME"]

    def ready(addresses: Mapping[str, str]) -> bool:
        return answers(admin_config(addresses[inter_broker]))

    with compose_broker.running(env, secrets, jaas, home, ready) as addresses:
        set_up(admin_config(addresses[inter_broker]))
        yield Broker(addresses, home)


def set_up(config: dict[str, str]) -> None:
    """What kafka-secure-setup does with kafka-configs.sh and kafka-acls.sh."""
    admin = AdminClient(dict(config))
    user = client_file()["sasl.username"]
    setup = shell("kafka-secure-setup")
    found = re.search(rf"--entity-name {user} --add-config '(\S+)=\[password=(\S+)\]'", setup)
    assert found
    mechanism = ScramMechanism[found.group(1).replace("-", "_")]
    credential = ScramCredentialInfo(mechanism, 8192)
    upsert = UserScramCredentialUpsertion(user, credential, found.group(2).encode())
    for done in admin.alter_user_scram_credentials([upsert]).values():
        done.result(TIMEOUT_S)
    rules = [rule for acl in granted_acls(setup) for rule in bindings(acl, f"User:{user}")]
    for done in admin.create_acls(rules).values():
        done.result(TIMEOUT_S)


def bindings(acl: Acl, principal: str) -> list[AclBinding]:
    """One binding per operation (kafka-acls.sh's `DescribeConfigs` is DESCRIBE_CONFIGS)."""
    return [
        AclBinding(
            RESOURCE_TYPES[acl.resource],
            acl.name or "kafka-cluster",
            PATTERNS[acl.pattern],
            principal,
            "*",
            AclOperation[re.sub(r"(?<!^)(?=[A-Z])", "_", operation).upper()],
            AclPermissionType.ALLOW,
        )
        for operation in sorted(acl.operations)
    ]


def adapter_config(broker: Broker, **overrides: str) -> dict[str, Any]:
    """The adapter's client.properties on its bootstrap listener, its CA from the volume."""
    client = client_file()
    folder, _, file = client["ssl.ca.location"].rpartition("/")
    advertised = listeners("KAFKA_ADVERTISED_LISTENERS", "kafka-secure")
    address = host_port(secure_settings().bootstrap_servers)
    [listener] = [name for name, where in advertised.items() if where == address]
    return {
        **client,
        "bootstrap.servers": broker.addresses[listener],
        "ssl.ca.location": str(broker.volumes / mounted("adapter-secure")[folder] / file),
        **overrides,
    }


def read_committed(broker: Broker, topic: str, group: str, count: int) -> list[bytes]:
    config = {"group.id": group, "isolation.level": "read_committed"}
    consumer = Consumer(adapter_config(broker, **config, **{"auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    values: list[bytes] = []
    try:
        for _ in range(60):
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            if len(values) == count:
                break
    finally:
        consumer.close()
    return values


def test_adapter_writes_and_reads_under_its_prefix(broker: Broker) -> None:
    prefix = secure_settings().topic_prefix
    topic = f"{prefix}bucket.b{uuid.uuid4().hex[:8]}"
    admin = AdminClient(adapter_config(broker))
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(TIMEOUT_S)
    producer = Producer(adapter_config(broker, **{"transactional.id": f"{prefix}writer-0"}))
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    for value in (b"a", b"b", b"c"):
        producer.produce(topic, key=b"stream", value=value)
    producer.commit_transaction(TIMEOUT_S)
    assert read_committed(broker, topic, f"{prefix}reader", 3) == [b"a", b"b", b"c"]


def error_code(error: BaseException) -> Any:
    assert isinstance(error, KafkaException)
    return error.args[0].code()


def test_topics_outside_the_prefix_are_denied(broker: Broker) -> None:
    topic = f"elsewhere.{uuid.uuid4().hex[:8]}"
    admin = AdminClient(adapter_config(broker))
    with pytest.raises(KafkaException) as raised:
        admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    assert error_code(raised.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_transactional_ids_outside_the_prefix_are_denied(broker: Broker) -> None:
    producer = Producer(adapter_config(broker, **{"transactional.id": "elsewhere-writer"}))
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(TIMEOUT_S)
    assert error_code(raised.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_groups_outside_the_prefix_are_denied(broker: Broker) -> None:
    prefix = secure_settings().topic_prefix
    topic = f"{prefix}bucket.g{uuid.uuid4().hex[:8]}"
    admin = AdminClient(adapter_config(broker))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT_S)
    consumer = Consumer(adapter_config(broker, **{"group.id": "elsewhere"}))
    consumer.subscribe([topic])
    errors = []
    try:
        for _ in range(30):
            message = consumer.poll(1.0)
            error = None if message is None else message.error()
            if error is not None:
                errors.append(error.code())
                break
    finally:
        consumer.close()
    assert errors == [KafkaError.GROUP_AUTHORIZATION_FAILED]


def test_a_wrong_password_is_refused(broker: Broker) -> None:
    seen: list[int] = []
    config = adapter_config(broker, **{"sasl.password": "wrong"})
    admin = AdminClient({**config, "error_cb": lambda error: seen.append(error.code())})  # type: ignore[dict-item]
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=5)
    for _ in range(20):  # the client's callbacks are served by poll()
        if seen:
            break
        admin.poll(0.5)
    assert KafkaError._AUTHENTICATION in seen
