"""A rolling upgrade across a record format change: two instances of the previous release under
load, rolled one at a time to this head, then the newest format level switched on with
`durable-kafka upgrade finalize`. No instance stops, and the recorded history, checked against
the bucket topic read by a fresh read_committed consumer and against a fresh instance, shows
nothing lost, duplicated or reordered.

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
from tests.cluster import cluster_env
from tests.faults.check import check
from tests.faults.history import View
from tests.faults.instances import Instance
from tests.faults.kafka_log import committed_log
from tests.faults.load import DEFAULT_BUCKET, Load, view
from tests.upgrades import previous_release
from topology.internal_records import FORMAT_LEVEL_KEY
from topology.naming import InternalTopic, bucket_topic, internal_topic

pytestmark = [pytest.mark.integration, pytest.mark.faults]

BUSY = "busy"
JSON = {"Content-Type": "application/json"}
UNDER_LOAD_S = 4.0


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


def _meta_formats(bootstrap: str, topic: str) -> list[str]:
    """Each meta-topic record in log order: its key's kind and format byte (`stream:06`), or
    the format-level key; from a fresh read_committed consumer."""
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
    found: list[str] = []
    try:
        for _ in range(10_000):
            message = consumer.poll(2.0)
            if message is None or message.error() is not None:
                break
            key = (message.key() or b"").decode()
            value = message.value()
            if key == FORMAT_LEVEL_KEY:
                found.append(key)
            elif value:
                found.append(f"{key.partition(':')[0]}:{value[:1].hex()}")
    finally:
        consumer.close()
    return found


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
        "DURABLE_KAFKA_COLD_DIR_SHARED": "true",  # one folder, a release without its marker
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
            assert status["in_force"] == 5
            by_id = {i["instance_id"]: i for i in status["instances"]}
            assert (by_id["a"]["reads"], by_id["a"]["writes"]) == (6, 5)
            assert (by_id["b"]["reads"], by_id["b"]["predates_levels"]) == (5, True)
            refused = await asyncio.to_thread(_upgrade, env, "finalize")
            assert refused.returncode == 1, refused.stdout
            assert "b (reads 5)" in refused.stderr
            retention = json.dumps({"retention": {"max_age_ms": 3_600_000}})
            async with session.put(
                f"{instances['a'].base}/aged", data=retention, headers=JSON
            ) as answer:
                assert answer.status == 409
                assert (await answer.json())["error"]["code"] == "format_not_finalized"
            async with session.put(f"{instances['a'].base}/other") as answer:
                assert answer.status == 201  # a plain bucket: level 5 holds it
            cross = {"Stream-Forked-From": "/_default/plain"} | JSON
            async with session.put(f"{instances['a'].base}/other/f", headers=cross) as answer:
                assert answer.status == 409
                assert (await answer.json())["error"]["code"] == "format_not_finalized"

            await _roll(load, instances, "b")
            status = await asyncio.to_thread(_status, env)
            assert (status["in_force"], status["can_finalize"]) == (5, True)
            done = await asyncio.to_thread(_upgrade, env, "finalize")
            assert done.returncode == 0, done.stderr
            assert (await asyncio.to_thread(_status, env))["in_force"] == 6
            for _ in range(100):  # each instance follows the level record a moment later
                async with session.put(
                    f"{instances['b'].base}/aged", data=retention, headers=JSON
                ) as answer:
                    if answer.status in (200, 201):
                        break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"age retention still refused: {answer.status}")
            await asyncio.sleep(UNDER_LOAD_S)  # the newest formats written under load
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
    formats = _meta_formats(kafka_bootstrap, internal_topic(prefix, InternalTopic.META))
    switched = formats.index(FORMAT_LEVEL_KEY)
    assert "stream:06" not in formats[:switched]
    assert "stream:06" in formats[switched:]  # written once the level was in force
    log = committed_log(kafka_bootstrap, bucket_topic(prefix, DEFAULT_BUCKET))
    report = check("rolling format upgrade", load.history, log, views, "fresh")
    assert report.ok, report.details()
    assert report.acknowledged > 0
