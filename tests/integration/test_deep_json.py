"""Every route that reads a JSON body answers 400 `invalid_json` to JSON nested past what
a parser can follow (100,000 arrays deep; a control route's, within its 64 KiB limit, 30,000),
as to any other malformed JSON, and stores nothing of it."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aiohttp import ClientResponse
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.config import Settings
from tests.conftest import Client, SettingsFactory

JSON = {"Content-Type": "application/json"}
DEPTH = 100_000
DEEP = b"[" * DEPTH + b"]" * DEPTH
DEEP_OBJECT = b'{"a":' * DEPTH + b"1" + b"}" * DEPTH
# As deep as a control body (a bucket's configuration, a trim) may be within its limit.
CONTROL_DEEP = b"[" * 30_000 + b"]" * 30_000
CONTROL_DEEP_OBJECT = b'{"a":' * 10_000 + b"1" + b"}" * 10_000


@pytest.fixture
def make_settings(make_settings: SettingsFactory, unique: str) -> SettingsFactory:
    """The suite's settings, with this test's topics allowed to be mounted over HTTP."""

    def make(**overrides: Any) -> Settings:
        return make_settings(**{"mount_topics": f"*-{unique}"} | overrides)

    return make


async def _refused(response: ClientResponse) -> None:
    assert response.status == 400, await response.text()
    assert (await response.json())["error"]["code"] == "invalid_json"


async def _json_stream(client: Client, path: str) -> None:
    assert (await client.put(path, headers=JSON)).status == 201


@pytest.mark.parametrize(
    ("body", "control"),
    [(DEEP, CONTROL_DEEP), (DEEP_OBJECT, CONTROL_DEEP_OBJECT)],
    ids=["arrays", "objects"],
)
async def test_deep_json_is_400_on_every_json_route(
    client: Client, unique: str, body: bytes, control: bytes
) -> None:
    bucket = f"deep-{unique}"
    await _refused(await client.put(f"/{bucket}", data=control, headers=JSON))
    assert (await client.put(f"/{bucket}")).status == 201
    await _refused(await client.put(f"/{bucket}/config", data=control, headers=JSON))
    await _refused(await client.put(f"/{bucket}/created", data=body, headers=JSON))
    assert (await client.head(f"/{bucket}/created")).status == 404
    path = f"/{bucket}/s"
    await _json_stream(client, path)
    await _refused(await client.post(path, data=body, headers=JSON))
    await _refused(await client.post(f"{path}/trim", data=control, headers=JSON))
    await _refused(await client.post(f"/v1/stream/{bucket}/s/trim", data=control, headers=JSON))
    read = await client.get(path, params={"offset": "-1"})
    assert (read.status, await read.read()) == (200, b"[]")


async def test_deep_json_is_400_on_a_writable_mount(
    client: Client, kafka_bootstrap: str, unique: str
) -> None:
    topic = bucket = f"mounted-{unique}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    mount = {"mount": {"topic": topic, "content_type": "application/json", "appends": True}}
    created = await client.put(f"/{bucket}", data=json.dumps(mount), headers=JSON)
    assert created.status == 201, await created.text()
    await _refused(await client.post(f"/{bucket}/k", data=DEEP, headers=JSON))


async def test_one_large_json_value_is_stored_whole_and_reads_back(
    client: Client, unique: str
) -> None:
    """A 2 MiB object (walked in steps, not parsed in one call) is one message, byte-exact,
    appended and given at creation; a large array of them is one message each."""
    value = json.dumps({f"k{n}": [n, str(n)] for n in range(100_000)}).encode()
    bucket = f"large-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    created = await client.put(f"/{bucket}/s", data=io.BytesIO(value), headers=JSON)
    assert created.status == 201, await created.text()
    pair = io.BytesIO(b"[" + value + b"," + value + b"]")
    appended = await client.post(f"/{bucket}/s", data=pair, headers=JSON)
    assert appended.status == 204, await appended.text()
    offset, messages = "-1", []
    for _ in range(3):  # larger than read_chunk_bytes: a message comes alone
        read = await client.get(f"/{bucket}/s", params={"offset": offset})
        assert read.status == 200
        messages.append(await read.read())
        offset = read.headers["Stream-Next-Offset"]
    assert messages == [b"[" + value + b"]"] * 3
