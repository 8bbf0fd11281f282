"""A catch-up read, and the lookup of a moment (`?at=`, a trim by time), scan a bounded
amount of the partition, whoever's records it holds and however small they are."""

from __future__ import annotations

import asyncio
import json
import time

from adapter.app import create_app
from adapter.log.reader import RECORD_COST
from adapter.protocol.offsets import parse_offset
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready

SCAN_BYTES = 64 * 1024
BUSY_BODY = b"x" * (16 * 1024)
TEXT = {"Content-Type": "text/plain"}


async def _append(client: Client, path: str, body: bytes) -> None:
    response = await client.post(path, data=body, headers=TEXT)
    assert response.status == 204, await response.text()


async def test_reads_step_past_other_streams_in_bounded_scans(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    settings = make_settings(
        partitions=1,
        read_scan_bytes=SCAN_BYTES,
        read_chunk_bytes=4096,
        hot_cache_bytes=0,  # every read goes to Kafka: the bound under test is the scan's
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"scan-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    for name in ["quiet", *(f"busy{i}" for i in range(8))]:
        assert (await client.put(f"/{bucket}/{name}", headers=TEXT)).status == 201
    await _append(client, f"/{bucket}/quiet", b"q1")
    for _ in range(8):
        for i in range(8):
            await _append(client, f"/{bucket}/busy{i}", BUSY_BODY)  # 1 MiB in all
    await _append(client, f"/{bucket}/quiet", b"q2")

    offset, body, steps = "-1", b"", []
    while True:
        response = await client.get(f"/{bucket}/quiet", params={"offset": offset})
        assert response.status == 200
        body += await response.read()
        next_offset = response.headers["Stream-Next-Offset"]
        steps.append((offset, next_offset))
        if response.headers.get("Stream-Up-To-Date") == "true":
            break
        assert next_offset > offset
        offset = next_offset

    assert body == b"q1q2"
    # 1 MiB of other streams' records, at most 64 KiB scanned per request.
    assert len(steps) >= 1024 * 1024 // SCAN_BYTES - 1
    for start, end in steps[1:-1]:
        advanced = _kafka(end) - _kafka(start)
        # Four 16 KiB records fill a scan; each sits beside its transaction marker.
        assert 0 < advanced <= 2 * (SCAN_BYTES // len(BUSY_BODY)) + 2


def _kafka(token: str) -> int:
    position = parse_offset(token)
    assert isinstance(position, int)
    return position


async def _bounded_client(aiohttp_client: ClientFactory, make_settings: SettingsFactory) -> Client:
    settings = make_settings(
        partitions=1,  # every stream of a bucket shares one partition
        read_scan_bytes=SCAN_BYTES,
        read_chunk_bytes=4096,
        hot_cache_bytes=0,  # every read and lookup goes to Kafka: the bound under test
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    return client


async def _walk(client: Client, path: str, offset: str) -> tuple[bytes, list[tuple[str, str]]]:
    """Everything a reader following `Stream-Next-Offset` from `offset` gets, and its steps."""
    body, steps = b"", []
    while True:
        response = await client.get(path, params={"offset": offset})
        assert response.status == 200, await response.text()
        body += await response.read()
        steps.append((offset, response.headers["Stream-Next-Offset"]))
        if response.headers.get("Stream-Up-To-Date") == "true":
            return body, steps
        offset = response.headers["Stream-Next-Offset"]


async def test_a_scan_counts_each_records_cost_not_only_its_value(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """Thousands of one-byte JSON messages of another stream fill a scan by their count."""
    client = await _bounded_client(aiohttp_client, make_settings)
    bucket = f"tiny-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    assert (await client.put(f"/{bucket}/quiet", headers=TEXT)).status == 201
    json_type = {"Content-Type": "application/json"}
    assert (await client.put(f"/{bucket}/busy", headers=json_type)).status == 201
    await _append(client, f"/{bucket}/quiet", b"q1")
    tiny = json.dumps([0] * 2000).encode()  # 2,000 records of one byte
    busy = await client.post(f"/{bucket}/busy", data=tiny, headers=json_type)
    assert busy.status == 204, await busy.text()
    await _append(client, f"/{bucket}/quiet", b"q2")

    body, steps = await _walk(client, f"/{bucket}/quiet", "-1")

    assert body == b"q1q2"
    most = SCAN_BYTES // RECORD_COST + 2  # the record that passes the bound, and a marker
    for start, end in steps[1:-1]:
        assert 0 < _kafka(end) - _kafka(start) <= most
    assert len(steps) >= 2000 // most


async def test_a_lookup_by_time_scans_no_more_than_a_read(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """Other streams' records written after the moment fill the lookup's scan before the
    stream's next message: it answers where it stopped (none of the stream's messages lies
    before), and reads, HEAD and a trim by time go on from there to the same messages."""
    client = await _bounded_client(aiohttp_client, make_settings)
    bucket = f"atscan-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    for name in ("quiet", "busy"):
        assert (await client.put(f"/{bucket}/{name}", headers=TEXT)).status == 201
    quiet = f"/{bucket}/quiet"
    await _append(client, quiet, b"q1")
    await asyncio.sleep(0.02)
    moment = str(int(time.time() * 1000))
    await asyncio.sleep(0.02)
    for _ in range(64):
        await _append(client, f"/{bucket}/busy", BUSY_BODY)  # 1 MiB after the moment
    q2 = await client.post(quiet, data=b"q2", headers=TEXT)
    assert q2.status == 204
    q2_offset = _kafka(q2.headers["Stream-Next-Offset"]) - 1

    head = await client.head(quiet, params={"at": moment})
    assert head.status == 200
    found = head.headers["Stream-Next-Offset"]
    # Four 16 KiB records fill a scan; each sits beside its transaction marker.
    assert _kafka(found) < q2_offset
    assert _kafka(found) - (q2_offset - 2 * 64) <= 2 * (SCAN_BYTES // len(BUSY_BODY)) + 2
    body, _steps = await _walk(client, quiet, found)
    assert body == b"q2"
    by_time = await client.get(quiet, params={"at": moment})
    assert by_time.status == 200
    assert by_time.headers["Stream-Next-Offset"] >= found

    trim = await client.post(f"{quiet}/trim", json={"at": int(moment)})
    assert trim.status == 204, await trim.text()
    assert trim.headers["Stream-Earliest-Offset"] == found  # q1 trimmed, q2 kept
    assert (await client.get(quiet, params={"offset": "-1"})).status == 410
    body, _steps = await _walk(client, quiet, found)
    assert body == b"q2"
