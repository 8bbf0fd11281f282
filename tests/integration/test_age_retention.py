"""Age retention over HTTP on the real broker: a bucket's `{"retention": {"max_age_ms": N}}`
makes its streams' messages older than N gone (410 with `Stream-Earliest-Offset`) by the
background pass, while a snapshot newer than the cut keeps `/bootstrap` whole;
`PUT /{bucket}/config` changes it, conditionally with `If-Match` (of two writers with one
ETag exactly one wins), and the configuration survives a restart; bad bodies are 400."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import ClientResponse

from adapter.app import create_app
from tests.cluster import two_instances
from tests.conftest import Client, ClientFactory, SettingsFactory, wait_ready
from tests.integration.test_mounts import _fill_few
from tests.integration.test_retention import _bootstrap, _pass
from topology.wire import decode_token

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
