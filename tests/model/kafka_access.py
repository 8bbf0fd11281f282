"""How a secret-files model deployment reaches the secured broker, and how an operator rotates
that credential (operations, "Rotating secrets"): as a SCRAM user on the SASL_SSL listener
(`ScramUser`: a new password, on the broker, then in `kafka_client_file`), or with a client
certificate on the mTLS listener (`CertifiedClient`: the broker trusts a new CA beside the old
one, a certificate of it and its key replace the files `kafka_client_file` names, then the old
CA is no longer trusted). Either way the principal stays the same (the user's name, or the
certificate's CN), so the documented ACLs granted to it hold throughout, and Kafka connections
idle for a second are closed, so the instances' clients connect again all along."""

from __future__ import annotations

import secrets
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal, Protocol

from devstack.certificates import Authority, issue, new_authority
from devstack.secure_kafka import SecureKafka
from tests.secret_volume import SecretVolume
from tests.secure_kafka import takes_certificate

Access = Literal["scram", "mtls"]
IDLE = {"connections.max.idle.ms": "1000"}  # reconnections (and handshakes) all along
BROKER_WAIT_S = 60.0  # a bound for the broker to apply a new truststore on a loaded machine


class KafkaCredential(Protocol):
    """The instances' credential on the broker, its client file, and its rotation."""

    bootstrap: str
    client_path: Path  # `kafka_client_file`
    reloaded: str  # what an instance logs once it uses a new credential

    def rotate(self) -> None: ...

    def retire(self) -> None: ...

    def close(self) -> None: ...


def kafka_credential(
    access: Access, kafka: SecureKafka, principal: str, folder: Path
) -> KafkaCredential:
    if access == "scram":
        return ScramUser(kafka, principal, folder)
    return CertifiedClient(kafka, principal, folder)


class ScramUser:
    """A SCRAM user of the SASL_SSL listener whose password rotates."""

    reloaded = "kafka SASL credentials reloaded"

    def __init__(self, kafka: SecureKafka, user: str, folder: Path) -> None:
        self.kafka, self.user = kafka, user
        self.bootstrap = kafka.sasl_bootstrap
        self.client_path = folder / "client.properties"
        self.rotate()

    def rotate(self) -> None:
        """A new password: on the broker first (SCRAM keeps one), then in the client file the
        instances read (until they do, a new connection of theirs fails to authenticate, and
        is tried again)."""
        password = secrets.token_urlsafe(16)
        self.kafka.set_password(self.user, password)
        properties = self.kafka.sasl_properties(self.user, password) | IDLE
        replace(self.client_path, "".join(f"{k}={v}\n" for k, v in properties.items()).encode())

    def retire(self) -> None:
        """Nothing: the broker knew only the new password from the rotation on."""

    def close(self) -> None:
        """Nothing: the user is the deployment's own."""


class CertifiedClient:
    """A client certificate (`CN=<principal>`) presented to the mTLS listener, from a Secret
    volume whose `tls.crt` and `tls.key` are swapped together (a pair never mixes). Each
    rotation makes a new CA: the broker trusts it beside the current one, then the files
    hold a certificate of it; `retire` leaves only the newest trusted, so a client still
    presenting an older certificate is refused at its next handshake."""

    reloaded = "Kafka clients renewed with the new certificate files"

    def __init__(self, kafka: SecureKafka, principal: str, folder: Path) -> None:
        self.kafka, self.principal, self.folder = kafka, principal, folder
        self.bootstrap = kafka.ssl_bootstrap
        self.client_path = folder / "client.properties"
        self.authorities: list[Authority] = []  # the trusted ones, the newest last
        self.made = 0  # CAs made so far
        self.volume = SecretVolume(folder / "kafka-tls", self._new_pair())
        properties = kafka.mtls_properties() | IDLE
        properties["ssl.certificate.location"] = str(self.volume.path("tls.crt"))
        properties["ssl.key.location"] = str(self.volume.path("tls.key"))
        replace(self.client_path, "".join(f"{k}={v}\n" for k, v in properties.items()).encode())

    def rotate(self) -> None:
        """A new CA trusted beside the current one (once the broker takes a certificate of
        it), then a certificate of it in the files."""
        self.volume.update(self._new_pair())

    def retire(self) -> None:
        """Only the newest CA stays trusted (beside the broker's own, which never signed the
        instances' certificates); returns once the broker refuses a certificate of the one
        before it."""
        if len(self.authorities) < 2:
            return
        former = self.authorities[-2]
        self.authorities = self.authorities[-1:]
        self.kafka.trust_clients_of([ca.cert_file for ca in self.authorities])
        gone = issue(former, former.cert_file.parent, "former", server=False)
        self._until(lambda: not takes_certificate(self.kafka, gone.cert_file, gone.key_file))

    def close(self) -> None:
        """The listener trusts its own CA alone again, as the other tests expect it to."""
        self.kafka.trust_clients_of([])

    def _new_pair(self) -> dict[str, bytes]:
        """A new CA, trusted beside the ones before, and the files of a new certificate of it
        (`tls.crt`, `tls.key`, as a `kubernetes.io/tls` Secret holds them)."""
        home = self.folder / f"kafka-ca-{self.made}"
        ca = new_authority(home, f"kafka-client-ca-{self.made}")
        self.made += 1
        self.authorities.append(ca)
        self.kafka.trust_clients_of([a.cert_file for a in self.authorities])
        pair = issue(ca, home, self.principal, server=False)
        self._until(lambda: takes_certificate(self.kafka, pair.cert_file, pair.key_file))
        return {"tls.crt": pair.cert_pem.encode(), "tls.key": pair.key_pem.encode()}

    def _until(self, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + BROKER_WAIT_S
        while not done():
            if time.monotonic() > deadline:
                raise AssertionError("the broker never applied its new truststore")
            time.sleep(0.2)


def replace(path: Path, content: bytes) -> None:
    """Written whole, then renamed over `path`: a reader never sees half a file."""
    draft = path.with_suffix(".draft")
    draft.write_bytes(content)
    shutil.move(draft, path)
