"""An instance that does not own a stream's write slot learns its tail from the stream's
partition, not from the meta topic: with every meta follower held (a transaction left open on
the meta topic), an append acknowledged by the owner is read, said in a HEAD, and delivered to
live readers through the other instance at once. Where the owner's tier pass freed the records
after the tail it knew, a listing there follows the meta topic to the owner's checkpoint.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest
from confluent_kafka import Producer

from adapter.app import PARTS, create_app
from adapter.config import Settings
from tests.cluster import TEXT, Pair, stream_in, two_instances
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.integration.test_tiering import log_start, tier_settings, tier_until_done
from tests.services import S3Server
from topology.naming import StateTopics, bucket_topic
from topology.wire import decode_token

pytestmark = pytest.mark.integration


def _hold_meta(bootstrap: str, prefix: str) -> Producer:
    """A transaction left open on the meta topic (aborted by the caller): no instance's meta
    follower passes it."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}test-holder"}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(StateTopics.of(prefix).meta, key=b"held", value=b"")
    producer.flush(30)
    return producer


async def _append(session: aiohttp.ClientSession, url: str, data: str) -> str:
    async with session.post(url, data=data, headers=TEXT) as reply:
        assert reply.status in (200, 204), await reply.text()
        return reply.headers["Stream-Next-Offset"]


async def _sse_until(
    session: aiohttp.ClientSession, url: str, want: str, ready: asyncio.Event
) -> str:
    """What an SSE response sent until `want` appeared (or it ended); `ready` set once its
    first control event (`upToDate` at the old tail) arrived."""
    got = ""
    async with session.get(url) as reply:
        assert reply.status == 200, await reply.text()
        async for piece in reply.content.iter_any():
            got += piece.decode()
            if "event: control" in got:
                ready.set()
            if want in got:
                break
    return got


async def _one_message_seen_by_b(pair: Pair, prefix: str, stem: str) -> tuple[str, str, str]:
    """A stream written by `a` with one message, once `b` has followed its creation and that
    message: (the stream's id, its tail, its URL at `b`)."""
    session, a, b = pair.session, pair.a, pair.b
    stream = stream_in(prefix, pair.owners[a], stem)
    async with session.put(f"{a}/v1/stream/{stream}", headers=TEXT) as reply:
        assert reply.status == 201, await reply.text()
    first_tail = await _append(session, f"{a}/v1/stream/{stream}", "one")
    at_b = f"{b}/v1/stream/{stream}"
    for _ in range(100):
        async with session.head(at_b) as reply:
            if reply.headers.get("Stream-Next-Offset") == first_tail:
                break
        await asyncio.sleep(0.1)
    return stream, first_tail, at_b


@pytest.mark.timeout(180)
async def test_a_held_meta_topic_hides_no_append_from_the_other_instance(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    prefix = f"dt{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path) as pair:
        session, a = pair.session, pair.a
        stream, first_tail, at_b = await _one_message_seen_by_b(pair, prefix, "held")

        poll_url = f"{at_b}?offset={first_tail}&live=long-poll&timeout=30"
        polled = asyncio.create_task(_long_poll(session, poll_url))
        sse_ready = asyncio.Event()
        sse_url = f"{at_b}?offset={first_tail}&live=sse"
        tailed = asyncio.create_task(_sse_until(session, sse_url, "two", sse_ready))
        await asyncio.wait_for(sse_ready.wait(), 10)  # up to date at the old tail
        holder = _hold_meta(kafka_bootstrap, prefix)
        try:
            await asyncio.sleep(0.5)  # the long-poll waits at the old tail
            assert not polled.done()
            tail = await _append(session, f"{a}/v1/stream/{stream}", "two")
            acknowledged = asyncio.get_running_loop().time()
            async with session.get(f"{at_b}?offset=-1") as reply:  # (a) at once
                read = (reply.status, await reply.text(), reply.headers.get("Stream-Next-Offset"))
                read_up_to_date = reply.headers.get("Stream-Up-To-Date")
            async with session.head(at_b) as reply:  # (b)
                head = (reply.status, reply.headers.get("Stream-Next-Offset"))
            # (c) within 10 s: woken, not answered at the long-poll's timeout
            done, _ = await asyncio.wait([polled, tailed], timeout=10)
            waited_s = asyncio.get_running_loop().time() - acknowledged
        finally:
            holder.abort_transaction(30)
            for task in (polled, tailed):
                task.cancel()
        observed = {
            "read": (read, read_up_to_date),
            "head": head,
            "long-poll": polled.result() if polled in done else "not woken",
            "sse": "data:two" in tailed.result() if tailed in done else "not woken",
        }
        assert observed == {
            "read": ((200, "onetwo", tail), "true"),
            "head": (200, tail),
            "long-poll": (200, "two"),
            "sse": True,
        }, f"after {waited_s:.1f} s"


async def _long_poll(session: aiohttp.ClientSession, url: str) -> tuple[int, str]:
    async with session.get(url) as reply:
        return reply.status, await reply.text()


@pytest.mark.timeout(180)
async def test_a_tail_further_than_read_scan_bytes_is_not_claimed(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """Learning a tail reads the partition from the tail known here: past `read_scan_bytes`
    a read there answers 503 naming it, and one with messages says no `Stream-Up-To-Date`."""
    prefix = f"ds{unique}."
    scan = {"DURABLE_KAFKA_READ_CHUNK_BYTES": "16384", "DURABLE_KAFKA_READ_SCAN_BYTES": "65536"}
    async with two_instances(kafka_bootstrap, prefix, tmp_path, env_b=scan) as pair:
        session, a = pair.session, pair.a
        stream, first_tail, at_b = await _one_message_seen_by_b(pair, prefix, "far")
        holder = _hold_meta(kafka_bootstrap, prefix)
        try:
            for _ in range(4):
                await _append(session, f"{a}/v1/stream/{stream}", "x" * 40_000)
            async with session.get(f"{at_b}?offset={first_tail}") as reply:
                assert reply.status == 503, await reply.text()
                assert "read_scan_bytes" in await reply.text()
            async with session.get(f"{at_b}?offset=-1") as reply:
                assert reply.status == 200, await reply.text()
                assert await reply.text() == "one"
                assert "Stream-Up-To-Date" not in reply.headers
        finally:
            holder.abort_transaction(30)


@pytest.mark.timeout(180)
async def test_a_listing_and_a_read_by_time_through_the_other_instance_show_the_tail(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """With every meta follower held, a read by time (`?at=`) later than every append and a
    page of the bucket's streams, asked of the instance that does not write the stream, start
    at and name the tail of an append the owner acknowledged a moment before."""
    prefix = f"dl{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path) as pair:
        session, a, b = pair.session, pair.a, pair.b
        stream, _first_tail, at_b = await _one_message_seen_by_b(pair, prefix, "listed")
        holder = _hold_meta(kafka_bootstrap, prefix)
        try:
            by_time_tail = await _append(session, f"{a}/v1/stream/{stream}", "two")
            later = 2**41  # a moment after every append (year 2039)
            async with session.get(f"{at_b}?at={later}") as reply:
                by_time = (reply.status, await reply.text(), reply.headers["Stream-Next-Offset"])
            tail = await _append(session, f"{a}/v1/stream/{stream}", "three")
            async with session.get(f"{b}/_default/streams?prefix={stream}") as reply:
                assert reply.status == 200, await reply.text()
                [listed] = (await reply.json())["streams"]
        finally:
            holder.abort_transaction(30)
        assert by_time == (200, "", by_time_tail)  # no message appended after the moment
        assert (listed["stream_id"], listed["tail_offset"]) == (stream, tail)


@pytest.mark.timeout(180)
async def test_a_listing_through_the_other_instance_shows_the_tail_past_records_kafka_freed(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    unique: str,
    s3: S3Server,
) -> None:
    """The other instance learned a tail from the stream's records; the owner appends more and
    its tier pass checkpoints the stream and frees its records past that tail (its periodic
    checkpoints far off). With every meta follower held across the pass, the checkpoint is not
    applied there when a page of the bucket's streams is asked: the listing's scan from the tail
    it knew meets the freed records and must follow the meta topic to now (the hold released
    while it waits), not answer the tail it knew."""
    owner = await _by_hand(aiohttp_client, make_settings, s3, unique, "owner")
    assert (await owner.put("/shop")).status == 201
    assert (await owner.put("/shop/log", headers=TEXT)).status == 201
    known = await _posted(owner, 2)
    other = await _by_hand(aiohttp_client, make_settings, s3, unique, "other")
    assert other.app[PARTS].writers.assigned == frozenset()  # the owner keeps the slot
    assert await _listed_tail(other) == known  # learned from the stream's records
    tail = await _posted(owner, 3)

    prefix = make_settings().topic_prefix
    holder = _hold_meta(kafka_bootstrap, prefix)
    try:
        assert await tier_until_done(owner) > 0
        freed_below, _ = await asyncio.to_thread(
            log_start, kafka_bootstrap, bucket_topic(prefix, "shop")
        )
        assert freed_below > decode_token(known)  # the records after the tail known there
        listing = asyncio.ensure_future(_listed_tail(other))
        await asyncio.wait([listing], timeout=0.5)  # a listing that did not wait answered
    finally:
        await asyncio.to_thread(holder.abort_transaction, 30)
    assert await listing == tail
    head = await other.head("/shop/log")
    assert (head.status, head.headers["Stream-Next-Offset"]) == (200, tail)


@pytest.mark.timeout(180)
async def test_a_listing_through_the_other_instance_scans_past_a_quiet_streams_freed_tail(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    unique: str,
    s3: S3Server,
) -> None:
    """After `_quiet_beside_busy`, the busy stream takes one more append. A page of both
    through the other instance names the busy stream at that append's tail: the scan after
    the meta topic is followed starts at the log start, not at the quiet stream's tail (below
    it no scan can start, and the page named the tail of the owner's checkpoint)."""
    owner, other, quiet = await _quiet_beside_busy(aiohttp_client, make_settings, unique, s3)
    tail = await _posted(owner, 1)  # past what the pass freed: only in Kafka
    await _freed_between(make_settings, kafka_bootstrap, quiet, tail)
    assert await _listed_tails(other) == {"log": tail, "quiet": quiet}


@pytest.mark.timeout(180)
async def test_a_read_through_the_other_instance_scans_past_its_streams_freed_tail(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    kafka_bootstrap: str,
    unique: str,
    s3: S3Server,
) -> None:
    """After `_quiet_beside_busy`, the quiet stream takes one more append. A HEAD and a read
    through the other instance reach it: the meta topic followed shows the quiet stream's
    tail as it was (none of its records were freed), and the scan from there starts at the
    log start (from the tail no scan could start, and the read said it was up to date
    there)."""
    owner, other, quiet = await _quiet_beside_busy(aiohttp_client, make_settings, unique, s3)
    tail = await _posted(owner, 1, "quiet")  # past what the pass freed: only in Kafka
    await _freed_between(make_settings, kafka_bootstrap, quiet, tail)
    head = await other.head("/shop/quiet")
    assert (head.status, head.headers["Stream-Next-Offset"]) == (200, tail)
    read = await other.get("/shop/quiet?offset=-1")
    assert (read.status, await read.read()) == (200, b"mm")
    assert read.headers["Stream-Next-Offset"] == tail


async def _quiet_beside_busy(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> tuple[Client, Client, str]:
    """(the owner, the other instance, the quiet stream's tail): a bucket `shop` with a quiet
    stream written once, early, and a busy one (`log`), whose slot the owner writes; the
    owner's tier pass then frees every record there was: the quiet stream's tail lies far
    below Kafka's log start, none of its records freed past it."""
    owner = await _by_hand(aiohttp_client, make_settings, s3, unique, "owner")
    assert (await owner.put("/shop")).status == 201
    assert (await owner.put("/shop/quiet", headers=TEXT)).status == 201
    quiet = await _posted(owner, 1, "quiet")
    assert (await owner.put("/shop/log", headers=TEXT)).status == 201
    await _posted(owner, 2)
    other = await _by_hand(aiohttp_client, make_settings, s3, unique, "other")
    assert other.app[PARTS].writers.assigned == frozenset()  # the owner keeps the slot
    await _posted(owner, 2)
    assert await tier_until_done(owner) > 0
    return owner, other, quiet


async def _freed_between(
    make_settings: SettingsFactory, kafka_bootstrap: str, quiet: str, tail: str
) -> None:
    """Kafka's log start of `shop`'s partition lies past the quiet stream's tail and below
    `tail`: the records between were freed, those from it on only in Kafka."""
    freed_below, _ = await asyncio.to_thread(
        log_start, kafka_bootstrap, bucket_topic(make_settings().topic_prefix, "shop")
    )
    assert decode_token(quiet) < freed_below < decode_token(tail)


@pytest.mark.timeout(180)
async def test_a_read_through_the_other_instance_goes_on_where_a_bounded_scan_stopped(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str, s3: S3Server
) -> None:
    """A quiet stream written once, then many times `read_scan_bytes` of a busy stream's
    records after it in their partition. A read of the quiet stream through the other
    instance cannot say it is up to date at first (its scan for the quiet stream's records
    stops at the bound), but each try goes on from where the last one stopped, so a later try
    says so; before, every try scanned again from the stream's tail and none ever could."""
    bounded = {"read_chunk_bytes": 1024, "read_scan_bytes": 8192}
    owner = await _by_hand(aiohttp_client, make_settings, s3, unique, "owner", **bounded)
    assert (await owner.put("/shop")).status == 201
    assert (await owner.put("/shop/quiet", headers=TEXT)).status == 201
    quiet = await _posted(owner, 1, "quiet")
    assert (await owner.put("/shop/log", headers=TEXT)).status == 201
    for _ in range(40):  # ~50 KB of records: several bounded scans
        answer = await owner.post("/shop/log", data=b"b" * 1000, headers=TEXT)
        assert answer.status == 204, await answer.text()
    other = await _by_hand(aiohttp_client, make_settings, s3, unique, "other", **bounded)
    assert other.app[PARTS].writers.assigned == frozenset()  # the owner keeps the slot
    answers: list[tuple[int, str | None]] = []
    for _ in range(30):
        read = await other.get("/shop/quiet?offset=-1")
        answers.append((read.status, read.headers.get("Stream-Up-To-Date")))
        if read.headers.get("Stream-Up-To-Date") == "true":
            assert (await read.read(), read.headers["Stream-Next-Offset"]) == (b"m", quiet)
            break
    assert answers[0] != (200, "true"), answers  # the bound stopped the first scan
    assert answers[-1] == (200, "true"), answers


async def _by_hand(
    aiohttp_client: ClientFactory,
    make_settings: SettingsFactory,
    s3: S3Server,
    unique: str,
    instance_id: str,
    **more: int,
) -> Client:
    """An instance on the deployment's one write slot, its tier passes run by hand: only they
    checkpoint its streams; `more` settings as given."""
    chosen = {
        "write_slots": 1,
        "slot_checkpoint_ms": 600_000,
        "tier_interval_ms": 3_600_000,
        "tier_after_bytes": 0,
        **more,
    }
    settings = tier_settings(make_settings, s3, unique, instance_id=instance_id, **chosen)
    return await _in_process(aiohttp_client, settings)


async def _in_process(aiohttp_client: ClientFactory, settings: Settings) -> Client:
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    return client


async def _posted(client: Client, count: int, stream: str = "log") -> str:
    """The tail after `count` more messages appended to `/shop/{stream}` through `client`."""
    tail = ""
    for _ in range(count):
        answer = await client.post(f"/shop/{stream}", data=b"m", headers=TEXT)
        assert answer.status == 204, await answer.text()
        tail = answer.headers["Stream-Next-Offset"]
    return tail


async def _listed_tail(client: Client) -> str:
    """The tail of `/shop/log` in a page of `shop`'s streams asked of `client`."""
    reply = await client.get("/shop/streams")
    assert reply.status == 200, await reply.text()
    [listed] = (await reply.json())["streams"]
    assert listed["stream_id"] == "log"
    tail = listed["tail_offset"]
    assert isinstance(tail, str)
    return tail


async def _listed_tails(client: Client) -> dict[str, str]:
    """Each stream's tail in a page of `shop`'s streams asked of `client`."""
    reply = await client.get("/shop/streams")
    assert reply.status == 200, await reply.text()
    return {
        listed["stream_id"]: listed["tail_offset"] for listed in (await reply.json())["streams"]
    }
