"""A single-node Kafka 4.3.1 broker secured as Kafka shops run theirs, for tests.

Listeners: SASL_SSL with SCRAM-SHA-512 users (`admin`, the super user the broker also talks to
itself as, and `app`), and SSL that requires a client certificate (mTLS; the certificate's CN is
the principal). `StandardAuthorizer` with `allow.everyone.if.no.acl.found=false`: a principal
other than `admin` may do only what an ACL grants it. Certificates come from a CA made at start.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from devstack import certificates
from devstack.kafka import (
    LOG4J2,
    START_TIMEOUT_S,
    KafkaNode,
    jars_dir,
    java_argv,
    new_cluster_id,
    server_properties,
)
from devstack.process import free_port, run_checked
from topology.acls import CLUSTER, GROUP, TOPIC, TRANSACTIONAL_ID, Grant

ADMIN = "admin"
APP = "app"
MTLS_CLIENT = "mtls-app"  # the client certificate's CN, and so its principal's name
NODE_ID = "1"  # the one node's id (devstack/kafka.py)
# The mTLS listener's truststore, a dynamic config of the broker: set, the listener reads the
# file it names from the next handshake on (no restart); deleted, the static one is back.
SSL_TRUSTSTORE = "listener.name.ssl.ssl.truststore.location"
_RESOURCE = {
    TOPIC: ResourceType.TOPIC,
    GROUP: ResourceType.GROUP,
    TRANSACTIONAL_ID: ResourceType.TRANSACTIONAL_ID,
    CLUSTER: ResourceType.BROKER,  # confluent_kafka's name for the cluster resource
}


@dataclass(frozen=True)
class SecureKafka:
    """Where the secured broker listens and what a client needs to reach it."""

    home: Path
    sasl_port: int
    ssl_port: int
    controller_port: int
    ca_file: Path
    admin_password: str
    app_password: str
    client_cert: Path
    client_key: Path
    rogue_ca_file: Path  # a CA the broker's certificate was not signed by
    authority: certificates.Authority  # the broker's CA, which signs the client certificates

    @property
    def sasl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.sasl_port}"

    @property
    def ssl_bootstrap(self) -> str:
        return f"127.0.0.1:{self.ssl_port}"

    def sasl_properties(self, user: str = APP, password: str | None = None) -> dict[str, str]:
        """librdkafka properties of a SCRAM user (`app` with its password unless told)."""
        secret = password or (self.admin_password if user == ADMIN else self.app_password)
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": secret,
            "ssl.ca.location": str(self.ca_file),
        }

    def mtls_properties(self) -> dict[str, str]:
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca_file),
            "ssl.certificate.location": str(self.client_cert),
            "ssl.key.location": str(self.client_key),
        }

    def client_certificate(self, folder: Path, principal: str) -> certificates.Issued:
        """A new client certificate of the broker's CA whose principal is `principal`."""
        return certificates.issue(self.authority, folder, principal, server=False)

    def admin(self) -> AdminClient:
        config: dict[str, Any] = {"bootstrap.servers": self.sasl_bootstrap, "log_level": 0}
        return AdminClient({**config, **self.sasl_properties(ADMIN)})

    def grant(self, principal: str, grants: list[Grant]) -> None:
        """Create the ACLs (as the super user); raises if the broker refuses one."""
        bindings = [_binding(principal, grant, op) for grant in grants for op in grant.operations]
        if bindings:
            admin = self.admin()  # held: a collected client fails its futures
            for future in admin.create_acls(bindings, request_timeout=30).values():
                future.result(timeout=30)

    def set_password(self, user: str, password: str) -> None:
        """Create the SCRAM user `user`, or give it a new password (as the super user)."""
        credential = UserScramCredentialUpsertion(
            user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode()
        )
        admin = self.admin()
        for future in admin.alter_user_scram_credentials([credential]).values():
            future.result(timeout=30)

    def trust_clients_of(self, cas: Sequence[Path]) -> None:
        """From the next handshake on, the mTLS listener takes client certificates of its own
        CA and of `cas` (none: of its own CA alone, as at start). A new file each time: the
        broker reloads a truststore whose location or file changed."""
        entry = ConfigEntry(SSL_TRUSTSTORE, None, incremental_operation=AlterConfigOpType.DELETE)
        if cas:
            trusted = self.home / "tls" / f"ssl-trust-{uuid.uuid4().hex[:8]}.pem"
            trusted.write_bytes(b"".join(ca.read_bytes() for ca in [self.ca_file, *cas]))
            entry = ConfigEntry(
                SSL_TRUSTSTORE, str(trusted), incremental_operation=AlterConfigOpType.SET
            )
        resource = ConfigResource(ResourceType.BROKER, NODE_ID, incremental_configs=[entry])
        admin = self.admin()
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

    def revoke(self, principal: str, grants: list[Grant]) -> None:
        filters = [_filter(principal, g, op) for g in grants for op in g.operations]
        if filters:
            admin = self.admin()
            for future in admin.delete_acls(filters, request_timeout=30).values():
                future.result(timeout=30)


def _binding(principal: str, grant: Grant, operation: str) -> AclBinding:
    pattern = ResourcePatternType.PREFIXED if grant.prefixed else ResourcePatternType.LITERAL
    return AclBinding(
        _RESOURCE[grant.resource],
        grant.name,
        pattern,
        f"User:{principal}",
        "*",
        _operation(operation),
        AclPermissionType.ALLOW,
    )


def _operation(name: str) -> AclOperation:
    """`DescribeConfigs` -> AclOperation.DESCRIBE_CONFIGS."""
    words = "".join(f"_{c}" if c.isupper() else c for c in name).lstrip("_")
    return AclOperation[words.upper()]


def _filter(principal: str, grant: Grant, operation: str) -> AclBindingFilter:
    pattern = ResourcePatternType.PREFIXED if grant.prefixed else ResourcePatternType.LITERAL
    return AclBindingFilter(
        _RESOURCE[grant.resource],
        grant.name,
        pattern,
        f"User:{principal}",
        "*",
        _operation(operation),
        AclPermissionType.ALLOW,
    )


def _inline(pem: str) -> str:
    """PEM text as one properties line (`\\n` escapes)."""
    return pem.strip().replace("\n", "\\n")


def secure_properties(kafka: SecureKafka, broker: certificates.Issued) -> str:
    """The broker's server.properties: the plain node's, with the listeners secured."""
    node = KafkaNode(kafka.home, port=kafka.sasl_port, controller_port=kafka.controller_port)
    base = [
        line
        for line in server_properties(node).splitlines()
        if not line.startswith(("listeners=", "advertised.listeners=", "listener.security"))
        and not line.startswith("inter.broker.listener.name=")
    ]
    admin = kafka.admin_password
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    ports = (kafka.sasl_port, kafka.ssl_port, kafka.controller_port)
    return "\n".join(
        [
            *base,
            f"listeners=SASL_SSL://127.0.0.1:{ports[0]},SSL://127.0.0.1:{ports[1]},"
            f"CONTROLLER://127.0.0.1:{ports[2]}",
            f"advertised.listeners=SASL_SSL://127.0.0.1:{ports[0]},SSL://127.0.0.1:{ports[1]}",
            "listener.security.protocol.map=SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SASL_PLAINTEXT",
            "inter.broker.listener.name=SASL_SSL",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol=PLAIN",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            f"listener.name.controller.plain.sasl.jaas.config={plain} required "
            f'username="{ADMIN}" password="{admin}" user_{ADMIN}="{admin}";',
            f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram} required "
            f'username="{ADMIN}" password="{admin}";',
            "listener.name.ssl.ssl.client.auth=required",
            "ssl.principal.mapping.rules=RULE:^CN=([^,]+).*$/$1/,DEFAULT",
            "ssl.keystore.type=PEM",
            f"ssl.keystore.certificate.chain={_inline(broker.cert_pem)}",
            f"ssl.keystore.key={_inline(broker.key_pem)}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={kafka.ca_file}",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found=false",
            f"super.users=User:{ADMIN}",
            "",
        ]
    )


def start(home: Path) -> SecureKafka:
    """Format and start a secured broker under `home`; return once it answers the admin."""
    kafka, authority = _prepared(home)
    broker = certificates.issue(authority, home / "tls", "broker", server=True)
    node = KafkaNode(home, port=kafka.sasl_port, controller_port=kafka.controller_port)
    config = home / "server.properties"
    config.write_text(secure_properties(kafka, broker))
    (home / "log4j2.properties").write_text(LOG4J2)
    users = {ADMIN: kafka.admin_password, APP: kafka.app_password}
    scram = [
        arg
        for user, password in users.items()
        for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")
    ]
    argv = ["format", "-t", new_cluster_id(), "-c", str(config), *scram]
    run_checked(java_argv(node, "kafka.tools.StorageTool", *argv), "formatting Kafka storage")
    jars_dir()
    node.process.spawn(java_argv(node, "kafka.Kafka", str(config)))
    node.process.wait_ready(lambda: _answers(kafka), START_TIMEOUT_S)
    return kafka


def _prepared(home: Path) -> tuple[SecureKafka, certificates.Authority]:
    tls = home / "tls"
    authority = certificates.new_authority(tls, "test-ca")
    rogue = certificates.new_authority(tls, "rogue-ca")
    client = certificates.issue(authority, tls, MTLS_CLIENT, server=False)
    kafka = SecureKafka(
        home=home,
        sasl_port=free_port(),
        ssl_port=free_port(),
        controller_port=free_port(),
        ca_file=authority.cert_file,
        admin_password=secrets.token_urlsafe(16),
        app_password=secrets.token_urlsafe(16),
        client_cert=client.cert_file,
        client_key=client.key_file,
        rogue_ca_file=rogue.cert_file,
        authority=authority,
    )
    return kafka, authority


def _answers(kafka: SecureKafka) -> bool:
    try:
        metadata = kafka.admin().list_topics(timeout=2)
    except KafkaException:
        return False
    return bool(metadata.brokers)


def stop(kafka: SecureKafka, timeout_s: float = 60.0) -> None:
    KafkaNode(kafka.home).process.stop(timeout_s)


def properties_file(path: Path, properties: Mapping[str, str]) -> Path:
    """Write a client.properties for the adapter (`kafka_client_file`)."""
    path.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
    return path
