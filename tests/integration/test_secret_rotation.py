"""Secrets rotated as Kubernetes rotates them: the files of a mounted Secret are swapped (the
`..data` symlink replaced, tests/secret_volume.py) and no signal is sent. A running `serve`
presents the new HTTPS certificate, refuses the clients of a CA removed from its client CA file,
takes the new tokens (and refuses a removed one) and authenticates to Kafka with the new SCRAM
password, losing no append."""

from __future__ import annotations

import asyncio
import http.client
import secrets
import ssl
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka.admin import NewTopic

from devstack.certificates import Issued
from devstack.process import free_port
from devstack.secure_kafka import SecureKafka, properties_file
from tests.adapter_process import running_adapter
from tests.certificates import Pair, TestCA, fresh_status, presented_serial, until_presented
from tests.cluster import TEXT, cluster_env, past_moves
from tests.secret_volume import SecretVolume
from tests.secure_kafka import new_prefix, read_committed, transactions_ready
from tests.tokens import token_file
from topology.acls import Grant, instance_grants, mount_grants

POLL = {"DURABLE_KAFKA_SECRET_POLL_MS": "200"}
OLD_TOKEN = "old-secret-token-0123456789-rotation"
NEW_TOKEN = "new-secret-token-0123456789-rotation"


def _tokens(tmp_path: Path, token: str) -> bytes:
    scopes = ["admin:*", "append:*", "read:*"]
    return token_file(
        tmp_path / f"t-{uuid.uuid4().hex}.toml", {"bot": (token, scopes)}
    ).read_bytes()


@pytest.mark.timeout(120)
async def test_a_swapped_certificate_is_presented_to_new_connections(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    ca = TestCA(tmp_path)
    first, second = ca.server("first"), ca.server("second")
    volume = SecretVolume(
        tmp_path / "tls", {"tls.crt": first.cert.read_bytes(), "tls.key": first.key.read_bytes()}
    )
    env = cluster_env(kafka_bootstrap, new_prefix(), tmp_path) | POLL
    env |= {
        "DURABLE_KAFKA_TLS_CERT_FILE": str(volume.path("tls.crt")),
        "DURABLE_KAFKA_TLS_KEY_FILE": str(volume.path("tls.key")),
    }
    trusting = ssl.create_default_context(cafile=str(ca.path))
    port = free_port()
    with running_adapter(env, tmp_path / "serve.log", port, tls=trusting):
        assert presented_serial(port, trusting) == first.serial
        volume.update({"tls.crt": second.cert.read_bytes(), "tls.key": second.key.read_bytes()})
        await until_presented(port, trusting, second.serial)
    assert (
        "tls_cert_file and tls_key_file changed: reloading" in (tmp_path / "serve.log").read_text()
    )


def _client_context(ca: TestCA, pair: Pair) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca.path))
    context.load_cert_chain(pair.cert, pair.key)
    return context


def _kept_status(connection: http.client.HTTPSConnection) -> int:
    connection.request("GET", "/healthz")
    response = connection.getresponse()
    response.read()
    return response.status


@pytest.mark.timeout(120)
async def test_a_ca_removed_from_the_client_ca_file_is_refused_without_a_restart(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    ca = TestCA(tmp_path / "server")
    kept, removed = TestCA(tmp_path / "kept", "kept CA"), TestCA(tmp_path / "gone", "gone CA")
    staying = _client_context(ca, kept.client("staying", "staying"))
    leaving = _client_context(ca, removed.client("leaving", "leaving"))
    server = ca.server("server")
    volume = SecretVolume(
        tmp_path / "tls", {"ca.crt": kept.path.read_bytes() + removed.path.read_bytes()}
    )
    env = cluster_env(kafka_bootstrap, new_prefix(), tmp_path) | POLL
    env |= {
        "DURABLE_KAFKA_TLS_CERT_FILE": str(server.cert),
        "DURABLE_KAFKA_TLS_KEY_FILE": str(server.key),
        "DURABLE_KAFKA_TLS_CLIENT_CA_FILE": str(volume.path("ca.crt")),
        "DURABLE_KAFKA_TLS_CLIENT_AUTH": "required",
    }
    port = free_port()
    with running_adapter(env, tmp_path / "serve.log", port, tls=staying):
        assert await asyncio.to_thread(fresh_status, port, leaving) == 200
        open_ = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=staying)
        assert await asyncio.to_thread(_kept_status, open_) == 200
        socket_before = open_.sock
        volume.update({"ca.crt": kept.path.read_bytes()})
        for _ in range(150):
            if await asyncio.to_thread(fresh_status, port, leaving) == 0:
                break
            await asyncio.sleep(0.2)
        assert await asyncio.to_thread(fresh_status, port, leaving) == 0
        assert await asyncio.to_thread(fresh_status, port, staying) == 200
        assert await asyncio.to_thread(_kept_status, open_) == 200
        assert open_.sock is socket_before  # the connection opened before the swap served on
        open_.close()


@pytest.mark.timeout(120)
async def test_a_swapped_token_file_lets_the_new_token_in_and_the_removed_one_not(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    volume = SecretVolume(tmp_path / "auth", {"tokens.toml": _tokens(tmp_path, OLD_TOKEN)})
    env = cluster_env(kafka_bootstrap, new_prefix(), tmp_path) | POLL
    env |= {
        "DURABLE_KAFKA_AUTH_MODE": "static",
        "DURABLE_KAFKA_AUTH_TOKEN_FILE": str(volume.path("tokens.toml")),
    }
    with running_adapter(env, tmp_path / "serve.log") as url:
        async with aiohttp.ClientSession() as http:

            async def status(token: str, method: str = "GET") -> int:
                headers = {"Authorization": f"Bearer {token}"}
                async with http.request(method, f"{url}/tokens", headers=headers) as response:
                    return response.status

            assert await status(OLD_TOKEN, "PUT") == 201
            assert (await status(OLD_TOKEN), await status(NEW_TOKEN)) == (200, 401)
            volume.update({"tokens.toml": _tokens(tmp_path, NEW_TOKEN)})
            for _ in range(300):
                if await status(NEW_TOKEN) == 200:
                    break
                await asyncio.sleep(0.1)
            assert (await status(NEW_TOKEN), await status(OLD_TOKEN)) == (200, 401)


@dataclass
class _Document:
    """One adapter's text stream in a bucket of its own, and what was appended to it."""

    url: str
    http: aiohttp.ClientSession
    stream: str
    bucket: str
    sent: list[bytes] = field(default_factory=list)

    async def append(self, n: int) -> None:
        """`m{n}`, sent again after a 503 (nothing written), as a client does."""
        value = f"m{n}".encode()
        status, body = await past_moves(self.http, "POST", self.stream, data=value, headers=TEXT)
        assert status in (200, 204), (n, body)
        self.sent.append(value)


@asynccontextmanager
async def _document(env: dict[str, str], log: Path) -> AsyncIterator[_Document]:
    """An adapter on `env` (logging to `log`), a bucket of its own and a text stream in it."""
    bucket = f"r{uuid.uuid4().hex[:8]}"
    with running_adapter(env, log) as url:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            stream = f"{url}/{bucket}/doc"
            assert (await past_moves(http, "PUT", f"{url}/{bucket}"))[0] == 201
            assert (await past_moves(http, "PUT", stream, headers=TEXT))[0] == 201
            yield _Document(url, http, stream, bucket)


def _client_properties(kafka: SecureKafka, user: str, password: str) -> bytes:
    properties = kafka.sasl_properties(user, password) | {
        # Idle connections close after a second, so that the appends after the rotation
        # reconnect, and authenticate again (with the password the file holds then).
        "connections.max.idle.ms": "1000",
    }
    return "".join(f"{key}={value}\n" for key, value in properties.items()).encode()


@pytest.mark.timeout(240)
async def test_a_new_scram_password_is_used_without_losing_an_append(
    secured_kafka: SecureKafka, tmp_path: Path
) -> None:
    prefix, user = new_prefix(), f"rotated-{uuid.uuid4().hex[:8]}"
    old, new = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    secured_kafka.set_password(user, old)
    secured_kafka.grant(user, instance_grants(prefix))
    transactions_ready(secured_kafka)
    volume = SecretVolume(
        tmp_path / "kafka", {"client.properties": _client_properties(secured_kafka, user, old)}
    )
    env = cluster_env(secured_kafka.sasl_bootstrap, prefix, tmp_path) | POLL
    env |= {
        "DURABLE_KAFKA_KAFKA_CLIENT_FILE": str(volume.path("client.properties")),
        "DURABLE_KAFKA_PARTITIONS": "1",
        "DURABLE_KAFKA_TIER_AFTER_BYTES": str(1 << 30),  # every append stays in Kafka
    }
    log = tmp_path / "serve.log"
    async with _document(env, log) as doc:
        for n in range(3):
            await doc.append(n)
        secured_kafka.set_password(user, new)
        volume.update({"client.properties": _client_properties(secured_kafka, user, new)})
        for _ in range(300):
            if "kafka SASL credentials reloaded" in log.read_text():
                break
            await asyncio.sleep(0.1)
        for n in range(3, 9):  # each after the connections idled out: new ones
            await asyncio.sleep(1.5)
            await doc.append(n)
    properties = secured_kafka.sasl_properties(user, new)
    values = read_committed(secured_kafka.sasl_bootstrap, properties, prefix, doc.bucket)
    assert [value for value in values if value] == doc.sent  # b"": the stream's creation


async def _until_logged(log: Path, text: str, wait_s: float = 30) -> bool:
    for _ in range(int(wait_s / 0.1)):
        if text in await asyncio.to_thread(log.read_text):
            return True
        await asyncio.sleep(0.1)
    return False


def _certificates(
    kafka: SecureKafka, tmp_path: Path, prefix: str, names: tuple[str, str], grants: list[Grant]
) -> tuple[SecretVolume, dict[str, Issued], dict[str, str]]:
    """Client certificates of two principals, each granted `grants`, the first in a Secret
    volume the adapter's client properties name: the volume, each principal's pair, and the
    adapter's settings."""
    pairs = {name: kafka.client_certificate(tmp_path, name) for name in names}
    for name in names:
        kafka.grant(name, grants)
    transactions_ready(kafka)
    volume = SecretVolume(tmp_path / "kafka-tls", _tls_files(pairs[names[0]]))
    client = kafka.mtls_properties() | {
        "ssl.certificate.location": str(volume.path("tls.crt")),
        "ssl.key.location": str(volume.path("tls.key")),
    }
    env = cluster_env(kafka.ssl_bootstrap, prefix, tmp_path) | POLL
    properties = properties_file(tmp_path / "client.properties", client)
    return volume, pairs, env | {"DURABLE_KAFKA_KAFKA_CLIENT_FILE": str(properties)}


def _tls_files(pair: Issued) -> dict[str, bytes]:
    """A `kubernetes.io/tls` Secret's files of `pair`."""
    return {"tls.crt": pair.cert_pem.encode(), "tls.key": pair.key_pem.encode()}


@pytest.mark.timeout(240)
async def test_a_new_client_certificate_is_used_by_the_writers_without_losing_an_append(
    secured_kafka: SecureKafka, tmp_path: Path
) -> None:
    """Certificate A, then B (another principal) swapped in while appends flow; then A's grants
    are taken away: every append after that goes through, none lost or doubled."""
    prefix, tag = new_prefix(), uuid.uuid4().hex[:8]
    old, new = f"rot-a-{tag}", f"rot-b-{tag}"
    volume, pairs, env = _certificates(
        secured_kafka, tmp_path, prefix, (old, new), instance_grants(prefix)
    )
    env |= {
        "DURABLE_KAFKA_PARTITIONS": "1",
        "DURABLE_KAFKA_TIER_AFTER_BYTES": str(1 << 30),  # every append stays in Kafka
        "DURABLE_KAFKA_HOT_CACHE_BYTES": "0",  # every read asks Kafka (the read pool)
    }
    log = tmp_path / "serve.log"
    async with _document(env, log) as doc:
        url, http, stream, sent, append = doc.url, doc.http, doc.stream, doc.sent, doc.append

        async def appending(first: int, stop: asyncio.Event) -> int:
            n = first
            while not stop.is_set():
                await append(n)
                n += 1
            return n

        for n in range(3):
            await append(n)

        async def read() -> tuple[int, bytes]:
            """A catch-up read, answered at once: no retry (a pooled Kafka consumer)."""
            async with http.get(stream, params={"offset": "-1"}) as reply:
                return reply.status, await reply.read()

        assert await read() == (200, b"".join(sent))
        stop = asyncio.Event()
        flowing = asyncio.create_task(appending(3, stop))
        volume.update(_tls_files(pairs[new]))
        renewed = await _until_logged(log, "Kafka clients renewed")
        stop.set()
        first = await flowing
        # From here on the old certificate's principal may do nothing: a client still
        # holding it fails at its next request (the owners' consumer at its next
        # heartbeat, and the instance loses its slots).
        secured_kafka.revoke(old, instance_grants(prefix))
        for n in range(first, first + 5):  # answered at once: no retry
            async with http.post(stream, data=f"m{n}".encode(), headers=TEXT) as reply:
                assert reply.status in (200, 204), (renewed, n, await reply.text())
            sent.append(f"m{n}".encode())
            await asyncio.sleep(2)  # over the session timeout (6 s) in all
        async with http.get(f"{url}/readyz") as reply:
            assert reply.status == 200, await reply.text()
        assert await read() == (200, b"".join(sent))
    properties = secured_kafka.mtls_properties() | {
        "ssl.certificate.location": str(pairs[new].cert_file),
        "ssl.key.location": str(pairs[new].key_file),
    }
    values = read_committed(secured_kafka.ssl_bootstrap, properties, prefix, doc.bucket)
    assert [value for value in values if value] == doc.sent  # b"": the stream's creation


def _mounted_topic(kafka: SecureKafka, topic: str) -> None:
    admin = kafka.admin()
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1)])[topic].result(30)


@pytest.mark.timeout(240)
async def test_a_new_client_certificate_is_used_by_a_writable_mount_without_losing_an_append(
    secured_kafka: SecureKafka, tmp_path: Path
) -> None:
    """A mounted topic taking plain and idempotent-producer appends, read after each: once
    certificate B is swapped in and A's grants taken away, its indexer, writer and
    transactional writers go on with B; no append is refused and every one is read back."""
    prefix, tag = new_prefix(), uuid.uuid4().hex[:8]
    old, new, topic = f"rot-a-{tag}", f"rot-b-{tag}", f"mounted-{tag}"
    grants: list[Grant] = instance_grants(prefix) + mount_grants(topic, appends=True)
    volume, pairs, env = _certificates(secured_kafka, tmp_path, prefix, (old, new), grants)
    _mounted_topic(secured_kafka, topic)
    env["DURABLE_KAFKA_MOUNT_TOPICS"] = topic
    log = tmp_path / "serve.log"
    sent: dict[str, list[bytes]] = {"plain": [], "once": []}
    with running_adapter(env, log) as url:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http:
            mount = {"topic": topic, "content_type": "text/plain", "appends": True}
            status, body = await past_moves(http, "PUT", f"{url}/{tag}", json={"mount": mount})
            assert status == 201, body

            async def append(n: int, retry: bool) -> None:
                """One plain append and one with producer headers; none sent again after the
                swap: each must be answered at once."""
                for key, extra in (("plain", {}), ("once", _producer_headers(n))):
                    value, target = f"{key}{n};".encode(), f"{url}/{tag}/{key}"
                    headers = TEXT | extra
                    if retry:  # the mount's index may still be building: 503 until then
                        status, body = await past_moves(
                            http, "POST", target, data=value, headers=headers
                        )
                    else:
                        async with http.post(target, data=value, headers=headers) as reply:
                            status, body = reply.status, await reply.read()
                    assert status in (200, 204), (key, n, body)
                    sent[key].append(value)

            async def read(key: str) -> tuple[int, bytes]:
                async with http.get(f"{url}/{tag}/{key}", params={"offset": "-1"}) as reply:
                    return reply.status, await reply.read()

            for n in range(3):
                await append(n, retry=True)
            assert await read("plain") == (200, b"".join(sent["plain"]))
            volume.update(_tls_files(pairs[new]))
            renewed = await _until_logged(log, "Kafka clients renewed")
            secured_kafka.revoke(old, grants)  # a client still holding A fails from here on
            for n in range(3, 7):
                await append(n, retry=False)
                await asyncio.sleep(0.5)
            assert renewed
            for key, values in sent.items():
                assert await read(key) == (200, b"".join(values)), key


def _producer_headers(seq: int) -> dict[str, str]:
    return {"Producer-Id": "p-1", "Producer-Epoch": "0", "Producer-Seq": str(seq)}
