"""Bytes on the wire: coded request bodies are stored decoded, within the body limit, and reads
are coded as the client accepts; SSE never is."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
from pathlib import Path

import aiohttp
import pytest
from backports import zstd

from adapter.app import create_app
from devstack.process import free_port
from tests.adapter_process import running_adapter
from tests.cluster import cluster_env, partitions, stream_in, until_owned
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.kafka_reads import committed_messages
from topology.naming import bucket_topic
from topology.placement import partition_for
from topology.wire import CONTROL_HEADER, header_value

pytestmark = pytest.mark.integration

TEXT = {"Content-Type": "text/plain"}
BODY = b"the same line, over and over; " * 400  # 12 KB that code well


def _coded(coding: str, data: bytes) -> bytes:
    return gzip.compress(data) if coding == "gzip" else zstd.compress(data)


def _decoded(coding: str, data: bytes) -> bytes:
    return gzip.decompress(data) if coding == "gzip" else zstd.decompress(data)


def _values(bootstrap: str, topic: str, stream: str, partitions: int) -> list[bytes]:
    """The stream's data record values, as a fresh read_committed consumer sees them."""
    partition = partition_for(stream.encode(), partitions)
    return [
        message.value() or b""
        for message in committed_messages(bootstrap, topic, partition)
        if message.key() == stream.encode() and not header_value(message.headers(), CONTROL_HEADER)
    ]


async def _stream(client: Client, bucket: str, stream: str) -> str:
    assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/{stream}"
    assert (await client.put(path, headers=TEXT)).status == 201
    return path


@pytest.mark.parametrize("coding", ["gzip", "zstd", "x-gzip"])
async def test_a_coded_append_and_create_are_stored_decoded(
    client: Client, unique: str, kafka_bootstrap: str, coding: str
) -> None:
    bucket = f"cz-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/notes"
    codec = "gzip" if coding == "x-gzip" else coding
    coded = {**TEXT, "Content-Encoding": coding}
    assert (await client.put(path, data=_coded(codec, b"first "), headers=coded)).status == 201
    assert (await client.post(path, data=_coded(codec, BODY), headers=coded)).status == 204
    topic = bucket_topic(f"t{unique}.", bucket)
    partitions = (await (await client.get(f"/{bucket}")).json())["partitions"]
    values = await asyncio.to_thread(_values, kafka_bootstrap, topic, "notes", partitions)
    assert values == [b"first ", BODY]
    read = await client.get(path, params={"offset": "-1"})
    assert await read.read() == b"first " + BODY


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
async def test_a_bomb_is_413_without_being_decoded_whole(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, coding: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(max_message_bytes=1 << 20)))
    await wait_ready(client)
    path = await _stream(client, f"bomb-{unique}", "notes")
    bomb = _coded(coding, b"\0" * (256 << 20))  # a few hundred KB that decode to 256 MiB
    tracemalloc.start()
    try:
        response = await client.post(path, data=bomb, headers={**TEXT, "Content-Encoding": coding})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status == 413
    assert (await response.json())["error"]["code"] == "payload_too_large"
    assert peak < 16 << 20  # decoding stopped near the 1 MiB limit, far below 256 MiB
    assert await (await client.get(path, params={"offset": "-1"})).read() == b""


@pytest.mark.parametrize("coding", ["br", "deflate", "gzip, zstd"])
async def test_an_unknown_or_stacked_coding_is_415_and_nothing_created(
    client: Client, unique: str, coding: str
) -> None:
    assert (await client.put(f"/cx-{unique}")).status == 201
    path = f"/cx-{unique}/notes"
    response = await client.put(path, data=BODY, headers={**TEXT, "Content-Encoding": coding})
    assert response.status == 415
    assert (await response.json())["error"]["code"] == "unsupported_media_type"
    assert (await client.head(path)).status == 404


async def test_a_truncated_coded_body_is_400_and_nothing_written(
    client: Client, unique: str
) -> None:
    path = await _stream(client, f"ct-{unique}", "notes")
    truncated = gzip.compress(BODY)[:-12]
    response = await client.post(path, data=truncated, headers={**TEXT, "Content-Encoding": "gzip"})
    assert response.status == 400
    assert await (await client.get(path, params={"offset": "-1"})).read() == b""


@pytest.mark.parametrize("coding", ["gzip", "zstd"])
async def test_a_catch_up_read_is_coded_as_accepted(
    client: Client, unique: str, coding: str
) -> None:
    path = await _stream(client, f"cr-{unique}", "notes")
    assert (await client.post(path, data=BODY, headers=TEXT)).status == 204
    wanted = {"Accept-Encoding": f"br, {coding}"}
    read = await client.get(path, params={"offset": "-1"}, headers=wanted, auto_decompress=False)
    assert read.status == 200
    assert read.headers["Content-Encoding"] == coding
    assert "Accept-Encoding" in read.headers["Vary"]
    coded = await read.read()
    assert len(coded) < len(BODY) // 10
    assert _decoded(coding, coded) == BODY
    etag = read.headers["ETag"]
    assert etag.startswith('W/"')
    again = await client.get(
        path, params={"offset": "-1"}, headers={**wanted, "If-None-Match": etag}
    )
    assert again.status == 304


async def test_a_read_without_accept_encoding_is_sent_as_stored(
    client: Client, unique: str
) -> None:
    path = await _stream(client, f"cp-{unique}", "notes")
    assert (await client.post(path, data=BODY, headers=TEXT)).status == 204
    read = await client.get(
        path,
        params={"offset": "-1"},
        headers={"Accept-Encoding": "identity"},
        auto_decompress=False,
    )
    assert "Content-Encoding" not in read.headers
    assert "Accept-Encoding" in read.headers["Vary"]
    assert await read.read() == BODY
    assert not read.headers["ETag"].startswith("W/")


async def test_sse_is_never_coded(client: Client, unique: str) -> None:
    path = await _stream(client, f"cs-{unique}", "notes")
    assert (
        await client.post(path, data=BODY, headers={**TEXT, "Stream-Closed": "true"})
    ).status == 204
    read = await client.get(
        path,
        params={"offset": "-1", "live": "sse"},
        headers={"Accept-Encoding": "gzip, zstd"},
        auto_decompress=False,
    )
    assert read.headers["Content-Type"] == "text/event-stream"
    assert "Content-Encoding" not in read.headers
    body = (await asyncio.wait_for(read.read(), 20)).decode()  # ends: the stream is closed
    assert BODY.decode() in body


@pytest.mark.timeout(180)
async def test_a_coded_append_forwarded_to_the_owner_is_stored_decoded(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"cf{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path)
    coded = {**TEXT, "Content-Encoding": "zstd"}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        with (
            running_adapter(env, tmp_path / "a.log", free_port()) as a,
            running_adapter(env, tmp_path / "b.log", free_port()) as b,
        ):
            owners = await until_owned(session, {a: None, b: None})
            stream = stream_in(prefix, owners[a], "c")
            url = f"{b}/v1/stream/{stream}"  # b forwards to a
            async with session.put(url, data=_coded("zstd", b"one "), headers=coded) as reply:
                assert reply.status == 201, await reply.text()
            async with session.post(
                url, data=_coded("gzip", BODY), headers=TEXT | {"Content-Encoding": "gzip"}
            ) as reply:
                assert reply.status == 204, await reply.text()
            for base in (a, b):
                got = await session.get(
                    f"{base}/v1/stream/{stream}",
                    params={"offset": "-1"},
                    headers={"Accept-Encoding": "gzip"},
                    auto_decompress=False,
                )
                assert got.headers["Content-Encoding"] == "gzip"
                assert gzip.decompress(await got.read()) == b"one " + BODY
    topic = bucket_topic(prefix, "_default")
    values = await asyncio.to_thread(_values, kafka_bootstrap, topic, stream, partitions(prefix))
    assert values == [b"one ", BODY]


async def test_bootstrap_is_coded_gzip_when_accepted(client: Client, unique: str) -> None:
    path = await _stream(client, f"cb-{unique}", "notes")
    assert (await client.post(path, data=BODY, headers=TEXT)).status == 204
    coded = await client.get(
        f"{path}/bootstrap", headers={"Accept-Encoding": "gzip"}, auto_decompress=False
    )
    assert coded.status == 200
    assert coded.headers["Content-Encoding"] == "gzip"
    assert "Accept-Encoding" in coded.headers["Vary"]
    raw = await coded.read()
    boundary = coded.headers["Content-Type"].partition("boundary=")[2]
    decoded = gzip.decompress(raw)
    assert len(raw) < len(decoded) // 10
    assert BODY in decoded
    assert decoded.rstrip().endswith(f"--{boundary}--".encode())
    plain = await client.get(
        f"{path}/bootstrap", headers={"Accept-Encoding": "zstd"}, auto_decompress=False
    )
    assert "Content-Encoding" not in plain.headers  # a stream is coded gzip or not at all
    assert BODY in await plain.read()
