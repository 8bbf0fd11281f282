"""The Kafka client's secret files, reloaded when they change (adapter/secret_files.py).

`kafka_client_file` read again: a new `sasl.username`/`sasl.password` (PLAIN or SCRAM) goes to
every live client and every client made from then on (topology/live_clients.py), so each
reconnection authenticates with it; connections already open stay as they are, and no
append waits or is lost. The certificate and key files the properties name are watched too:
librdkafka reads them only when a client is created, so the clients created from then on use
the new ones, and the long-lived ones are made again (`renew`: the write slots' producers
after their transaction in flight, the state follower's consumer between two polls, the
admin client, the owners' group consumer as the same static member; the read pool, the
scanner and the mounted topics' indexers and writers at their next use), so that none goes on
with a certificate the brokers may no longer trust.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from adapter.config import ConfigError, Settings, client_file_properties
from adapter.secret_files import SecretFiles
from adapter.tasks import Kind
from topology.kafka_client import KafkaAccess

log = logging.getLogger(__name__)

# librdkafka's keys naming files with a certificate or key.
CERTIFICATE_FILES = (
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
)


# Makes the long-lived clients again; says which, for the log line.
Renew = Callable[[], Awaitable[str]]


def watch_kafka_secrets(
    files: SecretFiles, settings: Settings, kafka: KafkaAccess, renew: Renew
) -> None:
    if settings.kafka_client_file:
        files.watch(
            "kafka_client_file",
            [settings.kafka_client_file],
            lambda: _credentials(files, settings, kafka),
        )
    named = dict(settings.kafka_client)
    certificates = [named[key] for key in CERTIFICATE_FILES if key in named]
    files.watch(
        "the Kafka client's certificate files", certificates, lambda: _certificates(files, renew)
    )


def _credentials(files: SecretFiles, settings: Settings, kafka: KafkaAccess) -> bool:
    try:
        found = client_file_properties(settings.kafka_client_file)
    except ConfigError as error:
        log.error("kafka_client_file not reloaded, the previous credentials stay: %s", error)
        return False
    username, password = found.get("sasl.username"), found.get("sasl.password")
    if username is None or password is None:
        log.warning("kafka_client_file reloaded: no sasl.username and sasl.password in it")
        return False
    files.tasks.spawn(_rotating(kafka, username, password), "rotate-kafka-sasl", Kind.JOB)
    current = dict(settings.kafka_client)
    if changed := sorted(
        k for k, v in found.items() if current.get(k) != v and not k.startswith("sasl.")
    ):
        log.warning("kafka_client_file: %s changed: in effect after a restart", ", ".join(changed))
    return True


async def _rotating(kafka: KafkaAccess, username: str, password: str) -> None:
    """The new pair to every live client, from a thread: a consumer takes it only between two
    of its polls (topology/live_clients.py), and the loop must go on meanwhile."""
    told = await asyncio.to_thread(kafka.clients.rotate, username, password)
    log.info("kafka SASL credentials reloaded (user %s): %d live clients told", username, told)


def _certificates(files: SecretFiles, renew: Renew) -> bool:
    """Clients created from now on read the new files; the long-lived ones are made again.
    The files are not checked here: librdkafka refuses an unusable one when it makes a
    client, and the renewal that fails so logs it (the old client stays then)."""
    files.tasks.spawn(_renewing(renew), "renew-kafka-clients", Kind.JOB)
    return True


async def _renewing(renew: Renew) -> None:
    renewed = await renew()
    log.info("Kafka clients renewed with the new certificate files: %s", renewed)
