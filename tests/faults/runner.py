"""One fault scenario: two adapters on the 3-broker cluster under mixed load, tiering to the
suite's MinIO as they go, a fault, then the history checked against Kafka and the cold tier,
and each instance against a fresh third one."""

from __future__ import annotations

import asyncio
import bisect
import json
import random
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from devstack import cluster
from devstack.process import free_port
from tests.cluster import OWNER_SESSION_MS, cluster_env, partitions, slot_of, until_owned
from tests.faults import store
from tests.faults.check import Report, check
from tests.faults.cold_log import cold_tier, tier_ranges
from tests.faults.history import ColdTier, History, LogRecord, Outcome, View, Write
from tests.faults.instances import Instance
from tests.faults.kafka_log import committed_log, log_starts
from tests.faults.kafka_probe import GroupProbe, KafkaProbe, group_probe, longest_joint, probe
from tests.faults.load import AGED_BUCKET, DEFAULT_BUCKET, FORKS_BUCKET, Load, view
from tests.faults.recovery import recovery
from tests.faults.relay import Relay
from topology.naming import (
    InternalTopic,
    bucket_topic,
    internal_topic,
    owners_group,
    slots_topic,
    writer_transactional_id,
)
from topology.placement import partition_for

BUSY = "busy"  # the stream with the most load: its slot, leader and coordinator are the targets
WARMUP_S = 3.0
AFTER_S = 5.0
# How long an instance's view may lag the log's once the load has stopped (its follower).
CONVERGE_S = 15.0
# How long the aged bucket's streams may take to be trimmed whole once the load has stopped:
# their `max_age_ms`, a few retention passes, and a loaded machine's slowness.
AGED_OUT_S = 30.0
# Tiering on, small: a range is cut once 256 bytes of values (a dozen of the load's messages)
# lie behind a partition's head, a pass every second, so reads, bootstraps and faults cross the
# hot/cold seam within a scenario; the collectors' grace (and a snapshot's, before Kafka is
# freed below it) as short as `kafka_timeout_ms` (3 s) allows, so they collect while the load
# runs too; catch-up reads of 4 KiB pages, so one read through a stream crosses several ranges;
# an age-retention pass every second (the `aged` bucket's streams keep 4 s).
TIERING = {
    "DURABLE_KAFKA_TIER_AFTER_BYTES": "256",
    "DURABLE_KAFKA_TIER_AFTER_MS": "0",
    "DURABLE_KAFKA_TIER_INTERVAL_MS": "1000",
    "DURABLE_KAFKA_SNAPSHOT_GC_GRACE_MS": "30000",
    "DURABLE_KAFKA_SNAPSHOT_GC_INTERVAL_MS": "5000",
    "DURABLE_KAFKA_READ_CHUNK_BYTES": "4096",
    "DURABLE_KAFKA_AGE_RETENTION_INTERVAL_MS": "1000",
}


@dataclass
class Context:
    cluster: cluster.KafkaCluster
    prefix: str
    instances: dict[str, Instance]
    load: Load
    session: aiohttp.ClientSession
    relay: Relay | None = None  # what `b` advertises, for faults of its peers' reach
    notes: dict[str, str] = field(default_factory=dict)  # a fault's own measures, for its line
    # The `exercised` counts the fault must have made grow (`Report.require`).
    needs: set[str] = field(default_factory=set)

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def busy_partition(self) -> tuple[str, int]:
        return bucket_topic(self.prefix, "_default"), partition_for(
            BUSY.encode(), partitions(self.prefix)
        )

    async def owner_of_busy_slot(self) -> str:
        return (await self.busy_slot_owner())[0]

    async def busy_slot_owner(self) -> tuple[str, int]:
        """The instance owning the busiest stream's slot, and which of its workers does (0
        for a single process), once the live instances' workers own every slot between them."""
        split = await until_owned(self.session, dict.fromkeys(self.worker_urls()))
        slot = slot_of(self.prefix, BUSY)
        return next(
            (i.name, index)
            for i in self.live()
            for index, url in enumerate(i.worker_urls())
            if slot in split[url]
        )

    def worker_urls(self) -> list[str]:
        """Where each worker of the live instances answers for its own slots (`/readyz`)."""
        return [url for i in self.live() for url in i.worker_urls()]

    def live(self) -> list[Instance]:
        return [self.instances[name] for name in LIVE if name in self.instances]

    @property
    def store(self) -> store.Store:
        return store.of(self.home)

    @property
    def home(self) -> Path:
        return self.cluster.home.parent


Fault = Callable[[Context], Awaitable[None]]
LIVE = ("a", "b", "c")  # the instances under test, in order; `c` only when a fault needs three


def adapter_env(bootstrap: str, prefix: str, home: Path, cold: store.Store) -> dict[str, str]:
    return cluster_env(bootstrap, prefix, home) | {
        "DURABLE_KAFKA_LONG_POLL_TIMEOUT_MS": "2000",
        "DURABLE_KAFKA_SSE_MAX_DURATION_MS": "5000",
        **cluster.TOPIC_ENV,
        **TIERING,
        **cold.env(s3_bucket(prefix)),
    }


def s3_bucket(prefix: str) -> str:
    """A scenario's own S3 bucket (S3 names: lower case, digits, dots, hyphens)."""
    return "fault-" + prefix.rstrip(".").lower()


async def run(
    name: str,
    fault: Fault,
    home: Path,
    seed: int,
    load_s: float = WARMUP_S,
    faulty: Mapping[str, str] | None = None,
    workers: int | None = None,
    three: bool = False,
    relayed: bool = False,
    wide: bool = True,
) -> Report:
    """`faulty`: more environment of the adapters under test (the fresh one never has it),
    such as test-only faults (`tests.faulty_adapter.fault_env`); `workers`: theirs (`serve
    --workers`; default `TEST_ADAPTER_WORKERS`, else 1). The fresh one is always a single
    process. `three`: a third instance `c` under test; `relayed`: `b` advertises a relay's
    address (`ctx.relay`); `wide`: the load also forks across buckets, trims, fences and writes
    a bucket with age retention, and a plain client measures Kafka's own unavailability."""
    layout = cluster.layout(home / "cluster")
    prefix = f"f{name.replace('_', '')}{uuid.uuid4().hex[:6]}."
    work = home / prefix.rstrip(".")
    work.mkdir(parents=True)
    env = adapter_env(layout.bootstrap_servers, prefix, work, store.of(home))
    names = LIVE if three else LIVE[:2]
    instances = {n: Instance(n, env | dict(faulty or {}), work / f"{n}.log") for n in names}
    for instance in instances.values():
        instance.workers = workers or instance.workers
    instances["fresh"] = Instance("fresh", env, work / "fresh.log", workers=1)
    relay = Relay(instances["b"].port) if relayed else None
    if relay is not None:
        instances["b"].env["DURABLE_KAFKA_ADVERTISE_URL"] = relay.url
        await relay.open()
    async with aiohttp.ClientSession() as session:
        try:
            scenario = Scenario(layout, prefix, instances, relay, wide)
            return await _run(name, fault, scenario, session, seed, load_s)
        finally:
            for instance in instances.values():
                await asyncio.to_thread(instance.stop)
            if relay is not None:
                await relay.close()


@dataclass
class Scenario:
    layout: cluster.KafkaCluster
    prefix: str
    instances: dict[str, Instance]
    relay: Relay | None
    wide: bool = True


async def _run(
    name: str,
    fault: Fault,
    scenario: Scenario,
    session: aiohttp.ClientSession,
    seed: int,
    load_s: float,
) -> Report:
    layout, prefix, instances = scenario.layout, scenario.prefix, scenario.instances
    live = [instances[n] for n in LIVE if n in instances]
    # Together: on a fresh prefix of a 3-broker cluster one creates the internal topics while
    # the other may ask a broker that has not learnt of them yet (retried, never fatal).
    for instance in live:
        instance.start()
    for instance in live:
        await asyncio.to_thread(instance.wait_ready)
    load = Load(session, {i.name: i.base for i in live}, random.Random(seed))
    ctx = Context(layout, prefix, instances, load, session, scenario.relay)
    await ctx.owner_of_busy_slot()
    streams = [BUSY, "plain", "seq"]
    for stream in streams:
        await load.create(stream)
    for work in (
        load.producer(BUSY, "p1"),
        load.producer(BUSY, "p2"),
        load.plain(BUSY),
        load.plain("plain"),
        load.sequenced("seq"),
        load.closer(),
        load.long_poll(BUSY),
        load.sse(BUSY),
        load.publisher(),
        load.forker(),
        load.catchup([BUSY, "plain", "seq", "forksrc"]),
        load.bootstrapper([BUSY, "snap"]),
    ):
        load.spawn(work)
    kafka = _kafka_probe(ctx) if scenario.wide else None
    group = _group_probe(ctx) if scenario.wide else None
    if scenario.wide:
        for work in (load.cross_forker(), load.trimmer(), load.fencer(), load.aged_writer()):
            load.spawn(work)
    for started in (kafka, group):
        if started is not None:
            started.start()
    try:
        try:
            await asyncio.sleep(load_s)
            marks = {i.name: i.log.stat().st_size for i in ctx.live()}
            fault_at = load.history.now()
            await fault(ctx)
            await asyncio.sleep(AFTER_S)
        finally:
            for started in (kafka, group):
                if started is not None:
                    await asyncio.to_thread(started.stop)
        for instance in ctx.live():  # a process that died is the finding, not what follows it
            ended = instance.exited()
            assert ended is None, ended
        await load.finish(120)
    except BaseException:
        await load.abandon()  # no worker outlives the scenario's session
        raise
    # Up to the load's end: the fresh instance and the stops to come move slots again.
    since_fault = [line for i in ctx.live() for line in _lines_since(i.log, marks[i.name])]
    views = await _views(ctx, sorted(load.streams))
    epochs = {b: await _epoch(ctx, b) for b in sorted(load.buckets)}
    for instance in instances.values():
        await asyncio.to_thread(instance.stop)
    log, cold, starts = await asyncio.to_thread(_gathered, layout, prefix, epochs)
    history = load.history
    names = {w.stream for w in history.writes} | {e.stream for e in history.lifecycle}
    report = check(name, history, log, views, "fresh", _starts_of(prefix, names, starts), cold)
    report.unavailable_by_slot = unavailable_by_slot(prefix, history.writes)
    exercised = _exercised(history) | recovery(since_fault, history.writes, fault_at).counts()
    report.notes["exercised"] = ",".join(f"{k}:{n}" for k, n in exercised.items())
    report.require(exercised, sorted(ctx.needs))
    if kafka is not None and group is not None:
        report.kafka_unavailable_s = longest_joint(kafka.commits, group.commits)
        report.notes |= {
            "kafka_transactions": f"{kafka.longest_unavailable():.1f}s",
            "kafka_group": f"{group.longest_unavailable():.1f}s",
        }
    report.notes |= ctx.notes
    return report


def _exercised(history: History) -> dict[str, int]:
    """How many trims, fences and forks into another bucket were acknowledged, and appends
    to the bucket with age retention: the load reached them (a line without them would check
    nothing of theirs)."""
    acked = Outcome.ACK
    return {
        "trims": sum(t.outcome is acked for t in history.trims),
        "fences": sum(outcome is acked for outcome in history.fences),
        "bucket_forks": sum(
            f.outcome is acked and f.stream.startswith(f"{FORKS_BUCKET}/") for f in history.forks
        ),
        "aged_appends": sum(
            w.outcome is acked and w.stream.startswith(f"{AGED_BUCKET}/") for w in history.writes
        ),
    }


def _lines_since(log: Path, offset: int) -> list[str]:
    """The lines an instance logged past `offset` (its log is appended to across restarts)."""
    with log.open("rb") as found:
        found.seek(offset)
        return found.read().decode(errors="replace").splitlines()


def _kafka_probe(ctx: Context) -> KafkaProbe:
    """A plain transactional client on the busiest stream's partition and its slot's
    transaction coordinator, for Kafka's own share of an outage."""
    topic, partition = ctx.busy_partition()
    slot_tid = writer_transactional_id(ctx.prefix, slot_of(ctx.prefix, BUSY))
    return probe(ctx.bootstrap, topic, partition, slot_tid)


def _group_probe(ctx: Context) -> GroupProbe:
    """A group of its own that the owners' group's coordinator keeps, with their session."""
    return group_probe(
        ctx.bootstrap, slots_topic(ctx.prefix), owners_group(ctx.prefix), OWNER_SESSION_MS
    )


def unavailable_by_slot(prefix: str, writes: list[Write]) -> dict[int, float]:
    """Per write slot that was written, the longest a write to it went unacknowledged: from a
    failed attempt until the next acknowledged write of the slot completed (the end of the
    history if none did). A slot written now and then is not unavailable between writes."""
    by_slot: dict[int, list[Write]] = defaultdict(list)
    for write in writes:
        bucket, _, stream_id = write.stream.rpartition("/")
        by_slot[slot_of(prefix, stream_id, bucket or DEFAULT_BUCKET)].append(write)
    return {slot: _longest_wait(found) for slot, found in sorted(by_slot.items())}


def _longest_wait(writes: list[Write]) -> float:
    acks = sorted(w.completed for w in writes if w.outcome is Outcome.ACK)
    end = max(w.completed for w in writes)
    waits = [
        (acks[i] if (i := bisect.bisect_left(acks, w.invoked)) < len(acks) else end) - w.invoked
        for w in writes
        if w.outcome is not Outcome.ACK
    ]
    return max(waits, default=0.0)


def _starts_of(prefix: str, names: set[str], starts: dict[str, dict[int, int]]) -> dict[str, int]:
    """Per stream (`id` of the default bucket, `bucket/id` of another), its partition's log
    start."""
    found = {}
    for name in names:
        bucket, _, stream_id = name.rpartition("/")
        partition = partition_for(stream_id.encode(), partitions(prefix))
        found[name] = starts.get(bucket or DEFAULT_BUCKET, {}).get(partition, 0)
    return found


async def _epoch(ctx: Context, bucket: str) -> int | None:
    """A bucket's `created_at_ms` (its incarnation) as the fresh instance has it; None if
    the bucket does not exist."""
    answer = await ctx.load.call("GET", f"{ctx.instances['fresh'].base}/{bucket}", {})
    return int(json.loads(answer.body)["created_at_ms"]) if answer.status == 200 else None


def _gathered(
    layout: cluster.KafkaCluster, prefix: str, epochs: dict[str, int | None]
) -> tuple[list[LogRecord], ColdTier, dict[str, dict[int, int]]]:
    """Every bucket's log in Kafka and in the cold tier (its current incarnation's ranges),
    and each bucket partition's log start."""
    bootstrap = layout.bootstrap_servers
    ranges = tier_ranges(bootstrap, internal_topic(prefix, InternalTopic.TIER))
    log: list[LogRecord] = []
    cold = ColdTier()
    starts: dict[str, dict[int, int]] = {}
    for bucket, epoch in epochs.items():
        if epoch is None:
            continue
        topic = bucket_topic(prefix, bucket)
        label = "" if bucket == DEFAULT_BUCKET else f"{bucket}/"
        log += committed_log(bootstrap, topic, label)
        starts[bucket] = log_starts(bootstrap, topic)
        mine = [r for r in ranges if r.topic == topic and r.bucket_created_at_ms == epoch]
        found = cold_tier(store.of(layout.home.parent), s3_bucket(prefix), mine, label)
        cold.records.extend(found.records)
        cold.missing.extend(found.missing)
    return log, cold, starts


async def _views(ctx: Context, streams: list[str]) -> dict[str, dict[str, View]]:
    """A fresh instance's view of every stream, replayed from scratch, then each instance's.

    An instance that is not a stream's owner learns the owner's last commits through its
    follower a moment later (a poll, more on a loaded machine), so an instance whose view
    differs is asked again for up to `CONVERGE_S`: a lag converges, a divergence stays.
    """
    await until_owned(ctx.session, dict.fromkeys(ctx.worker_urls()))
    fresh = ctx.instances["fresh"]
    # Its port picked now, not at the scenario's start a minute or more ago: on a machine
    # other test runs share, one of theirs may have taken that port meanwhile.
    fresh.port = free_port()
    fresh.start()
    await asyncio.to_thread(fresh.wait_ready)
    reference = {s: await view(ctx.load, fresh.base, s) for s in streams}
    for stream in (s for s in streams if s.startswith(f"{AGED_BUCKET}/")):
        reference[stream] = await _aged_out(ctx, fresh.base, stream)
    found = {i.name: await _converged(ctx, i.base, streams, reference) for i in ctx.live()}
    return found | {"fresh": reference}


async def _aged_out(ctx: Context, base: str, stream: str) -> View:
    """A stream of the aged bucket once age retention has trimmed all of it (it moves on as
    its messages age, after the load too), or as it is after `AGED_OUT_S`."""
    deadline = asyncio.get_running_loop().time() + AGED_OUT_S
    while True:
        seen = await view(ctx.load, base, stream)
        whole = seen.earliest is not None and seen.earliest == seen.next_offset
        if whole or seen.status != 200 or asyncio.get_running_loop().time() > deadline:
            return seen
        await asyncio.sleep(0.5)


async def _converged(
    ctx: Context, base: str, streams: list[str], reference: dict[str, View]
) -> dict[str, View]:
    deadline = asyncio.get_running_loop().time() + CONVERGE_S
    while True:
        seen = {s: await view(ctx.load, base, s) for s in streams}
        if seen == reference or asyncio.get_running_loop().time() > deadline:
            return seen
        await asyncio.sleep(0.5)
