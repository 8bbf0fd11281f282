"""A rolling upgrade across a record format change: two instances of the previous release under
load, rolled one at a time to this head, then the newest format level switched on with
`durable-kafka upgrade finalize`. No instance stops, and the recorded history, checked against
the bucket topic read by a fresh read_committed consumer and against a fresh instance, shows
nothing lost, duplicated or reordered.

Level 7 changes what is written, not a format: a pure append commits its data record alone, its
stream's StreamMeta left to the slot's checkpoint. So the meta topic itself is checked: while the
previous release runs beside the head, every append to a stream either one owns writes its
StreamMeta (level 6, which the previous release follows), and once level 7 is in force a
stream appended to again and again takes fewer StreamMeta records than appends.

Long (a few minutes: five process starts beside the load), so `make upgrades` runs it, not
`make test`."""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

from tests.adapter_process import SCRIPT
from tests.cluster import cluster_env, sample_at, stream_in, until_owned
from tests.faults.check import check
from tests.faults.history import Outcome, View
from tests.faults.instances import Instance
from tests.faults.kafka_log import committed_log
from tests.faults.load import DEFAULT_BUCKET, Load, view
from tests.upgrades import previous_release
from topology.internal_records import FORMAT_LEVEL_KEY, stream_meta_key
from topology.naming import InternalTopic, bucket_topic, internal_topic

pytestmark = [pytest.mark.integration, pytest.mark.faults]

BUSY = "busy"
JSON = {"Content-Type": "application/json"}
UNDER_LOAD_S = 4.0
PROBE_APPENDS = 20  # acknowledged appends, one at a time, to each stream whose records are counted


def _upgrade(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [SCRIPT, "upgrade", *args],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _status(env: dict[str, str]) -> dict[str, Any]:
    done = _upgrade(env, "status", "--json")
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _meta_records(bootstrap: str, topic: str) -> list[tuple[str, bytes]]:
    """Each meta-topic record in log order, its key and value (b"" for a tombstone); from a
    fresh read_committed consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "format-checker-never-joins",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    found: list[tuple[str, bytes]] = []
    try:
        for _ in range(100_000):
            message = consumer.poll(2.0)
            if message is None or message.error() is not None:
                break
            found.append(((message.key() or b"").decode(), message.value() or b""))
    finally:
        consumer.close()
    return found


def _formats(records: list[tuple[str, bytes]]) -> set[str]:
    """The kinds and format bytes of these meta records (`stream:06`), tombstones and the
    format-level record left out."""
    return {
        f"{key.partition(':')[0]}:{value[:1].hex()}"
        for key, value in records
        if value and key != FORMAT_LEVEL_KEY
    }


def _meta_count(records: list[tuple[str, bytes]], stream: str) -> int:
    """How many StreamMeta records of the default bucket's `stream` these are."""
    key = stream_meta_key(DEFAULT_BUCKET, stream)
    return sum(1 for found, value in records if found == key and value)


async def _roll(load: Load, instances: dict[str, Instance], name: str) -> None:
    """Stop one instance as the chart does (SIGTERM, clients sent elsewhere), start this head
    in its place with the same settings and port, and send clients to it again once ready."""
    old = instances[name]
    del load.bases[name]
    await asyncio.to_thread(old.stop)
    assert old.proc is not None
    assert old.proc.returncode == 0, old.exited()  # a clean stop, not a crash on a record
    new = Instance(name, old.env, old.log, port=old.port, workers=1)
    new.start()
    instances[name] = new
    await asyncio.to_thread(new.wait_ready)
    load.bases[name] = new.base


async def _until_level(load: Load, instance: Instance, level: int, within_s: float = 30) -> None:
    """Wait until the instance writes its state records in format `level` (its metric)."""
    ops = instance.ops_url()
    for _ in range(int(within_s / 0.2)):
        if await sample_at(load.session, ops, "durable_kafka_format_level", {}) == level:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"{instance.name} did not write format level {level} in {within_s} s")


async def _converged(
    load: Load, base: str, streams: list[str], reference: dict[str, View]
) -> dict[str, View]:
    """An instance's view of every stream, asked again for a while if it differs from the
    fresh one's (its follower may lag the owner's last commits a moment: that converges)."""
    for _ in range(30):
        seen = {s: await view(load, base, s) for s in streams}
        if seen == reference:
            break
        await asyncio.sleep(0.5)
    return seen


async def _probes(
    load: Load, instances: dict[str, Instance], prefix: str, stem: str
) -> dict[str, str]:
    """For each instance, a new stream of `_default` whose write slot it owns now, created and
    appended to `PROBE_APPENDS` times one after another through its owner (each append its own
    commit): instance name -> stream. Every attempt joins the history the checker reads."""
    split = await until_owned(load.session, {i.base: None for i in instances.values()})
    probes = {
        name: stream_in(prefix, split[instance.base], f"{stem}{name}")
        for name, instance in instances.items()
    }
    for name, stream in probes.items():
        await load.create(stream, name)
        acknowledged = 0
        for _ in range(PROBE_APPENDS * 5):
            written = await load.write(stream, load.fresh(f"{stream}."), instance=name)
            acknowledged += written.outcome is Outcome.ACK
            if acknowledged == PROBE_APPENDS:
                break
        assert acknowledged == PROBE_APPENDS, f"{stream}: {acknowledged} appends acknowledged"
    return probes


def _no_exit(instances: dict[str, Instance]) -> None:
    for instance in instances.values():
        ended = instance.exited()
        assert ended is None, ended


@pytest.mark.timeout(900)
async def test_two_instances_of_the_previous_format_rolled_to_head_then_finalized(
    kafka_bootstrap: str, unique: str, tmp_path: Path
) -> None:
    previous = await asyncio.to_thread(previous_release.script)
    prefix = f"roll{unique}."
    env = cluster_env(kafka_bootstrap, prefix, tmp_path) | {
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "2000",
    }
    instances = {
        name: Instance(
            name,
            env | {"DURABLE_KAFKA_INSTANCE_ID": name},
            tmp_path / f"{name}.log",
            workers=1,
            script=previous,
        )
        for name in ("a", "b")
    }
    fresh = Instance("fresh", env | {"DURABLE_KAFKA_INSTANCE_ID": "fresh"}, tmp_path / "f.log")
    fresh.workers = 1
    async with aiohttp.ClientSession() as session:
        try:
            for instance in instances.values():
                instance.start()
            for instance in instances.values():
                await asyncio.to_thread(instance.wait_ready)
            load = Load(session, {n: i.base for n, i in instances.items()}, random.Random(7))
            for stream in (BUSY, "plain", "seq"):
                await load.create(stream)
            for work in (
                load.producer(BUSY, "p1"),
                load.plain(BUSY),
                load.plain("plain"),
                load.sequenced("seq"),
                load.closer(),
                load.long_poll(BUSY),
                load.forker(),
                load.catchup([BUSY, "plain", "seq"]),
            ):
                load.spawn(work)
            await asyncio.sleep(UNDER_LOAD_S)

            await _roll(load, instances, "a")
            await asyncio.sleep(UNDER_LOAD_S)  # head beside the previous release, under load
            _no_exit(instances)
            status = await asyncio.to_thread(_status, env)
            assert status["in_force"] == 6
            by_id = {i["instance_id"]: i for i in status["instances"]}
            assert (by_id["a"]["reads"], by_id["a"]["writes"]) == (7, 6)
            assert (by_id["b"]["reads"], by_id["b"]["writes"]) == (6, 6)
            assert not by_id["b"]["predates_levels"]
            refused = await asyncio.to_thread(_upgrade, env, "finalize")
            assert refused.returncode == 1, refused.stdout
            assert "b (reads 6)" in refused.stderr
            # Level 6's records, which the previous release reads, are written beside it.
            retention = json.dumps({"retention": {"max_age_ms": 3_600_000}})
            async with session.put(
                f"{instances['a'].base}/aged", data=retention, headers=JSON
            ) as answer:
                assert answer.status == 201
            async with session.put(f"{instances['a'].base}/other") as answer:
                assert answer.status == 201
            cross = {"Stream-Forked-From": "/_default/plain"} | JSON
            async with session.put(f"{instances['a'].base}/other/f", headers=cross) as answer:
                assert answer.status == 201
            mixed = await _probes(load, instances, prefix, "mixed")
            # The previous release follows the head's appends from what it writes.
            for stream in mixed.values():
                shown = {stream: await view(load, instances["a"].base, stream)}
                assert await _converged(load, instances["b"].base, [stream], shown) == shown

            await _roll(load, instances, "b")
            status = await asyncio.to_thread(_status, env)
            assert (status["in_force"], status["can_finalize"]) == (6, True)
            done = await asyncio.to_thread(_upgrade, env, "finalize")
            assert done.returncode == 0, done.stderr
            assert (await asyncio.to_thread(_status, env))["in_force"] == 7
            # Each instance follows the level record a moment later; then pure appends under
            # load commit their data records alone.
            for instance in instances.values():
                await _until_level(load, instance, 7)
            alone = await _probes(load, instances, prefix, "alone")
            _no_exit(instances)
            await load.finish(120)

            fresh.start()
            await asyncio.to_thread(fresh.wait_ready)
            streams = sorted(load.streams)
            reference = {s: await view(load, fresh.base, s) for s in streams}
            views = {"fresh": reference} | {
                name: await _converged(load, instance.base, streams, reference)
                for name, instance in instances.items()
            }
            _no_exit(instances)
        finally:
            for instance in (*instances.values(), fresh):
                await asyncio.to_thread(instance.stop)
    for name in ("a", "b"):
        assert "unknown format byte" not in (tmp_path / f"{name}.log").read_text()
    records = _meta_records(kafka_bootstrap, internal_topic(prefix, InternalTopic.META))
    levels = [value for key, value in records if key == FORMAT_LEVEL_KEY]
    assert [json.loads(value) for value in levels] == [{"level": 7}]
    switched = records.index((FORMAT_LEVEL_KEY, levels[0]))
    # Level 7 writes level 6's formats: no record the previous release could not read.
    assert _formats(records) == {"bucket:02", "stream:06"}
    for stream in mixed.values():  # its creation, then one per append, before the switch
        assert _meta_count(records[:switched], stream) >= PROBE_APPENDS + 1, stream
    for stream in alone.values():  # its creation, then a checkpoint's now and then
        assert 1 <= _meta_count(records[switched:], stream) < PROBE_APPENDS, stream
    log = committed_log(kafka_bootstrap, bucket_topic(prefix, DEFAULT_BUCKET))
    report = check("rolling format upgrade", load.history, log, views, "fresh")
    assert report.ok, report.details()
    assert report.acknowledged > 0
