"""Age retention over HTTP on the real broker: a bucket's `{"retention": {"max_age_ms": N}}`
makes its streams' messages older than N gone (410 with `Stream-Earliest-Offset`) by the
background pass, while a snapshot newer than the cut keeps `/bootstrap` whole;
`PUT /{bucket}/config` changes it, conditionally with `If-Match` (of two writers with one
ETag exactly one wins), and the configuration survives a restart; bad bodies are 400."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import ClientResponse

from adapter.app import PARTS, create_app
from adapter.log.write_batches import WriteBatch
from adapter.log.writer import WriterLimits
from adapter.service.interfaces import SlotWriting
from tests.cluster import SLOTS, partitions, past_moves, two_instances
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.integration.test_mounts import _fill_few
from tests.integration.test_retention import _bootstrap, _pass
from topology.placement import partition_for
from topology.slots import SlotMap
from topology.wire import decode_token, stream_key

pytestmark = pytest.mark.integration

TEXT = {"Content-Type": "text/plain"}
STATE = {"Content-Type": "application/x-state"}
EARLIEST = "Stream-Earliest-Offset"
HOUR_MS = 3_600_000
WAIT_S = 60.0  # a bound for a background pass on a loaded machine, never a timing asserted


def _retention(max_age_ms: int | None) -> dict[str, Any]:
    return {"retention": {"max_age_ms": max_age_ms}}


async def _append(client: Client, path: str, body: bytes) -> str:
    response = await client.post(path, data=body, headers=TEXT)
    assert response.status == 204, await response.text()
    return response.headers["Stream-Next-Offset"]


async def _gone_from(client: Client, path: str, earliest: str) -> ClientResponse:
    """The answer to a read from the beginning once it is 410 with `earliest` (a background
    pass makes it so), or the last answer when that never came."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        response = await client.get(path, params={"offset": "-1"})
        moved = response.status == 410 and response.headers[EARLIEST] == earliest
        if moved or loop.time() > deadline:
            return response
        await asyncio.sleep(0.2)


async def _code(response: ClientResponse) -> str:
    code = (await response.json())["error"]["code"]
    assert isinstance(code, str)
    return code


async def _configure(
    client: Client, bucket: str, body: Any, if_match: str | None = None
) -> ClientResponse:
    headers = {} if if_match is None else {"If-Match": if_match}
    return await client.put(f"/{bucket}/config", json=body, headers=headers)


async def test_messages_older_than_max_age_are_gone_and_a_snapshot_keeps_bootstrap_whole(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(age_retention_interval_ms=200)))
    await wait_ready(client)
    bucket = f"ar-{unique}"
    created = await client.put(f"/{bucket}", json=_retention(2000))
    assert created.status == 201
    assert (await created.json())["retention"] == {"max_age_ms": 2000}
    shown = await client.get(f"/{bucket}")
    assert (await shown.json())["retention"] == {"max_age_ms": 2000}
    assert shown.headers["ETag"] == created.headers["ETag"]
    kept, plain, aged = f"/{bucket}/kept", f"/{bucket}/plain", f"/{bucket}/aged"
    for path in (kept, plain, aged):
        assert (await client.put(path, headers=TEXT)).status == 201
    await _append(client, kept, b"k1")
    folded = await _append(client, kept, b"k2")
    published = await client.put(f"{kept}/snapshot/{folded}", data=b"K12", headers=STATE)
    assert published.status == 204
    plain_tail = await _append(client, plain, b"p1")
    early = await _append(client, aged, b"a1")
    assert (await client.put(f"{aged}/snapshot/{early}", data=b"A1", headers=STATE)).status == 204
    aged_tail = await _append(client, aged, b"a2")

    # Past max_age the pass trims both: below the snapshot for one, everything for the other.
    gone = await _gone_from(client, plain, plain_tail)
    assert (gone.status, gone.headers[EARLIEST]) == (410, plain_tail)
    assert await _code(gone) == "offset_gone"
    gone = await _gone_from(client, kept, folded)
    assert (gone.status, gone.headers[EARLIEST]) == (410, folded)
    # The snapshot is no older than the cut: bootstrap rebuilds from it, nothing missing.
    assert await _bootstrap(client, kept) == [b"K12"]
    assert await _bootstrap(client, plain) == [b""]
    # A snapshot older than the cut folds messages that are gone after it: it is hidden, as
    # after a trim past it, and bootstrap answers what is left.
    gone = await _gone_from(client, aged, aged_tail)
    assert (gone.status, gone.headers[EARLIEST]) == (410, aged_tail)
    assert await _bootstrap(client, aged) == [b""]

    # Younger messages stay: with a long max age set now, nothing more goes.
    assert (await _configure(client, bucket, _retention(HOUR_MS))).status == 200
    await asyncio.sleep(0.5)  # let a pass that began under the old value end
    tail = await _append(client, kept, b"k3")
    read = await client.get(kept, params={"offset": folded})
    assert (read.status, await read.read()) == (200, b"k3")
    assert await _bootstrap(client, kept) == [b"K12", b"k3"]
    head = await client.head(kept)
    assert head.headers["Stream-Next-Offset"] == tail


async def test_what_age_retention_cut_is_freed_from_kafka_by_the_retention_path(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    # One partition, no background tier passes: only the pass run here frees anything.
    settings = make_settings(partitions=1, tier_interval_ms=600_000, age_retention_interval_ms=200)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    bucket = f"af-{unique}"
    assert (await client.put(f"/{bucket}", json=_retention(2000))).status == 201
    path = f"/{bucket}/log"
    assert (await client.put(path, headers=TEXT)).status == 201
    await _append(client, path, b"m1")
    tail = await _append(client, path, b"m2")
    gone = await _gone_from(client, path, tail)
    assert (gone.status, gone.headers[EARLIEST]) == (410, tail)
    assert await _pass(client, settings, bucket, after_grace=False) == 0  # not settled yet
    assert await _pass(client, settings, bucket, after_grace=True) == decode_token(tail)


async def test_a_config_change_takes_effect_and_survives_a_restart(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, tmp_path: Path, unique: str
) -> None:
    first = await aiohttp_client(create_app(make_settings(age_retention_interval_ms=200)))
    await wait_ready(first)
    bucket = f"ac-{unique}"
    assert (await first.put(f"/{bucket}")).status == 201
    before = await first.get(f"/{bucket}")
    assert (await before.json())["retention"] == {"max_age_ms": None}
    path = f"/{bucket}/log"
    assert (await first.put(path, headers=TEXT)).status == 201
    tail = await _append(first, path, b"old")

    changed = await _configure(first, bucket, _retention(HOUR_MS), before.headers["ETag"])
    assert changed.status == 200
    assert await changed.json() == _retention(HOUR_MS)
    assert changed.headers["ETag"] != before.headers["ETag"]
    await first.close()

    # Its own catalog folder: the configuration comes back from the meta topic alone.
    settings = make_settings(
        age_retention_interval_ms=200, catalog_dir=str(tmp_path / "second-catalog")
    )
    second = await aiohttp_client(create_app(settings))
    await wait_ready(second)
    shown = await second.get(f"/{bucket}")
    assert (await shown.json())["retention"] == {"max_age_ms": HOUR_MS}
    assert shown.headers["ETag"] == changed.headers["ETag"]
    stale = await _configure(second, bucket, _retention(2000), before.headers["ETag"])
    assert (stale.status, await _code(stale)) == (412, "precondition_failed")
    kept = await second.get(path, params={"offset": "-1"})
    assert (kept.status, await kept.read()) == (200, b"old")

    assert (await _configure(second, bucket, _retention(2000), "*")).status == 200
    gone = await _gone_from(second, path, tail)
    assert (gone.status, gone.headers[EARLIEST]) == (410, tail)


async def test_of_two_config_writers_with_one_etag_exactly_one_wins(
    client: Client, unique: str
) -> None:
    bucket = f"am-{unique}"
    assert (await client.put(f"/{bucket}")).status == 201
    for round_ in range(5):
        etag = (await client.get(f"/{bucket}")).headers["ETag"]
        ages = (HOUR_MS + round_, 2 * HOUR_MS + round_)
        answers = await asyncio.gather(
            *(_configure(client, bucket, _retention(age), etag) for age in ages)
        )
        statuses = [answer.status for answer in answers]
        assert sorted(statuses) == [200, 412], statuses
        winner = ages[statuses.index(200)]
        shown = await client.get(f"/{bucket}")
        assert (await shown.json())["retention"] == {"max_age_ms": winner}
        assert shown.headers["ETag"] == answers[statuses.index(200)].headers["ETag"]


BAD_BODIES = [
    (b"{not json", "invalid_json"),
    (b"[]", "invalid_retention"),
    (b'{"retention": {"max_age_ms": 999}}', "invalid_retention"),
    (b'{"retention": {"max_age_ms": "2000"}}', "invalid_retention"),
    (b'{"retention": {"max_age_ms": 2.5}}', "invalid_retention"),
    (b'{"retention": {"max_bytes": 10}}', "invalid_retention"),
    (b'{"retention": 2000}', "invalid_retention"),
    (b'{"retention": {"max_age_ms": 2000}, "mount": {"topic": "x"}}', "invalid_mount"),
]


@pytest.mark.parametrize(("body", "code"), BAD_BODIES)
async def test_bad_configurations_are_refused_precisely_and_change_nothing(
    client: Client, unique: str, body: bytes, code: str
) -> None:
    json_type = {"Content-Type": "application/json"}
    refused = await client.put(f"/ab-{unique}", data=body, headers=json_type)
    assert (refused.status, await _code(refused)) == (400, code)
    assert (await client.get(f"/ab-{unique}")).status == 404  # nothing was made

    bucket = f"ak-{unique}"
    assert (await client.put(f"/{bucket}", json=_retention(HOUR_MS))).status == 201
    etag = (await client.get(f"/{bucket}")).headers["ETag"]
    refused = await client.put(f"/{bucket}/config", data=body, headers=json_type)
    # The config route knows no mounts: a `mount` field is one a configuration does not have.
    expected = "invalid_retention" if code == "invalid_mount" else code
    assert (refused.status, await _code(refused)) == (400, expected)
    shown = await client.get(f"/{bucket}")
    assert (await shown.json())["retention"] == {"max_age_ms": HOUR_MS}
    assert shown.headers["ETag"] == etag


async def test_the_config_of_a_missing_bucket_is_404(client: Client, unique: str) -> None:
    missing = await _configure(client, f"an-{unique}", _retention(HOUR_MS))
    assert (missing.status, await _code(missing)) == (404, "bucket_not_found")


async def test_a_mounted_topic_keeps_its_own_retention(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, kafka_bootstrap: str, unique: str
) -> None:
    client = await aiohttp_client(create_app(make_settings(mount_topics=f"*-{unique}")))
    await wait_ready(client)
    topic, bucket = f"aged-{unique}", f"am-{unique}-mount"
    await asyncio.to_thread(_fill_few, kafka_bootstrap, topic)
    mounted = await client.put(
        f"/{bucket}", json={"mount": {"topic": topic, "content_type": "text/plain"}}
    )
    assert mounted.status == 201, await mounted.text()
    refused = await _configure(client, bucket, _retention(HOUR_MS))
    assert (refused.status, await _code(refused)) == (409, "mount_not_configurable")


@pytest.mark.faults
@pytest.mark.timeout(300)
async def test_two_config_writers_through_two_instances_one_etag_exactly_one_wins(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """Each instance forwards the change to the owner of the bucket's slot, which decides
    both under the bucket's lock; each then shows the winner's configuration and ETag."""
    prefix = f"aconf{unique}."
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60) as pair:
        session, bases = pair.session, (pair.a, pair.b)
        bucket = f"ar-{unique}"
        async with session.put(f"{pair.a}/{bucket}", json=_retention(HOUR_MS)) as made:
            assert made.status == 201, await made.text()
        for round_ in range(4):
            async with session.get(f"{bases[round_ % 2]}/{bucket}") as shown:
                etag = shown.headers["ETag"]
            ages = (HOUR_MS + round_, 2 * HOUR_MS + round_)

            async def put(base: str, age: int, etag: str = etag) -> tuple[int, str | None]:
                url = f"{base}/{bucket}/config"
                body = _retention(age)
                async with session.put(url, json=body, headers={"If-Match": etag}) as reply:
                    return reply.status, reply.headers.get("ETag")

            answers = await asyncio.gather(*(put(b, a) for b, a in zip(bases, ages, strict=True)))
            statuses = [status for status, _ in answers]
            assert sorted(statuses) == [200, 412], statuses
            winner = statuses.index(200)
            # The winner's instance answered once its catalog showed the change; the other
            # follows the meta topic to it.
            async with session.get(f"{bases[winner]}/{bucket}") as shown:
                assert (await shown.json())["retention"] == {"max_age_ms": ages[winner]}
                assert shown.headers["ETag"] == answers[winner][1]
            assert await _shows(session, bases[1 - winner], bucket, answers[winner][1])


async def _shows(session: aiohttp.ClientSession, base: str, bucket: str, etag: str | None) -> bool:
    """Whether the instance at `base` comes to answer the bucket with `etag`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while loop.time() < deadline:
        async with session.get(f"{base}/{bucket}") as shown:
            if shown.headers.get("ETag") == etag:
                return True
        await asyncio.sleep(0.1)
    return False


async def _read(client: Client, path: str) -> tuple[int, bytes]:
    response = await client.get(path, params={"offset": "-1"})
    return response.status, await response.read()


async def test_a_fork_of_another_bucket_is_aged_by_its_records_in_its_sources_topic(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """The fork's records are in its source's topic: the time cut is looked up there, so a
    young fork keeps every message, and once they are older than the fork's bucket allows
    it is trimmed to its tail, while its source (in a bucket without retention) is not."""
    settings = make_settings(partitions=1, age_retention_interval_ms=600_000)
    client = await aiohttp_client(create_app(settings))
    await wait_ready(client)
    source_bucket, fork_bucket = f"as-{unique}", f"at-{unique}"
    assert (await client.put(f"/{source_bucket}")).status == 201
    assert (await client.put(f"/{fork_bucket}", json=_retention(600_000))).status == 201
    source, fork = f"/{source_bucket}/s", f"/{fork_bucket}/f"
    assert (await client.put(source, headers=TEXT)).status == 201
    for body in (b"s1", b"s2"):
        await _append(client, source, body)
    forked = await client.put(fork, headers=TEXT | {"Stream-Forked-From": source})
    assert forked.status == 201, await forked.text()
    tail = await _append(client, fork, b"f1")

    retention = client.app[PARTS].age_retention
    assert await retention.pass_once() == 0
    assert await _read(client, fork) == (200, b"s1s2f1")

    now = retention.clock()
    retention.clock = lambda: now + 600_000 + HOUR_MS  # every message is past the max age
    assert await retention.pass_once() == 1
    gone = await client.get(fork, params={"offset": "-1"})
    assert (gone.status, gone.headers[EARLIEST]) == (410, tail)
    assert await _read(client, source) == (200, b"s1s2")


def _slot(prefix: str, bucket: str, stream_id: str) -> int:
    """The write slot of the partition `stream_id` takes in `bucket` (or a fork of it does)."""
    return SlotMap(prefix, SLOTS).of_stream(
        bucket, partition_for(stream_key(stream_id), partitions(prefix))
    )


def _named(stem: str, unique: str, fits: Callable[[str, str], bool]) -> tuple[str, str]:
    """A bucket `{stem}{n}-{unique}` and a stream id of it that `fits`."""
    names = ((f"{stem}{n}-{unique}", f"s{m}") for n in range(100) for m in range(50))
    return next((bucket, stream_id) for bucket, stream_id in names if fits(bucket, stream_id))


async def _gone_through(session: aiohttp.ClientSession, url: str, earliest: str) -> int:
    """The status of a read from the beginning once it is 410 with `earliest`, or the last
    status when that never came."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        async with session.get(url, params={"offset": "-1"}) as response:
            if response.status == 410 and response.headers[EARLIEST] == earliest:
                return 410
            if loop.time() > deadline:
                return response.status
        await asyncio.sleep(0.2)


@pytest.mark.faults
@pytest.mark.timeout(300)
async def test_each_instance_ages_the_forks_whose_records_its_slots_hold(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    """A fork of another bucket is trimmed by the owner of its source's slot, and an instance
    owning the fork's bucket's slot but not that one passes it over: the buckets after it
    still get their turn."""
    prefix = f"aown{unique}."
    env = {"DURABLE_KAFKA_AGE_RETENTION_INTERVAL_MS": "200"}
    async with two_instances(kafka_bootstrap, prefix, tmp_path, total_s=60, env=env) as pair:
        session, a, b = pair.session, pair.a, pair.b
        source_bucket = f"as-{unique}"

        def split(fork_bucket: str, stream_id: str) -> bool:  # the fork's slot a's, records b's
            here = _slot(prefix, fork_bucket, stream_id) in pair.owners[a]
            return here and _slot(prefix, source_bucket, stream_id) in pair.owners[b]

        # Bucket names sort the fork's before the later one: the pass meets the fork first.
        fork_bucket, source_id = _named("af", unique, split)
        later_bucket, later_id = _named(
            "az", unique, lambda x, s: _slot(prefix, x, s) in pair.owners[a]
        )
        source = f"{a}/{source_bucket}/{source_id}"
        fork, later = f"{a}/{fork_bucket}/f", f"{a}/{later_bucket}/{later_id}"
        for bucket, body in ((source_bucket, None), (fork_bucket, _retention(1000))):
            assert (await past_moves(session, "PUT", f"{a}/{bucket}", json=body))[0] == 201
        assert (await past_moves(session, "PUT", source, headers=TEXT))[0] == 201
        assert (await past_moves(session, "POST", source, data=b"s1", headers=TEXT))[0] == 204
        forked = TEXT | {"Stream-Forked-From": source.removeprefix(a)}
        assert (await past_moves(session, "PUT", fork, headers=forked))[0] == 201
        async with session.post(fork, data=b"f1", headers=TEXT) as appended:
            assert appended.status == 204, await appended.text()
            fork_tail = appended.headers["Stream-Next-Offset"]
        made = await past_moves(session, "PUT", f"{a}/{later_bucket}", json=_retention(1000))
        assert made[0] == 201
        assert (await past_moves(session, "PUT", later, headers=TEXT))[0] == 201
        async with session.post(later, data=b"z1", headers=TEXT) as appended:
            assert appended.status == 204, await appended.text()
            later_tail = appended.headers["Stream-Next-Offset"]

        assert await _gone_through(session, later, later_tail) == 410
        assert await _gone_through(session, fork, fork_tail) == 410
        async with session.get(source, params={"offset": "-1"}) as kept:
            assert (kept.status, await kept.read()) == (200, b"s1")


async def _owned_settled(client: Client) -> set[int] | None:
    """The slots the instance writes, None while a write could still meet a slot moving."""
    ownership = (await (await client.get("/readyz")).json())["checks"]["ownership"]
    slots = ownership.get("owned_slots")
    settled = slots is not None and ownership.get("unroutable_slots") == []
    return {int(slot) for slot in slots} if settled else None


async def _split(clients: tuple[Client, Client], slots: int) -> tuple[set[int], set[int]]:
    """The slots each instance writes, once both write some, together all, none moving."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        first, second = [await _owned_settled(client) for client in clients]
        if first and second and len(first | second) == slots:
            return first, second
        if loop.time() > deadline:
            raise AssertionError(f"slots never split between two instances: {first}, {second}")
        await asyncio.sleep(0.2)


async def _made(clients: tuple[Client, ...], path: str, **kwargs: Any) -> None:
    """PUT `path` through the instance writing its slot: either answers 503 for a slot the
    other writes (their URLs lead nowhere), nothing written."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while True:
        for client in clients:
            response = await client.put(path, **kwargs)
            if response.status != 503:
                assert response.status == 201, await response.text()
                return
        assert loop.time() < deadline, await response.text()
        await asyncio.sleep(0.2)


@dataclass(frozen=True)
class _NotedBeforeTheMove:
    """The slots as a pass found them before some moved to another instance: all its own."""

    writers: SlotWriting

    @property
    def limits(self) -> WriterLimits:
        return self.writers.limits

    def accepting(self, slot: int) -> bool:
        return True

    def learning(self, slot: int) -> bool:
        return self.writers.learning(slot)

    def mark(self, slot: int) -> int:
        return self.writers.mark(slot)

    def enqueue(self, slot: int, batch: WriteBatch) -> WriteBatch:
        return self.writers.enqueue(slot, batch)


async def test_a_stream_whose_trim_fails_is_counted_and_the_pass_goes_on(
    aiohttp_client: ClientFactory, make_settings: SettingsFactory, unique: str
) -> None:
    """A slot can move to another instance between a pass's note of its streams and their
    trims: such a trim fails, is counted, and the streams and buckets after it are trimmed."""
    settings = make_settings(age_retention_interval_ms=600_000, owner_session_timeout_ms=6000)
    # URLs of their own (never forwarded to: each stream is written through its owner).
    one = replace(settings, advertise_url="http://one.invalid")
    first = await aiohttp_client(create_app(one))
    two = replace(
        settings, catalog_dir=f"{settings.catalog_dir}-2", advertise_url="http://two.invalid"
    )
    second = await aiohttp_client(create_app(two))
    for client in (first, second):
        await wait_ready(client)
    mine, theirs = await _split((first, second), settings.write_slots)
    assert mine
    assert theirs

    def slot(bucket: str, stream_id: str) -> int:
        partition = partition_for(stream_key(stream_id), settings.partitions)
        return SlotMap(settings.topic_prefix, settings.write_slots).of_stream(bucket, partition)

    # Buckets in that order: the one whose stream's slot moved is passed first.
    moved_bucket, moved_id = _named("am", unique, lambda b, s: slot(b, s) in theirs)
    later_bucket, later_id = _named("az", unique, lambda b, s: slot(b, s) in mine)
    tails = {}
    for client, bucket, stream_id in (
        (second, moved_bucket, moved_id),
        (first, later_bucket, later_id),
    ):
        await _made((first, second), f"/{bucket}", json=_retention(HOUR_MS))
        await _made((client,), f"/{bucket}/{stream_id}", headers=TEXT)
        tails[bucket] = await _append(client, f"/{bucket}/{stream_id}", b"old")

    retention = first.app[PARTS].age_retention
    now = retention.clock()
    retention.clock = lambda: now + 2 * HOUR_MS  # every message is past the max age
    retention.writers = _NotedBeforeTheMove(retention.writers)
    assert await retention.pass_once() == 1
    failures = first.app[PARTS].metrics.registry.get_sample_value(
        "durable_kafka_age_retention_failures_total"
    )
    assert failures == 1
    gone = await first.get(f"/{later_bucket}/{later_id}", params={"offset": "-1"})
    assert (gone.status, gone.headers[EARLIEST]) == (410, tails[later_bucket])
    assert await _read(second, f"/{moved_bucket}/{moved_id}") == (200, b"old")
