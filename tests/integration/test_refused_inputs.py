"""A 2xx means the bytes meant were stored: inputs that would store anything else are
refused whole, with nothing written (coded bodies: `test_compression.py`)."""

from __future__ import annotations

import gzip

import pytest
from aiohttp import ClientResponse

from tests.conftest import Client

TEXT = {"Content-Type": "text/plain"}
# Gzip bytes sent as `identity`: stored as they are, never decoded.
BOMB = gzip.compress(b"a" * 2**21)


async def _error_code(response: ClientResponse) -> str:
    body = await response.json()
    code = body["error"]["code"]
    assert isinstance(code, str)
    return code


async def _bucket(client: Client, name: str) -> str:
    assert (await client.put(f"/{name}")).status == 201
    return f"/{name}"


async def _read(client: Client, path: str) -> bytes:
    response = await client.get(path, params={"offset": "-1"})
    assert response.status == 200
    return await response.read()


async def test_identity_is_taken_as_sent(client: Client, unique: str) -> None:
    path = await _bucket(client, f"gz-{unique}") + "/notes"
    plain = {**TEXT, "Content-Encoding": "identity"}
    assert (await client.put(path, data=b"one", headers=plain)).status == 201
    assert (await client.post(path, data=BOMB, headers=plain)).status == 204
    assert await _read(client, path) == b"one" + BOMB


@pytest.mark.parametrize("expires_at", ["9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59"])
async def test_an_unrepresentable_expiry_is_400_and_nothing_created(
    client: Client, unique: str, expires_at: str
) -> None:
    path = await _bucket(client, f"exp-{unique}") + "/notes"
    response = await client.put(path, headers={**TEXT, "Stream-Expires-At": expires_at})
    assert response.status == 400
    assert await _error_code(response) == "invalid_header"
    assert (await client.head(path)).status == 404


async def test_the_last_representable_expiry_round_trips(client: Client, unique: str) -> None:
    path = await _bucket(client, f"exp-{unique}") + "/notes"
    last = {**TEXT, "Stream-Expires-At": "9999-12-31T00:00:59.999-23:59"}
    assert (await client.put(path, headers=last)).status == 201
    response = await client.head(path)
    assert response.status == 200
    assert response.headers["Stream-Expires-At"] == "9999-12-31T23:59:59.999Z"
    assert (await client.put(path, headers=last)).status == 200
