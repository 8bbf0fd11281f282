"""Auth on a real broker: every route against every kind of credential, in both auth modes.

The matrix is {no token, expired, wrong issuer, wrong audience, alg=none, read-only,
append-only, admin, other bucket, prefix} x every route (long-poll and SSE included), and
the expected status of each cell comes from two tables written out here: the operation class
of each route, and what it answers once let in.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from adapter.app import SETTINGS, create_app
from adapter.auth.scopes import Operation
from adapter.http.observe import METRICS
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import Signer, jwt_settings, token_file, unsigned

pytestmark = pytest.mark.integration

BUCKET = "bkt-main"
STREAM = f"/{BUCKET}/s"
R, A, D = Operation.READ, Operation.APPEND, Operation.ADMIN

# (name, method, path, headers, body, operation, status once let in)
ROUTES: list[tuple[str, str, str, dict[str, str], bytes, Operation, int]] = [
    ("create bucket", "PUT", f"/{BUCKET}", {}, b"", D, 409),
    ("describe bucket", "GET", f"/{BUCKET}", {}, b"", R, 200),
    ("delete bucket", "DELETE", f"/{BUCKET}", {}, b"", D, 409),
    ("list streams", "GET", f"/{BUCKET}/streams", {}, b"", R, 200),
    ("create stream", "PUT", STREAM, {"Content-Type": "text/plain"}, b"", D, 200),
    ("append", "POST", STREAM, {"Content-Type": "text/plain"}, b"x", A, 204),
    ("close", "POST", f"/{BUCKET}/closed", {"Stream-Closed": "true"}, b"", A, 204),
    ("read", "GET", f"{STREAM}?offset=-1", {}, b"", R, 200),
    ("long-poll", "GET", f"{STREAM}?offset=now&live=long-poll", {}, b"", R, 204),
    ("sse", "GET", f"{STREAM}?offset=-1&live=sse", {}, b"", R, 200),
    ("head", "HEAD", STREAM, {}, b"", R, 200),
    ("delete stream", "DELETE", f"/{BUCKET}/absent", {}, b"", D, 404),
    ("latest snapshot", "GET", f"{STREAM}/snapshot", {}, b"", R, 404),
    ("publish snapshot", "PUT", f"{STREAM}/snapshot/zz", {}, b"s", D, 400),
    ("read snapshot", "GET", f"{STREAM}/snapshot/zz", {}, b"", R, 400),
    ("delete snapshot", "DELETE", f"{STREAM}/snapshot/zz", {}, b"", D, 400),
    ("bootstrap", "GET", f"{STREAM}/bootstrap", {}, b"", R, 200),
    ("v1 create", "PUT", f"/v1/stream{STREAM}", {"Content-Type": "text/plain"}, b"", D, 200),
    ("v1 append", "POST", f"/v1/stream{STREAM}", {"Content-Type": "text/plain"}, b"y", A, 204),
    ("v1 read", "GET", f"/v1/stream{STREAM}?offset=-1", {}, b"", R, 200),
    ("v1 long-poll", "GET", f"/v1/stream{STREAM}?offset=now&live=long-poll", {}, b"", R, 204),
    ("v1 sse", "GET", f"/v1/stream{STREAM}?offset=-1&live=sse", {}, b"", R, 200),
    ("v1 head", "HEAD", f"/v1/stream{STREAM}", {}, b"", R, 200),
    ("v1 delete", "DELETE", f"/v1/stream/{BUCKET}/absent", {}, b"", D, 404),
]

EVERYTHING = [f"{op}:{BUCKET}" for op in ("read", "append", "admin")]
# JWT credentials: name -> (scopes, extra claims, lifetime), or None for "no token".
SIGNED: dict[str, tuple[list[str], dict[str, Any], float]] = {
    "expired": (EVERYTHING, {}, -120),
    "wrong issuer": (EVERYTHING, {"iss": "https://evil.test"}, 300),
    "wrong audience": (EVERYTHING, {"aud": "another-service"}, 300),
    "read-only": ([f"read:{BUCKET}"], {}, 300),
    "append-only": ([f"append:{BUCKET}"], {}, 300),
    "admin": ([f"admin:{BUCKET}"], {}, 300),
    "other bucket": (["read:oth-main", "append:oth-main", "admin:oth-*"], {}, 300),
    "prefix": (["read:bkt-*", "append:bkt-*", "admin:bkt-*"], {}, 300),
}
# What each credential may do on BUCKET; None: it is not a valid credential at all (401).
GRANTS: dict[str, set[Operation] | None] = {
    "no token": None,
    "expired": None,
    "wrong issuer": None,
    "wrong audience": None,
    "alg=none": None,
    "unknown token": None,
    "read-only": {R},
    "append-only": {A},
    "admin": {D},
    "other bucket": set(),
    "prefix": {R, A, D},
}


def expected(credential: str, operation: Operation, granted: int) -> int:
    grants = GRANTS[credential]
    if grants is None:
        return 401
    return granted if operation in grants else 403


async def status_of(client: Client, route: tuple[Any, ...], token: str | None) -> int:
    _, method, path, headers, body, _, _ = route
    auth = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with client.request(method, path, headers=headers | auth, data=body) as response:
        if response.status in (401, 403):
            await _assert_refusal(response.status, response.headers, await response.read())
            # RFC 6750 3.1: a request without credentials gets a challenge without error.
            invalid = 'error="invalid_token"' in response.headers["WWW-Authenticate"]
            assert invalid is (response.status == 401 and token is not None)
        return response.status


async def _assert_refusal(status: int, headers: Any, body: bytes) -> None:
    challenge = headers["WWW-Authenticate"]
    assert challenge.startswith('Bearer realm="durable-kafka"')
    code = "insufficient_scope" if status == 403 else "unauthorized"
    if status == 403:
        assert 'error="insufficient_scope", scope="' in challenge
    if body:  # HEAD answers carry none
        assert json.loads(body)["error"]["code"] == code


async def seed(client: Client, token: str) -> None:
    """The bucket, a stream with data, and a stream that each `close` request closes again."""
    auth = {"Authorization": f"Bearer {token}"}
    assert (await client.put(f"/{BUCKET}", headers=auth)).status == 201
    text = auth | {"Content-Type": "text/plain"}
    assert (await client.put(STREAM, headers=text, data=b"hello")).status == 201
    assert (await client.put(f"/{BUCKET}/closed", headers=text)).status == 201


async def run_matrix(client: Client, tokens: dict[str, str | None]) -> None:
    wrong = []
    for credential, token in tokens.items():
        for route in ROUTES:
            want = expected(credential, route[5], route[6])
            got = await status_of(client, route, token)
            if got != want:
                wrong.append(f"{credential} x {route[0]}: {got}, expected {want}")
    assert wrong == [], "\n".join(wrong)


@pytest.fixture
async def jwt_client(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> tuple[Client, Signer]:
    signer = Signer()
    settings = make_settings(
        **jwt_settings(signer, tmp_path),
        auth_jwt_algorithms="ES256",
        auth_jwt_leeway_s=5,
        long_poll_timeout_ms=100,
        sse_max_duration_ms=1000,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    return client, signer


async def test_jwt_matrix(jwt_client: tuple[Client, Signer]) -> None:
    client, signer = jwt_client
    await seed(client, signer.token(["admin:*", "append:*"]))
    tokens: dict[str, str | None] = {"no token": None, "alg=none": unsigned(EVERYTHING)}
    for name, (scopes, claims, ttl_s) in SIGNED.items():
        tokens[name] = signer.token(scopes, ttl_s, claims)
    await run_matrix(client, tokens)
    registry = client.app[METRICS].registry

    def failures(reason: str) -> float | None:
        return registry.get_sample_value("durable_kafka_auth_failures_total", {"reason": reason})

    # Every route once per credential: no token and expired are refused on each, as such.
    assert failures("missing") == len(ROUTES)
    assert failures("expired") == len(ROUTES)
    # alg=none, wrong issuer, wrong audience: invalid on every route.
    assert failures("invalid") == 3 * len(ROUTES)
    assert failures("malformed") == 0
    refused = sum(expected(name, route[5], route[6]) == 403 for name in SIGNED for route in ROUTES)
    assert failures("insufficient_scope") == refused > 0


async def test_an_append_is_logged_with_its_principal_and_kafka_position(
    jwt_client: tuple[Client, Signer], caplog: pytest.LogCaptureFixture
) -> None:
    client, signer = jwt_client
    token = signer.token(["admin:*", "append:*"])
    await seed(client, token)
    caplog.set_level(logging.INFO, logger="durable_kafka.requests")
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "text/plain"}
    for body in (b"a", b"b"):
        assert (await client.post(STREAM, headers=auth, data=body)).status == 204
    appends = [r.__dict__ for r in caplog.records if getattr(r, "method", "") == "POST"]
    assert [line["principal"] for line in appends] == ["alice", "alice"]
    assert {line["kafka_topic"] for line in appends} == {f"{_prefix(client)}bucket.{BUCKET}"}
    assert len({line["kafka_partition"] for line in appends}) == 1  # the stream's partition
    first, second = (line["kafka_offset"] for line in appends)
    assert second > first >= 0  # the records' offsets in Kafka (markers come between)
    assert not [r for r in caplog.records if token in r.getMessage() + str(r.__dict__)]


def _prefix(client: Client) -> str:
    return client.app[SETTINGS].topic_prefix


async def test_static_matrix(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    secrets = {name: f"{name.replace(' ', '-')}-secret-token-0123456789" for name in GRANTS}
    entries = {
        name.replace(" ", "-"): (secrets[name], SIGNED[name][0])
        for name in ("read-only", "append-only", "admin", "other bucket", "prefix")
    }
    entries["seeder"] = ("seeder-secret-token-0123456789", ["admin:*"])
    path = token_file(tmp_path / "tokens.toml", entries)
    settings = make_settings(
        auth_mode="static",
        auth_token_file=str(path),
        long_poll_timeout_ms=100,
        sse_max_duration_ms=1000,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    await seed(client, "seeder-secret-token-0123456789")
    tokens: dict[str, str | None] = {"no token": None, "unknown token": "not-a-listed-token"}
    for name in ("read-only", "append-only", "admin", "other bucket", "prefix"):
        tokens[name] = secrets[name]
    await run_matrix(client, tokens)
