"""A 2xx means the exact bytes sent were stored: inputs that would store anything else are
refused whole, with nothing written."""

from __future__ import annotations

import gzip

import pytest
from aiohttp import ClientResponse

from tests.conftest import Client

TEXT = {"Content-Type": "text/plain"}
# 2 KiB on the wire, 2 MiB once decoded: what aiohttp used to store.
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


async def test_a_gzip_append_is_415_and_the_stream_unchanged(client: Client, unique: str) -> None:
    path = await _bucket(client, f"gz-{unique}") + "/notes"
    assert (await client.put(path, data=b"plain", headers=TEXT)).status == 201
    coded = {**TEXT, "Content-Encoding": "gzip"}
    response = await client.post(path, data=BOMB, headers=coded)
    assert response.status == 415
    assert await _error_code(response) == "unsupported_media_type"
    assert await _read(client, path) == b"plain"


async def test_a_truncated_gzip_append_is_415(client: Client, unique: str) -> None:
    path = await _bucket(client, f"gz-{unique}") + "/notes"
    assert (await client.put(path, headers=TEXT)).status == 201
    truncated = gzip.compress(b"x" * 10_000)[:-12]
    response = await client.post(path, data=truncated, headers={**TEXT, "Content-Encoding": "gzip"})
    assert response.status == 415
    assert await _error_code(response) == "unsupported_media_type"
    assert await _read(client, path) == b""


@pytest.mark.parametrize("coding", ["gzip", "deflate", "br", "zstd", "identity, gzip"])
async def test_a_coded_create_is_415_and_nothing_created(
    client: Client, unique: str, coding: str
) -> None:
    path = await _bucket(client, f"gz-{unique}") + "/created"
    response = await client.put(path, data=BOMB, headers={**TEXT, "Content-Encoding": coding})
    assert response.status == 415
    assert await _error_code(response) == "unsupported_media_type"
    assert (await client.head(path)).status == 404


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
