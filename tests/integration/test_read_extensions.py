"""Reads by time (`at`) and bounded reads (`max_bytes`, `max_messages`) over HTTP on a real
broker: a read by time answers exactly as a read at the offset `HEAD ?at=` names, in every
mode, also once the data moved to the cold tier; a bounded read never passes its bounds nor
cuts a message, and its `Stream-Next-Offset` goes on where it stopped."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import string
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import ClientResponse
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from adapter.app import PARTS, create_app
from adapter.objects.s3 import S3ObjectStore
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.integration.test_tiering import (
    log_start,
    manifest,
    tier_settings,
    tier_until_done,
)
from tests.services import S3Server
from topology.naming import bucket_topic

TEXT = {"Content-Type": "text/plain"}
JSON = {"Content-Type": "application/json"}
SAME = ("Stream-Next-Offset", "Stream-Up-To-Date", "ETag", "Cache-Control")


def now_ms() -> int:
    return int(time.time() * 1000)


async def _moment() -> int:
    """A moment after every record written so far and before every one written next."""
    await asyncio.sleep(0.02)
    moment = now_ms()
    await asyncio.sleep(0.02)
    return moment


async def _error(response: ClientResponse, status: int) -> str:
    assert response.status == status, await response.text()
    code: str = (await response.json())["error"]["code"]
    return code


async def _post(client: Client, path: str, body: bytes, headers: dict[str, str] = TEXT) -> str:
    posted = await client.post(path, data=body, headers=headers)
    assert posted.status == 204, await posted.text()
    return posted.headers["Stream-Next-Offset"]


async def _offset_at(client: Client, path: str, at: str) -> str:
    head = await client.head(path, params={"at": at})
    assert head.status == 200
    return head.headers["Stream-Next-Offset"]


async def _same_as_offset(client: Client, path: str, at: str) -> bytes:
    """The read at `at`, checked to answer exactly as the read at the offset HEAD names."""
    by_time = await client.get(path, params={"at": at})
    by_offset = await client.get(path, params={"offset": await _offset_at(client, path, at)})
    assert by_time.status == by_offset.status == 200
    body = await by_time.read()
    assert body == await by_offset.read()
    assert [by_time.headers.get(h) for h in SAME] == [by_offset.headers.get(h) for h in SAME]
    return body


async def test_a_read_by_time_starts_at_the_first_message_appended_then(
    client: Client, unique: str
) -> None:
    bucket = f"/at-{unique}"
    assert (await client.put(bucket)).status == 201
    path, other = f"{bucket}/doc", f"{bucket}/other"
    for each in (path, other):
        assert (await client.put(each, headers=TEXT)).status == 201
    before = await _moment()
    for body in (b"one,", b"two,"):
        await _post(client, path, body)
        await _post(client, other, b"noise")  # records of another stream in between
    middle = await _moment()
    await _post(client, other, b"noise")
    for body in (b"three,", b"four"):
        await _post(client, path, body)
    after = await _moment()

    assert await _same_as_offset(client, path, str(before)) == b"one,two,three,four"
    assert await _same_as_offset(client, path, str(middle)) == b"three,four"
    rfc3339 = datetime.fromtimestamp(middle / 1000, UTC).isoformat(timespec="milliseconds")
    assert await _offset_at(client, path, rfc3339) == await _offset_at(client, path, str(middle))
    # Past the tail: the tail, an empty answer that is up to date.
    tail = (await client.head(path)).headers["Stream-Next-Offset"]
    assert await _offset_at(client, path, str(after)) == tail
    late = await client.get(path, params={"at": str(after)})
    assert (late.status, await late.read(), late.headers["Stream-Next-Offset"]) == (200, b"", tail)
    assert late.headers["Stream-Up-To-Date"] == "true"

    # Long-poll: data at the moment at once; at the tail, it waits for the next append.
    poll = await client.get(path, params={"at": str(middle), "live": "long-poll"})
    assert (poll.status, await poll.read()) == (200, b"three,four")
    waiting = asyncio.ensure_future(
        client.get(path, params={"at": str(now_ms() + 60_000), "live": "long-poll"})
    )
    await asyncio.sleep(0.2)
    await _post(client, path, b",five")
    woken = await waiting
    assert (woken.status, await woken.read()) == (200, b",five")

    # SSE: from the moment on, to the end of the closed stream.
    closing = await client.post(path, headers=TEXT | {"Stream-Closed": "true"})
    assert closing.status == 204
    events = await client.get(path, params={"at": str(middle), "live": "sse"})
    text = (await asyncio.wait_for(events.read(), 60)).decode()
    blocks = [block.split("\n") for block in text.strip().split("\n\n")]
    data = [lines[1].removeprefix("data:") for lines in blocks if lines[0] == "event: data"]
    assert "".join(data) == "three,four,five"


async def test_bad_reads_by_time_and_bounds_are_refused(client: Client, unique: str) -> None:
    bucket = f"/atbad-{unique}"
    assert (await client.put(bucket)).status == 201
    path = f"{bucket}/doc"
    assert (await client.put(path, headers=TEXT)).status == 201
    assert await _error(await client.get(path, params={"at": "yesterday"}), 400) == "invalid_time"
    assert (await client.head(path, params={"at": "-5"})).status == 400  # a HEAD has no body
    both = await client.get(path, params={"at": "0", "offset": "-1"})
    assert await _error(both, 400) == "invalid_query"
    for name, value in (("max_bytes", "0"), ("max_messages", "-1"), ("max_bytes", "1k")):
        refused = await client.get(path, params={name: value})
        assert await _error(refused, 400) == "invalid_query"
    sse = await client.get(path, params={"offset": "-1", "live": "sse", "max_messages": "1"})
    assert await _error(sse, 400) == "invalid_query"
    missing = await client.get(f"{bucket}/none", params={"at": "0"})
    assert await _error(missing, 404) == "stream_not_found"


@dataclass(frozen=True)
class _ThreeMessages:
    path: str
    before: int  # a moment before `a`
    kept: str  # the tail after `b`
    middle: int  # a moment between `b` and `c`


async def _three_messages(client: Client, bucket: str) -> _ThreeMessages:
    """A text stream holding `a`, `b`, `c`, with the moments around them."""
    assert (await client.put(f"/{bucket}")).status == 201
    path = f"/{bucket}/log"
    assert (await client.put(path, headers=TEXT)).status == 201
    before = await _moment()
    await _post(client, path, b"a")
    kept = await _post(client, path, b"b")
    middle = await _moment()
    await _post(client, path, b"c")
    return _ThreeMessages(path, before, kept, middle)


async def _gone_before(client: Client, stream: _ThreeMessages) -> None:
    """A read by time from before `a` is 410 from `kept`; one between `b` and `c` reads `c`."""
    for read in (client.get, client.head):
        gone = await read(stream.path, params={"at": str(stream.before)})
        assert gone.status == 410
        assert gone.headers["Stream-Earliest-Offset"] == stream.kept
    assert await _same_as_offset(client, stream.path, str(stream.middle)) == b"c"


async def test_a_read_by_time_below_a_snapshot_is_gone(client: Client, unique: str) -> None:
    stream = await _three_messages(client, f"atsn-{unique}")
    headers = {"Content-Type": "application/x-state"}
    url = f"{stream.path}/snapshot/{stream.kept}"
    assert (await client.put(url, data=b"AB", headers=headers)).status == 204
    await _gone_before(client, stream)


async def test_a_read_by_time_below_a_trim_is_gone(client: Client, unique: str) -> None:
    stream = await _three_messages(client, f"attr-{unique}")
    body = json.dumps({"before": stream.kept})
    trimmed = await client.post(f"{stream.path}/trim", data=body)
    assert trimmed.status == 204, await trimmed.text()
    await _gone_before(client, stream)


async def test_a_trim_by_time_removes_what_was_appended_before_it(
    client: Client, unique: str
) -> None:
    stream = await _three_messages(client, f"attb-{unique}")
    path, middle = stream.path, stream.middle
    first = await _offset_at(client, path, str(middle))  # c's offset
    trimmed = await client.post(f"{path}/trim", data=json.dumps({"at": middle}))
    assert trimmed.status == 204, await trimmed.text()
    assert trimmed.headers["Stream-Earliest-Offset"] == first
    assert (await client.get(path, params={"offset": "-1"})).status == 410
    rest = await client.get(path, params={"offset": first})
    assert (rest.status, await rest.read()) == (200, b"c")
    again = await client.post(f"{path}/trim", data=json.dumps({"at": 0}))  # already gone
    assert again.status == 204
    assert again.headers["Stream-Earliest-Offset"] == first


async def _walk(client: Client, path: str, params: dict[str, str]) -> list[ClientResponse]:
    """Every answer of a catch-up from -1 with these bounds, to the tail."""
    answers = []
    offset = "-1"
    for _ in range(1000):
        answer = await client.get(path, params=params | {"offset": offset})
        assert answer.status == 200, await answer.text()
        await answer.read()
        answers.append(answer)
        offset = answer.headers["Stream-Next-Offset"]
        if answer.headers.get("Stream-Up-To-Date") == "true":
            return answers
    raise AssertionError("never reached the tail")


async def test_bounded_reads_stop_at_their_bounds_without_cutting_a_message(
    client: Client, unique: str
) -> None:
    bucket = f"/bound-{unique}"
    assert (await client.put(bucket)).status == 201
    path = f"{bucket}/doc"
    assert (await client.put(path, headers=JSON)).status == 201
    messages = [{"n": n, "pad": "x" * (n * 7 % 50)} for n in range(20)]
    messages[9]["pad"] = "y" * 500  # larger than max_bytes: it comes alone, whole
    for start in range(0, 20, 4):
        await _post(client, path, json.dumps(messages[start : start + 4]).encode(), JSON)
    sizes = [len(json.dumps(m, separators=(",", ":"))) for m in messages]
    everything = await (await client.get(path, params={"offset": "-1"})).json()
    assert everything == messages

    answers = await _walk(client, path, {"max_messages": "3"})
    bodies = [json.loads(await a.read()) for a in answers]
    assert [len(b) for b in bodies] == [3, 3, 3, 3, 3, 3, 2]
    assert [m for b in bodies for m in b] == messages
    assert [a.headers.get("Stream-Up-To-Date") for a in answers] == [None] * 6 + ["true"]

    answers = await _walk(client, path, {"max_bytes": "120"})
    bodies = [json.loads(await a.read()) for a in answers]
    assert [m for b in bodies for m in b] == messages
    for body in bodies:
        payload = sum(sizes[m["n"]] for m in body)
        assert payload <= 120 or len(body) == 1, body
    assert [messages[9]] in bodies  # the large one, alone

    # Both bounds: the tighter one wins; long-poll takes them too.
    both = await client.get(path, params={"offset": "-1", "max_bytes": "1000", "max_messages": "2"})
    assert await both.json() == messages[:2]
    assert "Stream-Up-To-Date" not in both.headers
    following = {"offset": both.headers["Stream-Next-Offset"], "live": "long-poll"}
    poll = await client.get(path, params=following | {"max_messages": "1"})
    assert (poll.status, await poll.json()) == (200, messages[2:3])
    # The tail reached with room to spare: up to date.
    rest = await client.get(path, params={"offset": "-1", "max_messages": "1000"})
    assert (await rest.json(), rest.headers["Stream-Up-To-Date"]) == (messages, "true")


async def test_reads_by_time_and_bounded_reads_of_tiered_data(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """Moments looked up while Kafka held the records are found the same in the cold tier once
    Kafka freed them; bounded reads cross from chunks to Kafka as whole reads do."""
    settings = tier_settings(make_settings, s3, unique, tier_interval_ms=3_600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"tierat-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    path, other = f"/{bucket}/doc", f"/{bucket}/other"
    for each in (path, other):
        assert (await client.put(each, headers=TEXT)).status == 201
    moments: list[int] = []
    for round_ in range(12):
        moments.append(await _moment())
        for n in range(3):
            await _post(client, path, f"<{round_}.{n}:{'d' * 300}>".encode())
            await _post(client, other, b"o" * 400)
    before = {m: await _offset_at(client, path, str(m)) for m in moments}
    whole = b"".join([await answer.read() for answer in await _walk(client, path, {})])
    assert whole.count(b"<") == 36

    await tier_until_done(client)
    topic = bucket_topic(settings.topic_prefix, bucket)
    low, _ = log_start(settings.bootstrap_servers, topic)
    assert low > int(before[moments[len(moments) // 2]].replace("_", ""))  # half left Kafka
    after = {m: await _offset_at(client, path, str(m)) for m in moments}
    assert after == before
    for round_ in (0, 5, 11):
        body = await _same_as_offset(client, path, str(moments[round_]))
        assert body.startswith(f"<{round_}.0:".encode())
        assert body in whole
    answers = await _walk(client, path, {"max_messages": "4"})
    bodies = [await a.read() for a in answers]
    assert b"".join(bodies) == whole
    assert all(body.count(b"<") <= 4 for body in bodies)
    assert len(answers) >= 9  # 36 messages, at most 4 at a time


async def test_a_moment_far_into_the_cold_tier_is_found_without_fetching_every_chunk(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """Two streams tiered in many recent ranges (none skipped by its tiering time): `?at=` and
    a trim by `at` near their end find the exact first message while fetching a few chunks,
    not every chunk before it."""
    settings = tier_settings(
        make_settings, s3, unique, tier_interval_ms=3_600_000, read_scan_bytes=8192
    )
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"coldat-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    paths = (f"/{bucket}/read", f"/{bucket}/trim")
    for each in paths:
        assert (await client.put(each, headers=TEXT)).status == 201
    rng = random.Random(5)
    moment = 0
    for round_ in range(24):
        if round_ == 20:
            moment = await _moment()
        for n, each in itertools.product(range(4), paths):
            pad = "".join(rng.choices(string.ascii_letters, k=1000))
            await _post(client, each, f"<{round_}.{n}:{pad}>".encode())
        await tier_until_done(client)  # a range per round, each with a chunk of both streams
    store = client.app[PARTS].store
    assert isinstance(store, S3ObjectStore)
    cold = sum(chunk.object_bytes for tiered in manifest(settings) for chunk in tiered.chunks)

    read, fetched = paths[0], store.fetched
    gets, size = fetched.gets, fetched.size
    found = await client.get(read, params={"at": str(moment), "max_messages": "1"})
    assert found.status == 200
    assert (await found.read()).startswith(b"<20.0:")
    assert fetched.gets - gets <= 8, fetched.gets - gets  # 20 chunks lie before the answer
    assert fetched.size - size < cold / 6  # a third of the stream's chunks

    trim, gets = paths[1], fetched.gets
    trimmed = await client.post(f"{trim}/trim", data=json.dumps({"at": moment}))
    assert trimmed.status == 204, await trimmed.text()
    assert fetched.gets - gets <= 8, fetched.gets - gets
    rest = await client.get(trim, params={"offset": trimmed.headers["Stream-Earliest-Offset"]})
    assert (await rest.read()).startswith(b"<20.0:")
    assert (await client.get(trim, params={"offset": "-1"})).status == 410


async def test_reads_by_time_and_bounded_reads_of_a_mounted_topic(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """A mounted topic's records carry the timestamps its producer gave them (recent ones:
    Kafka's time retention deletes a segment of records older than a week at any time)."""
    t0 = now_ms() - 60_000
    settings = make_settings(mount_topics=f"*-{unique}")
    topic = f"events-{unique}"
    await asyncio.to_thread(_create_topic, settings.bootstrap_servers, topic)
    producer = Producer({"bootstrap.servers": settings.bootstrap_servers})
    for key, value, moment in ((b"k", b"v1", 1000), (b"o", b"x", 1500), (b"k", b"v2", 2000)):
        producer.produce(topic, value, key, timestamp=t0 + moment)
    producer.produce(topic, b"v3", b"k", timestamp=t0 + 3000)
    assert producer.flush(30) == 0
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"mntat-{unique}"
    mount = json.dumps({"mount": {"topic": topic}})
    assert (await client.put(f"/{bucket}", data=mount, headers=JSON)).status == 201
    path = f"/{bucket}/k"
    assert (await client.get(path, params={"offset": "-1"})).status == 200
    assert await _same_as_offset(client, path, str(t0 + 1800)) == b"v2v3"
    assert await _same_as_offset(client, path, "0") == b"v1v2v3"
    rfc3339 = datetime.fromtimestamp((t0 + 3000) / 1000, UTC).isoformat(timespec="milliseconds")
    assert await _same_as_offset(client, path, rfc3339) == b"v3"
    tail = (await client.head(path)).headers["Stream-Next-Offset"]
    assert await _offset_at(client, path, str(t0 + 3001)) == tail
    first = await client.get(path, params={"offset": "-1", "max_messages": "1"})
    assert (await first.read(), first.headers.get("Stream-Up-To-Date")) == (b"v1", None)
    rest = {"offset": first.headers["Stream-Next-Offset"], "max_bytes": "3"}
    second = await client.get(path, params=rest)
    assert (await second.read(), second.headers.get("Stream-Up-To-Date")) == (b"v2", None)


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=1)])[topic].result(30)
