"""A catch-up read scans a bounded amount of the partition, whoever's records it holds."""

from __future__ import annotations

from adapter.app import create_app
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
