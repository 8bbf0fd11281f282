"""HTTPS on the listen address, as a user runs it: the official Python client over TLS with a
test CA, a certificate rotated by SIGHUP under an open SSE session, client certificates as
principals, and the start errors of a TLS pair that cannot work. Each against one process and
against `serve --workers 2` (where a forwarded write crosses to a sibling worker)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

import aiohttp
import httpx
import pytest
from durable_streams import DurableStream, DurableStreamError

from devstack.process import free_port
from tests.adapter_process import SCRIPT, adapter_pid, running_adapter, worker_urls
from tests.certificates import Pair, TestCA, presented_serial, until_presented
from tests.cluster import TEXT, cluster_env, past_moves, stream_in, until_owned
from tests.tokens import token_file

pytestmark = [pytest.mark.integration]

ADMIN = "admin-secret-token-0123456789-https"
STREAMS = [f"s{i}" for i in range(8)]  # their slots spread over both workers
# A client certificate refused: in TLS 1.3 the server judges it after the client's side of
# the handshake is done, so the client learns it at its first read, as a closed connection.
REFUSED_BY_TLS = (httpx.ConnectError, httpx.RemoteProtocolError)
WORKERS = pytest.mark.parametrize("workers", [1, 2], ids=["one_worker", "two_workers"])


@dataclass
class Served:
    """An adapter serving HTTPS: its URL, port, CA and certificate files."""

    url: str
    port: int
    ca: TestCA
    pair: Pair
    log: Path

    def ports(self) -> list[int]:
        """The shared port and each worker's own (`serve --workers`; also HTTPS)."""
        return [self.port] + [int(url.rpartition(":")[2]) for url in worker_urls(self.log)]

    def client_context(self, client: Pair | None = None) -> ssl.SSLContext:
        return trusting(self.ca, client)


def trusting(ca: TestCA, client: Pair | None = None) -> ssl.SSLContext:
    """A client's TLS context trusting `ca`, presenting `client` when given."""
    context = ssl.create_default_context(cafile=str(ca.path))
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    return context


def _tls_env(kafka_bootstrap: str, tmp_path: Path, pair: Pair) -> dict[str, str]:
    prefix = f"https{uuid.uuid4().hex[:10]}."
    return cluster_env(kafka_bootstrap, prefix, tmp_path) | {
        "DURABLE_KAFKA_TLS_CERT_FILE": str(pair.cert),
        "DURABLE_KAFKA_TLS_KEY_FILE": str(pair.key),
        "DURABLE_KAFKA_SSE_MAX_DURATION_MS": "300000",  # the SSE session outlives the test
    }


@pytest.fixture
def ca(tmp_path: Path) -> TestCA:
    return TestCA(tmp_path)


@pytest.fixture
def served(kafka_bootstrap: str, tmp_path: Path, ca: TestCA, workers: int) -> Iterator[Served]:
    pair = ca.server("server")
    env = _tls_env(kafka_bootstrap, tmp_path, pair)
    port = free_port()
    log = tmp_path / "adapter.log"
    with running_adapter(env, log, port, workers, trusting(ca)) as url:
        yield Served(url, port, ca, pair, log)


T = TypeVar("T")


def _retried(call: Callable[[], T]) -> T:
    """`call`, again after a 503 (which writes nothing), as a client is told to: right after
    start the workers may still be dividing the write slots, and this client does not retry."""
    deadline = time.monotonic() + 30
    while True:
        try:
            return call()
        except DurableStreamError as error:
            if error.status != 503 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@WORKERS
def test_the_python_client_appends_and_reads_over_https(served: Served) -> None:
    with httpx.Client(verify=served.client_context(), timeout=30) as client:
        for name in STREAMS:
            url = f"{served.url}/v1/stream/{name}"
            create = partial(DurableStream.create, url, content_type="application/json")
            stream = _retried(partial(create, client=client))
            for i in range(3):
                _retried(partial(stream.append, {"stream": name, "i": i}))
            with stream.stream(offset="-1", live=False) as response:
                assert response.read_json() == [{"stream": name, "i": i} for i in range(3)]
    with pytest.raises(httpx.ConnectError), httpx.Client(timeout=5) as untrusting:
        untrusting.get(f"{served.url}/healthz")  # the test CA is nobody's but the test's


@WORKERS
async def test_a_sighup_rotates_the_certificate_while_an_sse_session_stays_open(
    served: Served, workers: int
) -> None:
    trusting = served.client_context()
    # Keep-alive, and every response read to its end: closing the session then closes each
    # TLS connection cleanly (one left closing would outlive the test's event loop).
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=trusting)) as http:
        url = f"{served.url}/v1/stream/rotated"
        status, _ = await past_moves(http, "PUT", url, headers={"Content-Type": "text/plain"})
        assert status == 201
        async with http.get(url, params={"offset": "-1", "live": "sse"}) as session:
            assert session.status == 200
            await _append(http, url, "before")
            await _until_data(session, "before")

            ports = served.ports()
            assert len(ports) == 1 + (workers if workers > 1 else 0)
            for port in ports:
                assert presented_serial(port, trusting) == served.pair.serial
            rotated = served.ca.server("server")  # the same files, rewritten
            os.kill(adapter_pid(served.port), signal.SIGHUP)  # the parent, with workers
            for port in ports:  # each worker's own port shows what that worker serves
                await until_presented(port, trusting, rotated.serial)

            await _append(http, url, "after")
            await _until_data(session, "after")  # the same response, on its first connection
            assert not session.content.at_eof()
            closed, _ = await past_moves(http, "POST", url, headers={"Stream-Closed": "true"})
            assert closed == 204
            await session.read()  # the session ends with the stream's closing control event


async def _append(http: aiohttp.ClientSession, url: str, text: str) -> None:
    headers = {"Content-Type": "text/plain"}
    status, body = await past_moves(http, "POST", url, data=text, headers=headers)
    assert status == 204, body


async def _until_data(session: aiohttp.ClientResponse, text: str) -> None:
    async with asyncio.timeout(30):
        while line := await session.content.readline():
            if line.rstrip(b"\r\n") == f"data:{text}".encode():
                return
    raise AssertionError(f"the SSE session ended before {text!r}")


@WORKERS
def test_a_client_certificate_is_a_principal_with_its_scopes(
    kafka_bootstrap: str, tmp_path: Path, ca: TestCA, workers: int
) -> None:
    bot, reader, stranger = (
        ca.client("bot", "ingest-bot"),
        ca.client("reader", "dashboard"),
        ca.client("stranger", "stranger"),
    )
    other_ca = TestCA(tmp_path, "another CA")
    outsider = other_ca.client("outsider", "ingest-bot")  # the right name, the wrong CA
    certificates = {"CN=ingest-bot": ["append:*", "read:*"], "CN=dashboard": ["read:*"]}
    env = _tls_env(kafka_bootstrap, tmp_path, ca.server("server")) | {
        "DURABLE_KAFKA_TLS_CLIENT_CA_FILE": str(ca.path),
        "DURABLE_KAFKA_AUTH_MODE": "static",
        "DURABLE_KAFKA_AUTH_TOKEN_FILE": str(
            token_file(tmp_path / "tokens.toml", {"admin": (ADMIN, ["admin:*"])})
        ),
        "DURABLE_KAFKA_AUTH_CERTIFICATES": json.dumps(certificates),
    }
    with running_adapter(env, tmp_path / "adapter.log", None, workers, trusting(ca)) as url:
        admin = {"Authorization": f"Bearer {ADMIN}"}
        with httpx.Client(verify=trusting(ca), headers=admin) as client:
            for name in STREAMS:
                put = _past_moves(
                    partial(
                        client.put,
                        f"{url}/v1/stream/{name}",
                        headers={"Content-Type": "text/plain"},
                    )
                )
                assert put.status_code == 201, put.text

        def status(client_pair: Pair | None, name: str, **headers: str) -> int:
            context = trusting(ca, client_pair)
            with httpx.Client(verify=context, headers={"Content-Type": "text/plain"}) as client:
                return _past_moves(
                    lambda: client.post(f"{url}/v1/stream/{name}", content=b"x", headers=headers)
                ).status_code

        for name in STREAMS:  # each on a fresh connection: either worker, owner or not
            for _ in range(3):
                assert status(bot, name) == 204
            assert status(reader, name) == 403  # listed, without append
            assert status(stranger, name) == 401  # verified, not listed: no credentials
            assert status(None, name) == 401
            # Only a sibling worker, over its Unix socket, is believed about a certificate.
            forged = {
                "Durable-Kafka-Forwarded": "1",
                "Durable-Kafka-Certificate-Subject": "CN=ingest-bot",
            }
            assert status(None, name, **forged) == 401
        with pytest.raises(REFUSED_BY_TLS):
            status(outsider, STREAMS[0])
        with httpx.Client(verify=trusting(ca, reader)) as client:
            read = client.get(f"{url}/v1/stream/{STREAMS[0]}", params={"offset": "-1"})
            assert (read.status_code, read.text) == (200, "xxx")
    if workers > 1:  # some appends entered the worker not owning their slot (1 in 2^24 not)
        assert _forwarded_by_sibling(tmp_path / "adapter.log", "CN=ingest-bot") > 0


def _past_moves(send: Callable[[], httpx.Response], within_s: float = 30.0) -> httpx.Response:
    """Send again while the answer is 503 (a write slot changing owner: nothing was written),
    after its `Retry-After` (at most 1 s), as a client does; the owners' group of two workers
    can move a slot again after start-up on a loaded machine."""
    deadline = time.monotonic() + within_s
    response = send()
    while response.status_code == 503 and time.monotonic() < deadline:
        time.sleep(min(float(response.headers.get("Retry-After", "1")), 1.0))
        response = send()
    return response


def _forwarded_by_sibling(log: Path, principal: str) -> int:
    """Appends an owner served for `principal` that came over its Unix socket (no remote
    address) from the sibling worker they entered."""
    lines = [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]
    return sum(
        1
        for line in lines
        if line.get("principal") == principal and line.get("status") == 204 and not line["remote"]
    )


def test_required_client_certificates_refuse_a_connection_without_one(
    kafka_bootstrap: str, tmp_path: Path, ca: TestCA
) -> None:
    bot = ca.client("bot", "ingest-bot")
    env = _tls_env(kafka_bootstrap, tmp_path, ca.server("server")) | {
        "DURABLE_KAFKA_TLS_CLIENT_CA_FILE": str(ca.path),
        "DURABLE_KAFKA_TLS_CLIENT_AUTH": "required",
    }
    with running_adapter(env, tmp_path / "adapter.log", None, 1, trusting(ca, bot)) as url:
        with httpx.Client(verify=trusting(ca, bot)) as client:
            assert client.get(f"{url}/healthz").status_code == 200
        with pytest.raises(REFUSED_BY_TLS), httpx.Client(verify=trusting(ca)) as client:
            client.get(f"{url}/healthz")


def test_a_tls_pair_that_cannot_work_stops_the_start(tmp_path: Path, ca: TestCA) -> None:
    pair, other = ca.server("server"), ca.server("other")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    missing = tmp_path / "none.key"
    cases = [
        ("tls_key_file is required with tls_cert_file", pair.cert, None),
        ("tls_cert_file is required with tls_key_file", None, pair.key),
        (
            f"tls_key_file {other.key} is not the key of tls_cert_file {pair.cert}",
            pair.cert,
            other.key,
        ),
        (f"tls_cert_file {garbage}: not a PEM certificate", garbage, pair.key),
        (f"tls_key_file {missing}: cannot be read", pair.cert, missing),
    ]
    for message, cert, key in cases:
        assert message in _start_error(cert, key, "1")
    # `--workers`: the parent refuses before it starts any worker.
    assert cases[2][0] in _start_error(pair.cert, other.key, "2")


def _start_error(cert: Path | None, key: Path | None, workers: str) -> str:
    """`durable-kafka serve`'s configuration error (it must exit 2) with this TLS pair."""
    argv = [SCRIPT, "serve", "--listen", "127.0.0.1:0", "--workers", workers]
    argv += ["--tls-cert-file", str(cert)] if cert else []
    argv += ["--tls-key-file", str(key)] if key else []
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    prefix = "durable-kafka: configuration error: "
    assert done.stderr.startswith(prefix), done.stderr
    return done.stderr.removeprefix(prefix)


async def test_instances_forward_writes_to_each_other_over_https(
    kafka_bootstrap: str, tmp_path: Path, ca: TestCA
) -> None:
    """Two instances serving HTTPS: each advertises an `https://` URL, and a write entering
    the one that does not own its slot is forwarded there over TLS, the owner's certificate
    verified with the trust store (`SSL_CERT_FILE` naming the test CA, as an operator would
    add a private CA)."""
    env = _tls_env(kafka_bootstrap, tmp_path, ca.server("server"))
    env |= {
        "DURABLE_KAFKA_TOPIC_PREFIX": f"https2{uuid.uuid4().hex[:10]}.",
        "SSL_CERT_FILE": str(ca.path),
    }
    connector = aiohttp.TCPConnector(ssl=trusting(ca))
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        with (
            running_adapter(env, tmp_path / "a.log", free_port(), 1, trusting(ca)) as a,
            running_adapter(env, tmp_path / "b.log", free_port(), 1, trusting(ca)) as b,
        ):
            owners = await until_owned(http, {a: None, b: None})
            prefix = env["DURABLE_KAFKA_TOPIC_PREFIX"]
            for owner, entry in ((a, b), (b, a)):
                stream = stream_in(prefix, owners[owner], f"via-{_port(entry)}-")
                url = f"{entry}/v1/stream/{stream}"
                async with http.put(url, headers=TEXT) as reply:
                    assert reply.status == 201, await reply.text()
                async with http.post(url, data="forwarded", headers=TEXT) as reply:
                    assert reply.status == 204, await reply.text()
                async with http.get(
                    f"{owner}/v1/stream/{stream}", params={"offset": "-1"}
                ) as reply:
                    assert (reply.status, await reply.text()) == (200, "forwarded")
        assert b"https://127.0.0.1" in (tmp_path / "a.log").read_bytes()


def _port(base: str) -> int:
    return int(base.rpartition(":")[2])


def test_a_connection_that_never_finishes_its_handshake_is_closed(
    kafka_bootstrap: str, tmp_path: Path, ca: TestCA
) -> None:
    """A TLS handshake gets the head's deadline (`header_timeout_ms`), not asyncio's 60 s: a
    connection opened and left silent is closed by the server (the read below would time out
    at 30 s had it been left the default)."""
    env = _tls_env(kafka_bootstrap, tmp_path, ca.server("server"))
    env["DURABLE_KAFKA_HEADER_TIMEOUT_MS"] = "1000"
    port = free_port()
    with running_adapter(env, tmp_path / "adapter.log", port, 1, trusting(ca)):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as silent:
            assert _closed_by_server(silent)
        assert presented_serial(port, trusting(ca)) > 0  # a real handshake still succeeds


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the peer closed `sock` (an end of stream, or a reset) before its timeout."""
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_handshakes_under_way_count_against_max_connections(
    kafka_bootstrap: str, tmp_path: Path, ca: TestCA
) -> None:
    """Connections whose handshake never ends hold descriptors as admitted ones do: with
    `max_connections` of them under way, the next is closed at once, not at its handshake's
    deadline (30 s here, past the read's own 10 s)."""
    env = _tls_env(kafka_bootstrap, tmp_path, ca.server("server"))
    env |= {"DURABLE_KAFKA_HEADER_TIMEOUT_MS": "30000", "DURABLE_KAFKA_MAX_CONNECTIONS": "4"}
    port = free_port()
    with running_adapter(env, tmp_path / "adapter.log", port, 1, trusting(ca)):
        with contextlib.ExitStack() as held:
            for _ in range(4):
                held.enter_context(socket.create_connection(("127.0.0.1", port), timeout=10))
            with socket.create_connection(("127.0.0.1", port), timeout=10) as over:
                assert _closed_by_server(over)
        assert _handshaken(port, trusting(ca))  # once they are gone, served again


def _handshaken(port: int, context: ssl.SSLContext) -> bool:
    """Whether a handshake succeeds (a closed connection's place comes back when the server
    sees it closed, a moment after the client closed it)."""
    for _ in range(100):
        with contextlib.suppress(ConnectionResetError):
            return presented_serial(port, context) > 0
        time.sleep(0.1)
    return False
