"""The console's routes on a real broker: the modes, its API, and its security headers."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from yarl import URL

from adapter.app import create_app
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready


async def _client(factory: ClientFactory, make_settings: SettingsFactory, mode: str) -> Client:
    client = await factory(create_app(make_settings(console=mode)))
    await wait_ready(client)
    return client


async def test_off_answers_404_everywhere_under_ui(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await _client(aiohttp_client, make_settings, "off")
    for path in ("/ui", "/ui/", "/ui/js/app.js", "/ui/api/buckets"):
        response = await client.get(path)
        assert response.status == 404, path
        assert (await response.json())["error"]["code"] == "not_found"


async def test_read_only_mode_is_announced_and_files_carry_csp(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory
) -> None:
    client = await _client(aiohttp_client, make_settings, "ro")
    assert await (await client.get("/ui/api/config")).json() == {"mode": "ro"}
    index = await client.get("/ui/")
    assert index.status == 200
    assert index.headers["Content-Type"] == "text/html; charset=utf-8"
    assert index.headers["Content-Security-Policy"].startswith("default-src 'self';")
    assert index.headers["X-Content-Type-Options"] == "nosniff"
    redirect = await client.get("/ui", allow_redirects=False)
    assert (redirect.status, redirect.headers["Location"]) == (308, "/ui/")
    for path in ("/ui/nothing.js", "/ui/js/%2e%2e/%2e%2e/app.py", "/ui/js/..%2fapp.js"):
        missing = await client.get(URL(path, encoded=True))
        assert missing.status == 404, path
    unknown = await client.get("/ui/api/streams")
    assert (await unknown.json())["error"]["code"] == "not_found"


async def test_api_lists_buckets_and_fork_lineage(client: Client, unique: str) -> None:
    bucket = f"con-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    text = {"Content-Type": "text/plain"}
    assert (await client.put(f"/{bucket}/source", headers=text)).status == 201
    written = await client.post(f"/{bucket}/source", data=b"one", headers=text)
    cut = written.headers["Stream-Next-Offset"]
    fork = {**text, "Stream-Forked-From": f"/{bucket}/source", "Stream-Fork-Offset": cut}
    made = await client.put(f"/{bucket}/child", headers=fork)
    assert made.status == 201, await made.text()
    assert (
        await client.put(
            f"/{bucket}/grandchild", headers={**text, "Stream-Forked-From": f"/{bucket}/child"}
        )
    ).status == 201

    listed = await (await client.get("/ui/api/buckets")).json()
    shown = {"bucket_id": bucket, "streams": 3, "mount": None, "retention": {"max_age_ms": None}}
    assert shown in listed["buckets"]

    lineage = await (await client.get(f"/ui/api/stream/{bucket}/grandchild")).json()
    assert [s["stream_id"] for s in lineage["sources"]] == ["grandchild", "child"]
    assert [s["forked_from"] for s in lineage["sources"]] == ["child", "source"]
    assert lineage["sources"][1]["fork_offset"] == cut
    assert lineage["forks"] == []
    assert lineage["topic"].endswith(bucket)
    source = await (await client.get(f"/ui/api/stream/{bucket}/source")).json()
    assert [f["stream_id"] for f in source["forks"]] == ["child"]
    assert source["sources"] == []

    missing = await client.get(f"/ui/api/stream/{bucket}/nope")
    assert missing.status == 404
    bad = await client.get("/ui/api/stream/UP/x")
    assert (await bad.json())["error"]["code"] == "invalid_bucket_id"


async def _messages(client: Client, path: str, offset: str) -> list[object]:
    response = await client.get(path, params={"offset": offset})
    assert response.status == 200, await response.text()
    body: list[object] = await response.json()
    return body


async def test_seek_to_last_messages_and_to_a_moment(client: Client, unique: str) -> None:
    bucket = f"seek-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    json_type = {"Content-Type": "application/json"}
    path = f"/{bucket}/numbers"
    assert (await client.put(path, headers=json_type)).status == 201
    for n in range(1, 6):
        assert (await client.post(path, data=f'{{"n":{n}}}', headers=json_type)).status == 204
    await asyncio.sleep(0.05)  # Kafka timestamps are milliseconds: make the moment distinct
    moment = int(time.time() * 1000)
    await asyncio.sleep(0.05)
    for n in range(6, 11):
        assert (await client.post(path, data=f'{{"n":{n}}}', headers=json_type)).status == 204

    async def seek(**query: str) -> Any:
        response = await client.get(f"/ui/api/seek/{bucket}/numbers", params=query)
        assert response.status == 200, await response.text()
        return (await response.json())["offset"]

    assert await _messages(client, path, await seek(last="3")) == [{"n": 8}, {"n": 9}, {"n": 10}]
    assert len(await _messages(client, path, await seek(last="1000"))) == 10
    assert await _messages(client, path, await seek(time=str(moment))) == [
        {"n": n} for n in range(6, 11)
    ]
    tail = (await client.head(path)).headers["Stream-Next-Offset"]
    assert await seek(time=str(moment + 3_600_000)) == tail
    for bad in ({"last": "0"}, {"last": "x"}, {}, {"last": "1", "time": "1"}):
        refused = await client.get(f"/ui/api/seek/{bucket}/numbers", params=bad)
        assert refused.status == 400, bad
        assert (await refused.json())["error"]["code"] == "invalid_query"


async def test_how_many_last_messages_a_seek_takes_is_configured(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """`last=N` costs memory by N: its bound is a setting, 10,000 unless configured."""
    bucket, text = f"seekmax-{unique}", {"Content-Type": "text/plain"}
    default = await aiohttp_client(create_app(make_settings()))
    await wait_ready(default)
    assert (await default.put(f"/{bucket}")).status == 201
    assert (await default.put(f"/{bucket}/s", headers=text)).status == 201
    await _refused_over(default, bucket, "10001")
    few = await aiohttp_client(create_app(make_settings(console_max_last=3)))
    await wait_ready(few)
    await _refused_over(few, bucket, "4")
    assert (await few.get(f"/ui/api/seek/{bucket}/s", params={"last": "3"})).status == 200


async def _refused_over(client: Client, bucket: str, too_many: str) -> None:
    refused = await client.get(f"/ui/api/seek/{bucket}/s", params={"last": too_many})
    assert refused.status == 400, await refused.text()
    error = (await refused.json())["error"]
    assert (error["code"], "console_max_last" in error["message"]) == ("invalid_query", True)


async def test_a_seek_to_the_last_messages_holds_only_those(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """A seek looks back in growing windows of the partition; one that falls on thousands of
    the stream's older messages keeps only the N it seeks, not every one in the window."""
    # Streams side by side in one partition; scans of ~4,000 records (quick under tracemalloc).
    settings = make_settings(partitions=1, read_scan_bytes=1024 * 1024, read_chunk_bytes=65536)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket, json_type = f"seekmem-{unique}", {"Content-Type": "application/json"}
    assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/s"
    for name in ("s", "other"):
        assert (await client.put(f"/{bucket}/{name}", headers=json_type)).status == 201
    dense = json.dumps(list(range(10_000))).encode()
    for _ in range(7):  # 70,000 older messages of the stream, side by side
        assert (await client.post(path, data=dense, headers=json_type)).status == 204
    other = json.dumps([0] * 8000).encode()  # windows of 4,096 and 16,384 hold none of them
    for _ in range(3):
        posted = await client.post(f"/{bucket}/other", data=other, headers=json_type)
        assert posted.status == 204
    for n in range(5):
        assert (await client.post(path, data=f"[{-n}]", headers=json_type)).status == 204

    # The peak counts whatever the app's background tasks allocate meanwhile too: the least of
    # three seeks is the seek's own (what it holds is the same each time, the noise is not).
    peaks = []
    for _ in range(3):
        tracemalloc.start()
        try:
            seek = await client.get(f"/ui/api/seek/{bucket}/s", params={"last": "10"})
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    peak = min(peaks)

    assert seek.status == 200, await seek.text()
    assert await _messages(client, path, (await seek.json())["offset"]) == [
        *range(9995, 10_000),
        0,
        -1,
        -2,
        -3,
        -4,
    ]
    # ~115 bytes a message held: 65,536 of the window's would be 7 MiB (13 MB measured when it
    # held them); the N it keeps take ~0.6 MB, and the app's own tasks allocate beside it.
    assert peak < 4 * 1024 * 1024, peak


async def test_records_give_kafka_coordinates_across_a_fork(client: Client, unique: str) -> None:
    bucket = f"recs-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    json_type = {"Content-Type": "application/json"}
    assert (await client.put(f"/{bucket}/src", headers=json_type)).status == 201
    for n in (1, 2, 3):
        assert (await client.post(f"/{bucket}/src", data=f"[{n}]", headers=json_type)).status == 204
    fork = {**json_type, "Stream-Forked-From": f"/{bucket}/src"}
    assert (await client.put(f"/{bucket}/fork", headers=fork)).status == 201
    assert (await client.post(f"/{bucket}/fork", data="[4,5]", headers=json_type)).status == 204

    listed = await (await client.get(f"/ui/api/records/{bucket}/fork")).json()
    records = listed["records"]
    assert [r["written_by"] for r in records] == ["src", "src", "src", "fork", "fork"]
    assert [r["bytes"] for r in records] == [1] * 5
    offsets = [r["kafka_offset"] for r in records]
    assert offsets == sorted(offsets)
    assert listed["topic"].endswith(bucket)
    assert all(r["timestamp_ms"] > 0 for r in records)
    # Each record's offset, read from, gives that message first.
    assert await _messages(client, f"/{bucket}/fork", records[3]["offset"]) == [4, 5]
    assert await _messages(client, f"/{bucket}/fork", records[2]["next_offset"]) == [4, 5]

    seek = await client.get(f"/ui/api/seek/{bucket}/fork", params={"last": "4"})
    assert await _messages(client, f"/{bucket}/fork", (await seek.json())["offset"]) == [2, 3, 4, 5]
    two = await (await client.get(f"/ui/api/records/{bucket}/fork", params={"limit": "2"})).json()
    assert [r["kafka_offset"] for r in two["records"]] == offsets[:2]
    assert two["next_offset"] == two["records"][1]["next_offset"]  # where the next page starts
    assert listed["next_offset"] == records[-1]["next_offset"]
    bad = await client.get(f"/ui/api/records/{bucket}/fork", params={"offset": "nope"})
    assert (await bad.json())["error"]["code"] == "invalid_offset"


def _mounted_topic(bootstrap: str, topic: str) -> None:
    """A topic a plain producer wrote: `k-1` twice, and a key that is no stream id."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in ((b"k-1", b"alpha"), (b"k-1", b"beta"), (b"a/b", b"slash")):
        producer.produce(topic, value, key)
    assert producer.flush(30) == 0


async def test_api_on_a_mounted_topic(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    topic, bucket = f"con-orders-{unique}", f"conm-{unique}"
    client = await aiohttp_client(create_app(make_settings(mount_topics=topic)))
    await wait_ready(client)
    await asyncio.to_thread(_mounted_topic, make_settings().bootstrap_servers, topic)
    body = {"mount": {"topic": topic, "content_type": "text/plain"}}
    assert (await client.put(f"/{bucket}", json=body)).status == 201
    for _ in range(600):
        if (await (await client.get(f"/{bucket}")).json()).get("index", {}).get("caught_up"):
            break
        await asyncio.sleep(0.05)
    facts = {"topic": topic, "key_encoding": "utf8", "appends": False}
    listed = await (await client.get("/ui/api/buckets")).json()
    shown = {"bucket_id": bucket, "streams": 2, "mount": facts, "retention": None}
    assert shown in listed["buckets"]
    stream = await (await client.get(f"/ui/api/stream/{bucket}/k-1")).json()
    assert (stream["topic"], stream["mount"], stream["sources"]) == (topic, facts, [])

    records = await (await client.get(f"/ui/api/records/{bucket}/k-1")).json()
    assert [r["bytes"] for r in records["records"]] == [5, 4]  # alpha, beta: the cut the view makes
    tail = (await client.head(f"/{bucket}/k-1")).headers["Stream-Next-Offset"]
    assert records["next_offset"] == tail
    refused = await client.get(f"/ui/api/seek/{bucket}/k-1", params={"last": "1"})
    assert refused.status == 400
    assert (await refused.json())["error"]["code"] == "invalid_query"
