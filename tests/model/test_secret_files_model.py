"""The protocol's model on a deployment that takes its secrets from files an operator rotates:
its clients hold static tokens (`auth_mode = "static"`, one token file both instances read),
both serve HTTPS (and forward to each other over it) with a certificate of a CA of the test's
own and take client certificates of a client CA as principals, and both reach a SASL_SSL
broker as a SCRAM user with only the documented ACLs, its password in a client file
(`kafka_client_file`). The same rules as `test_protocol_model.py`, where rotating the
credentials lists a new token and client CA beside the old ones, writes a new certificate over
the served one and sets a new Kafka password (on the broker, then in the file), waits for each
instance to let the token and a certificate of the new CA in, show the certificate and reload
the password, then removes the old token and CA and waits for each to refuse them, among every
other step (restarts, pauses and `kill -9` included). `make test` runs one derandomized
sequence; `make model` as many as the JWT deployment."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from devstack.jaeger import JaegerNode
from devstack.secure_kafka import SecureKafka
from tests.model.test_protocol_model import Deployment, drive, replay, start_deployment
from tests.secure_kafka import transactions_ready
from tests.services import S3Server

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "1"))


@pytest.fixture(scope="module")
def deployment(
    secured_kafka: SecureKafka,
    s3: S3Server,
    jaeger: JaegerNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    transactions_ready(secured_kafka)
    with contextlib.ExitStack() as stack:
        yield from start_deployment(
            stack, secured_kafka.sasl_bootstrap, s3, jaeger, tmp_path_factory, secured_kafka
        )


@pytest.mark.timeout(int(os.environ.get("MODEL_TIMEOUT_S", "600")))
def test_a_deployment_on_rotated_secret_files_behaves_as_the_protocol_model(
    deployment: Deployment,
) -> None:
    drive(deployment, EXAMPLES)


def test_secrets_rotated_between_idempotent_appends_and_a_restart(deployment: Deployment) -> None:
    """Idempotent appends through both instances, the secrets rotated between them, the owner
    killed with `kill -9` and started again (it reads the file at start, then follows it),
    and rotated once more: the producer's principal is the same throughout, so its appends
    go on as one producer's, and every message reads back."""
    idempotent = {"kind": "idempotent", "size": 16, "flat": False}
    replay(
        deployment,
        [
            ("create_bucket", {"slot": 0, "retention": "none", "which": 0}),
            (
                "create_stream",
                {"slot": 0, "name": "t", "is_json": False, "which": 0, "flat": False},
            ),
            ("append", {"pick": 0, "which": 0} | idempotent),
            ("rotate_key", {"which": 0}),
            ("append", {"pick": 0, "which": 1} | idempotent),
            ("restart", {"which": 0, "hard": True}),
            ("rotate_key", {"which": 1}),
            ("append", {"pick": 0, "which": 0} | idempotent),
            ("read", {"pick": 0, "kind": "all", "index": 0, "which": 1, "flat": True}),
        ],
    )
