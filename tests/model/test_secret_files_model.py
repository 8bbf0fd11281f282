"""The protocol's model on deployments that take their secrets from files an operator rotates:
their clients hold static tokens (`auth_mode = "static"`, one token file both instances read),
both instances serve HTTPS (and forward to each other over it) with a certificate of a CA of
the test's own and take client certificates of a client CA as principals, and both reach the
secured broker with only the documented ACLs, through a client file (`kafka_client_file`):
on one deployment as a SCRAM user over SASL_SSL, on the other (one deployment cannot be both)
over mTLS, with a client certificate whose subject is their principal. The same rules as
`test_protocol_model.py`, where rotating the credentials lists a new token and client CA beside
the old ones, writes a new certificate over the served one and rotates the Kafka credential (a
new password, on the broker then in the file; or a certificate of a new CA the broker trusts
beside the old one), waits for each instance to let the token and a certificate of the new CA
in, show the certificate and take the Kafka credential up, then removes the old token and CA
(and has the broker trust the new Kafka client CA alone), waits for each to refuse them, and
appends and reads through both, among every other step (restarts, pauses and `kill -9`
included).

`make test` runs one derandomized sequence on the SCRAM deployment and the replay below on
both; `make model` runs as many sequences as on the JWT deployment, on both."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest

from devstack.jaeger import JaegerNode
from devstack.secure_kafka import SecureKafka
from tests.model.kafka_access import Access
from tests.model.test_protocol_model import Deployment, drive, replay, start_deployment
from tests.secure_kafka import transactions_ready
from tests.services import S3Server

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("MODEL_EXAMPLES", "1"))
ACCESSES: tuple[Access, ...] = ("scram", "mtls")
# The bounded run (`make test`) drives random sequences on the SCRAM deployment only: one
# derandomized sequence that short seldom draws a rotation, so on the mTLS deployment the
# replay below is what it adds; `make model` (a seed given) drives both.
DRIVEN = ACCESSES if os.environ.get("MODEL_SEED") else ACCESSES[:1]


@pytest.fixture(scope="module", params=ACCESSES)
def deployment(
    request: pytest.FixtureRequest,
    secured_kafka: SecureKafka,
    s3: S3Server,
    jaeger: JaegerNode,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Deployment]:
    """Two instances reaching the secured broker over SASL_SSL as a SCRAM user (`scram`) or
    over mTLS with a client certificate (`mtls`), as the test's parameter says."""
    access: Access = request.param
    transactions_ready(secured_kafka)
    with contextlib.ExitStack() as stack:
        yield from start_deployment(
            stack, secured_kafka.sasl_bootstrap, s3, jaeger, tmp_path_factory, secured_kafka, access
        )


@pytest.mark.parametrize("deployment", DRIVEN, indirect=True)
@pytest.mark.timeout(int(os.environ.get("MODEL_TIMEOUT_S", "600")))
def test_a_deployment_on_rotated_secret_files_behaves_as_the_protocol_model(
    deployment: Deployment,
) -> None:
    drive(deployment, EXAMPLES)


# Its time includes the start of its deployment when it is the first test on it (the mTLS one).
@pytest.mark.timeout(int(os.environ.get("MODEL_TIMEOUT_S", "600")))
def test_secrets_rotated_between_idempotent_appends_and_a_restart(deployment: Deployment) -> None:
    """Idempotent appends through both instances, the secrets rotated between them, the owner
    killed with `kill -9` and started again (it reads the files at start, then follows them),
    and rotated once more: the producer's principal is the same throughout, so its appends
    go on as one producer's, and every message reads back; on either Kafka credential."""
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
