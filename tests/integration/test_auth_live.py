"""Auth beyond the matrix, on a real broker: producer ids per principal, token lifetime on
live reads, concealment, public buckets and `?access_token=`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.tokens import Signer, jwt_settings

pytestmark = pytest.mark.integration

BUCKET = "tenants"
STREAM = f"/{BUCKET}/shared"


@pytest.fixture
async def signer_client(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> tuple[Client, Signer]:
    signer = Signer()
    settings = make_settings(
        **jwt_settings(signer, tmp_path),
        auth_jwt_leeway_s=0,
        auth_public_read="pub-*",
        auth_conceal=True,
        auth_query_token=True,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    admin = bearer(signer.token([f"admin:{BUCKET}", "admin:pub-*", "append:pub-*"]))
    assert (await client.put(f"/{BUCKET}", headers=admin)).status == 201
    text = admin | {"Content-Type": "text/plain"}
    assert (await client.put(STREAM, headers=text, data=b"a")).status == 201
    return client, signer


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def producer(epoch: int, seq: int) -> dict[str, str]:
    return {
        "Producer-Id": "writer-1",
        "Producer-Epoch": str(epoch),
        "Producer-Seq": str(seq),
        "Content-Type": "text/plain",
    }


async def test_one_tenant_cannot_fence_anothers_producer(
    signer_client: tuple[Client, Signer],
) -> None:
    client, signer = signer_client
    scopes = [f"append:{BUCKET}"]
    alice = bearer(signer.token(scopes, claims={"sub": "alice"}))
    mallory = bearer(signer.token(scopes, claims={"sub": "mallory"}))
    assert (await client.post(STREAM, headers=alice | producer(3, 0), data=b"1")).status == 200
    # Same Producer-Id, a later epoch: were ids shared, alice's epoch 3 would now be stale.
    assert (await client.post(STREAM, headers=mallory | producer(9, 0), data=b"2")).status == 200
    assert (await client.post(STREAM, headers=alice | producer(3, 1), data=b"3")).status == 200
    # And mallory's seq 0 of epoch 3 is not taken for alice's duplicate.
    response = await client.post(STREAM, headers=mallory | producer(3, 0), data=b"4")
    assert response.status == 403  # stale against mallory's own epoch 9
    duplicate = await client.post(STREAM, headers=alice | producer(3, 1), data=b"3")
    assert duplicate.status == 204


async def test_sse_ends_at_the_tokens_expiry_with_a_closing_control_event(
    signer_client: tuple[Client, Signer],
) -> None:
    client, signer = signer_client
    token = signer.token([f"read:{BUCKET}"], ttl_s=2)
    async with client.get(f"{STREAM}?offset=-1&live=sse", headers=bearer(token)) as response:
        assert response.status == 200
        body = (await response.read()).decode()  # ends at exp, well before sse_max_duration
    events = [block for block in body.split("\n\n") if block.strip()]
    assert events[0].startswith("event: data")
    last = events[-1].splitlines()
    assert last[0] == "event: control"
    control: dict[str, Any] = json.loads(last[1].removeprefix("data:"))
    assert control["credentialExpired"] is True
    assert (
        control["streamNextOffset"]
        == (await client.head(STREAM, headers=bearer(signer.token([f"read:{BUCKET}"])))).headers[
            "Stream-Next-Offset"
        ]
    )


async def test_long_poll_answers_by_the_tokens_expiry(
    signer_client: tuple[Client, Signer],
) -> None:
    client, signer = signer_client
    token = signer.token([f"read:{BUCKET}"], ttl_s=2)
    # The configured long-poll timeout is 20 s; the token has 2 s left.
    response = await client.get(f"{STREAM}?offset=now&live=long-poll", headers=bearer(token))
    assert response.status == 204
    assert response.headers["Stream-Up-To-Date"] == "true"


async def test_conceal_answers_404_to_callers_who_may_not_read(
    signer_client: tuple[Client, Signer],
) -> None:
    client, signer = signer_client
    stranger = bearer(signer.token(["read:elsewhere"]))
    for method in ("GET", "POST", "DELETE"):
        response = await client.request(method, STREAM, headers=stranger)
        assert response.status == 404
        assert (await response.json())["error"]["code"] == "not_found"
    reader = bearer(signer.token([f"read:{BUCKET}"]))
    assert (await client.post(STREAM, headers=reader, data=b"x")).status == 403


async def test_public_buckets_are_read_without_a_token(
    signer_client: tuple[Client, Signer],
) -> None:
    client, signer = signer_client
    admin = bearer(signer.token(["admin:pub-*", "append:pub-*"]))
    assert (await client.put("/pub-news", headers=admin)).status == 201
    text = {"Content-Type": "text/plain"}
    assert (await client.put("/pub-news/s", headers=admin | text, data=b"hi")).status == 201
    read = await client.get("/pub-news/s?offset=-1")
    assert (read.status, await read.read()) == (200, b"hi")
    assert (await client.post("/pub-news/s", headers=text, data=b"x")).status == 401
    assert (await client.get("/pub-news/s?offset=-1", headers=bearer("junk"))).status == 401


async def test_query_tokens_when_enabled(
    signer_client: tuple[Client, Signer],
) -> None:
    client, signer = signer_client
    token = signer.token([f"read:{BUCKET}"])
    response = await client.get(f"{STREAM}?offset=-1&access_token={token}")
    assert response.status == 200
    both = await client.get(f"{STREAM}?offset=-1&access_token={token}", headers=bearer(token))
    assert both.status == 400


async def test_query_tokens_are_ignored_unless_enabled(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path
) -> None:
    signer = Signer()
    settings = make_settings(**jwt_settings(signer, tmp_path))
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    token = signer.token(["read:*"])
    assert (await client.get(f"/some-bucket?access_token={token}")).status == 401
    assert (await client.get("/some-bucket", headers=bearer(token))).status == 404
