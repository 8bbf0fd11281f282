"""`/bootstrap` on a real broker: the multipart body read back by Python's `email` parser,
publish → 410 → bootstrap rebuilding the same state, and its refusals."""

from __future__ import annotations

import email
import io
import json
from email.message import Message

from aiohttp import ClientResponse

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.services import S3Server

TEXT = {"Content-Type": "text/plain"}
JSON = {"Content-Type": "application/json"}


async def _parts(response: ClientResponse) -> list[tuple[str, bytes]]:
    assert response.status == 200
    head = f"Content-Type: {response.headers['Content-Type']}\r\n\r\n".encode()
    message = email.message_from_bytes(head + await response.read())
    assert message.is_multipart()
    parts: list[Message] = list(message.get_payload())  # type: ignore[arg-type]
    return [(p.get_content_type(), p.get_payload(decode=True) or b"") for p in parts]  # type: ignore[misc]


async def _stream(
    client: Client, unique: str, headers: dict[str, str], *bodies: bytes
) -> tuple[str, list[str]]:
    bucket = f"/bs-{unique}"
    assert (await client.put(bucket)).status in (201, 409)
    path = f"{bucket}/doc-{headers['Content-Type'].split('/')[1]}"
    created = await client.put(path, headers=headers)
    assert created.status == 201
    tails = [created.headers["Stream-Next-Offset"]]
    for body in bodies:
        response = await client.post(path, data=body, headers=headers)
        assert response.status == 204
        tails.append(response.headers["Stream-Next-Offset"])
    return path, tails


async def test_without_a_snapshot_an_empty_first_part_then_every_message(
    client: Client, unique: str
) -> None:
    path, tails = await _stream(client, unique, TEXT, b"a", b"b\r\nc", bytes(range(256)))
    response = await client.get(f"{path}/bootstrap")
    assert response.headers["Stream-Snapshot-Offset"] == "-1"
    assert response.headers["Stream-Next-Offset"] == tails[-1]
    assert response.headers["Stream-Up-To-Date"] == "true"
    assert response.headers["Cache-Control"] == "no-store"
    assert response.headers["Content-Type"].startswith("multipart/mixed; boundary=")
    assert await _parts(response) == [
        ("application/octet-stream", b""),
        ("text/plain", b"a"),
        ("text/plain", b"b\r\nc"),
        ("text/plain", bytes(range(256))),
    ]


async def test_json_messages_are_one_part_each(client: Client, unique: str) -> None:
    path, _ = await _stream(client, unique, JSON, b'[{"op":1},{"op":2}]', b'{"op":3}')
    parts = await _parts(await client.get(f"{path}/bootstrap"))
    assert [json.loads(body) for _, body in parts[1:]] == [{"op": 1}, {"op": 2}, {"op": 3}]
    assert {content_type for content_type, _ in parts[1:]} == {"application/json"}


async def test_publish_then_410_then_bootstrap_rebuilds_the_same_state(
    client: Client, unique: str
) -> None:
    path, tails = await _stream(client, unique, TEXT, b"a", b"b", b"c", b"d")
    everything = await (await client.get(path, params={"offset": "-1"})).read()
    folded = b"ab"  # the application's fold of the messages before tails[2]
    headers = {"Content-Type": "application/x-fold"}
    published = await client.put(f"{path}/snapshot/{tails[2]}", data=folded, headers=headers)
    assert published.status == 204
    gone = await client.get(path, params={"offset": "-1"})
    assert gone.status == 410
    response = await client.get(f"{path}/bootstrap")
    assert response.headers["Stream-Snapshot-Offset"] == tails[2]
    next_offset = response.headers["Stream-Next-Offset"]
    parts = await _parts(response)
    assert parts == [("application/x-fold", b"ab"), ("text/plain", b"c"), ("text/plain", b"d")]
    assert b"".join(body for _, body in parts) == everything
    # ...and the client tails on from where bootstrap left it.
    assert (await client.post(path, data=b"e", headers=TEXT)).status == 204
    more = await client.get(path, params={"offset": next_offset})
    assert await more.read() == b"e"


async def test_many_reads_and_a_large_blob_are_streamed(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(read_chunk_bytes=64)))
    await wait_ready(client)
    bodies = [f"message {i:03d}".encode() * 3 for i in range(60)]
    path, tails = await _stream(client, unique, TEXT, *bodies)
    blob = bytes(range(256)) * (3 * 4096 + 17)  # past several 1 MiB ranges
    headers = {"Content-Type": "application/octet-stream"}
    published = await client.put(
        f"{path}/snapshot/{tails[20]}", data=io.BytesIO(blob), headers=headers
    )
    assert published.status == 204
    parts = await _parts(await client.get(f"{path}/bootstrap"))
    assert parts[0] == ("application/octet-stream", blob)
    assert [body for _, body in parts[1:]] == bodies[20:]


async def test_bootstrap_from_s3(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    settings = make_settings(
        cold_backend="s3",
        s3_bucket=f"boot-{unique}",
        s3_endpoint_url=s3.endpoint_url,
        s3_access_key_id=s3.access_key_id,
        s3_secret_access_key=s3.secret_access_key,
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    path, tails = await _stream(client, unique, TEXT, b"a", b"b")
    blob = b"x" * (2 * 1024 * 1024 + 5)
    published = await client.put(f"{path}/snapshot/{tails[1]}", data=io.BytesIO(blob))
    assert published.status == 204
    whole = await client.get(f"{path}/snapshot/{tails[1]}")
    assert (whole.status, await whole.read()) == (200, blob)
    parts = await _parts(await client.get(f"{path}/bootstrap"))
    assert parts == [("application/octet-stream", blob), ("text/plain", b"b")]


async def test_refusals(client: Client, unique: str) -> None:
    path, _ = await _stream(client, unique, TEXT, b"a")
    live = await client.get(f"{path}/bootstrap", params={"live": "sse"})
    assert live.status == 400
    assert (await live.json())["error"]["code"] == "invalid_query"
    missing = await client.get(path.replace("/doc-plain", "/nope") + "/bootstrap")
    assert missing.status == 404
