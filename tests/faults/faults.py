"""The faults, one per scenario; each returns once the system had the chance to recover."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from adapter.log.writer import COMMIT_ATTEMPTS, LEARNING_PAUSE_S, LEARNING_TIMEOUTS
from adapter.tier import chunks
from devstack import cluster, kafka
from devstack.process import port_open
from tests.cluster import slot_of, stream_in, until_owned
from tests.faults.load import DEFAULT_BUCKET, REQUEST_TIMEOUT_S, Answer
from tests.faults.recovery import in_flight
from tests.faults.runner import BUSY, Context, Fault, s3_bucket
from tests.faulty_adapter import fault_env
from topology.naming import InternalTopic, bucket_topic, internal_topic, writer_transactional_id

DOWN_S = 8.0
# Past the brokers' default broker.session.timeout.ms (9 s): the controller fences the node.
PAUSED_S = 14.0
# Past the owners' session timeout (6 s in tests/cluster.py): the slots move.
ADAPTER_PAUSED_S = 12.0
KAFKA_TIMEOUT_S = 3.0  # the adapters' kafka_timeout_ms (tests/cluster.py)
# Past kafka_timeout_ms four times: every S3 call under way times out, and some more.
S3_PAUSED_S = 12.0
# How long a writer tries to learn a commit's unknown outcome before answering 504
# (`learning_budget_s` in adapter/log/writer.py): 3 timeouts and a pause, 10 s here.
LEARNING_BUDGET_S = LEARNING_TIMEOUTS * KAFKA_TIMEOUT_S + LEARNING_PAUSE_S
FLAP_FOR_S = 3 * LEARNING_BUDGET_S
# Past a commit's attempts (each a timeout): its outcome is unknown, to be learned.
FLAP_DOWN_S = COMMIT_ATTEMPTS * KAFKA_TIMEOUT_S + 2.0
FLAP_UP_S = 1.0
PARTITIONED_S = 12.0  # past the advertised URL's 3 failed checks, and the slots' move
REJOIN_S = 3.0  # for the instance back to join the owners' group again
FORWARD_SAMPLE_S = 4.0  # of forwarded appends measured before the pause
SLOWER = 3.0  # how much slower forwards to a healthy owner may get while another is paused
RECREATED = "rebucket"  # the bucket `bucket_recreate` deletes and creates again
RECREATE_LOAD_S = 12.0  # of load on each incarnation
TIERED_WAIT_S = 90.0  # for the first incarnation's first chunks, at most
SPREAD = 12  # streams `adapter_kill` writes with a producer each, besides the load's
SPREAD_S = 3.0  # of their appends before the kill


async def _kill_and_restart(ctx: Context, node_id: int) -> None:
    await asyncio.to_thread(cluster.kill_node, ctx.cluster, node_id)
    await asyncio.sleep(DOWN_S)
    await asyncio.to_thread(cluster.restart_node, ctx.cluster, node_id)


async def leader_kill(ctx: Context) -> None:
    """kill -9 of the broker leading the busiest stream's partition, restarted after 8 s."""
    topic, partition = ctx.busy_partition()
    leader = await asyncio.to_thread(cluster.partition_leader, ctx.bootstrap, topic, partition)
    await _kill_and_restart(ctx, leader)


async def broker_flap(ctx: Context) -> None:
    """The busiest slot's transaction coordinator, asked again at each turn, stopped
    (SIGSTOP) past every attempt of a commit and started again (SIGCONT) for a second, over
    and over for three learning budgets: a commit left without an answer is learned through
    the coordinator that took over, which is the next one stopped, before the first is back
    in sync (a broker killed and restarted takes longer than a learning budget to return, so
    a kill could not flap this fast)."""
    tid = writer_transactional_id(ctx.prefix, slot_of(ctx.prefix, BUSY))
    deadline = time.monotonic() + FLAP_FOR_S
    while time.monotonic() < deadline:
        node = await asyncio.to_thread(cluster.transaction_coordinator, ctx.bootstrap, tid)
        cluster.pause_node(ctx.cluster, node)
        try:
            await asyncio.sleep(FLAP_DOWN_S)
        finally:
            cluster.resume_node(ctx.cluster, node)
        await asyncio.sleep(FLAP_UP_S)


async def coordinator_kill(ctx: Context) -> None:
    """kill -9 of the broker coordinating the busiest slot's transactions."""
    tid = writer_transactional_id(ctx.prefix, slot_of(ctx.prefix, BUSY))
    node = await asyncio.to_thread(cluster.transaction_coordinator, ctx.bootstrap, tid)
    await _kill_and_restart(ctx, node)


async def broker_pause(ctx: Context) -> None:
    """The busiest partition's leader SIGSTOPped past its session timeout, then resumed."""
    topic, partition = ctx.busy_partition()
    leader = await asyncio.to_thread(cluster.partition_leader, ctx.bootstrap, topic, partition)
    cluster.pause_node(ctx.cluster, leader)
    try:
        await asyncio.sleep(PAUSED_S)
    finally:
        cluster.resume_node(ctx.cluster, leader)


async def s3_kill(ctx: Context) -> None:
    """kill -9 of MinIO (the cold tier: chunks being written and read), restarted after 8 s
    on the same folder and port."""
    await asyncio.to_thread(ctx.store.kill9)
    await asyncio.sleep(DOWN_S)
    await asyncio.to_thread(ctx.store.restart)


async def s3_pause(ctx: Context) -> None:
    """MinIO SIGSTOPped past `kafka_timeout_ms` (its connections open, nothing answered: the
    S3 calls under way time out), then resumed."""
    ctx.store.pause()
    try:
        await asyncio.sleep(S3_PAUSED_S)
    finally:
        ctx.store.resume()


async def bucket_recreate(ctx: Context) -> None:
    """A bucket of its own under appends and catch-up reads, once chunks of it are stored:
    its stream deleted (the writer holds off creating it again), the bucket deleted and
    created again while appends and reads go on (404s), the stream created again by the
    writer; then more load on the new incarnation, until chunks of it are stored too."""
    load = ctx.load
    stream = f"{RECREATED}/r"
    await _until_status(lambda: load.bucket(RECREATED, "create"), 201, 409)
    load.spawn(load.recreated(stream))
    load.spawn(load.catchup([stream]))
    await asyncio.sleep(RECREATE_LOAD_S)
    await asyncio.to_thread(_until, lambda: _tiered(ctx, RECREATED, ""), TIERED_WAIT_S)
    load.held.add(stream)
    await _until_status(lambda: load.lifecycle(stream, "delete"), 200, 204, 404)
    # 409 `bucket_not_empty` while a creation of the stream is still in flight: again.
    await _until_status(lambda: load.bucket(RECREATED, "delete"), 200, 204, 404)
    await _until_status(lambda: load.bucket(RECREATED, "create"), 201, 409)
    load.held.discard(stream)
    await asyncio.sleep(RECREATE_LOAD_S)
    epoch = await _created_at(ctx, RECREATED)
    await asyncio.to_thread(_until, lambda: _tiered(ctx, RECREATED, f"{epoch}/"), TIERED_WAIT_S)


async def _created_at(ctx: Context, bucket: str) -> int:
    """The bucket's `created_at_ms` (its incarnation, in its chunks' keys)."""
    answer = await ctx.load.call("GET", f"{ctx.live()[0].base}/{bucket}", {})
    assert answer.status == 200, f"GET /{bucket}: {answer.status}"
    return int(json.loads(answer.body)["created_at_ms"])


def _tiered(ctx: Context, bucket: str, incarnation: str) -> bool:
    """Whether chunks of the bucket's topic are in the store (`{created_at_ms}/`: of that
    incarnation; "": of any)."""
    topic = bucket_topic(ctx.prefix, bucket)
    return ctx.store.holds(s3_bucket(ctx.prefix), f"{chunks.OBJECT_PREFIX}{topic}/{incarnation}")


async def _until_status(call: Callable[[], Awaitable[Answer]], *done: int) -> None:
    """Try again until answered with one of the `done` statuses (a retried create or delete
    that had landed answers 409 or 404)."""
    for _ in range(120):
        if (await call()).status in done:
            return
        await asyncio.sleep(0.5)
    raise AssertionError(f"a bucket or stream create or delete never answered {done}")


async def adapter_kill(ctx: Context) -> None:
    """kill -9 of the adapter owning the busiest slot (every process of it, with `--workers`),
    restarted on the same port (`owner_killed`)."""
    await owner_killed(ctx)


async def owner_killed(ctx: Context, catalog_lost: bool = False) -> None:
    """kill -9 of the adapter owning the busiest slot (every process of it, with `--workers`),
    restarted on the same port; `catalog_lost`: with a catalog folder of its own, empty (its
    catalog rebuilt from the log: it knows only what the state topics say). Before it, `SPREAD`
    more streams each get an idempotent producer of their own for `SPREAD_S`: the kill leaves
    many streams with appends in flight and past their slot's last checkpoint, which the slots'
    new owners must carry forward from the data log (a takeover that changed streams is
    required: `takeovers`, and one whose scan started at a partition's covered offset:
    `covered`), and producers retrying appends whose outcome they never learnt. The streams of
    the killed owner's slots with an append in flight at the kill are noted (`in_flight`)."""
    ctx.needs.update(("takeovers", "covered"))
    load = ctx.load
    for stream in (f"spread{n}" for n in range(SPREAD)):
        await load.create(stream)
        load.spawn(load.producer(stream, f"{stream}.p"))
    await asyncio.sleep(SPREAD_S)
    name = await ctx.owner_of_busy_slot()
    victim = ctx.instances[name]
    split = await until_owned(ctx.session, dict.fromkeys(ctx.worker_urls()))
    held = set().union(*(split[url] for url in victim.worker_urls()))
    killed_at = load.history.now()
    await asyncio.to_thread(victim.kill9)
    await asyncio.sleep(1.0)
    if catalog_lost:
        fresh = victim.log.parent / f"{victim.name}-catalog-lost"
        victim.env = victim.env | {"DURABLE_KAFKA_CATALOG_DIR": str(fresh)}
    victim.start()
    await asyncio.to_thread(victim.wait_ready)
    # Every attempt in flight at the kill answered (or given up) by now.
    await asyncio.sleep(max(0.0, killed_at + REQUEST_TIMEOUT_S - load.history.now()))
    flying = {s for s in in_flight(load.history.writes, killed_at) if _slot(ctx, s) in held}
    ctx.notes["in_flight"] = str(len(flying))


def _slot(ctx: Context, stream: str) -> int:
    """The write slot of a stream of the load (`id`, or `bucket/id`)."""
    bucket, _, stream_id = stream.rpartition("/")
    return slot_of(ctx.prefix, stream_id, bucket or DEFAULT_BUCKET)


async def worker_kill(ctx: Context) -> None:
    """`serve --workers N` only: kill -9 of the one worker owning the busiest slot; its parent
    restarts it (a second later, under the same URL and member id) while its siblings go on
    serving and forwarding to it."""
    name, index = await ctx.busy_slot_owner()
    victim = ctx.instances[name]
    assert victim.workers > 1, "worker_kill needs --workers 2 or more"
    killed = victim.worker_pid(index)
    await asyncio.to_thread(victim.kill_worker, index)
    await asyncio.to_thread(_until, lambda: victim.worker_pid(index) != killed, 30)
    await asyncio.to_thread(victim.wait_ready)


async def adapter_pause(ctx: Context) -> None:
    """The busiest slot's owner SIGSTOPped while the other creates, deletes and starts
    producers through itself, then resumed (a zombie that must catch up, not diverge)."""
    name = await ctx.owner_of_busy_slot()
    other = next(i.name for i in ctx.live() if i.name != name)
    ctx.instances[name].pause()
    ctx.load.spawn(ctx.load.churn(other))
    ctx.load.spawn(ctx.load.producer(BUSY, "p-zombie-window"))
    try:
        await asyncio.sleep(ADAPTER_PAUSED_S)
    finally:
        ctx.instances[name].resume()
    await asyncio.sleep(3.0)


async def peer_partition(ctx: Context) -> None:
    """`b` reachable by Kafka and by its clients, but not by its peers: the address it
    advertises refuses connections for `PARTITIONED_S` (its peers answer writes for its slots
    503 at once, `b` finds its address unreachable and steps aside, its slots move), then
    answers again (`b` joins again)."""
    relay = ctx.relay
    assert relay is not None, "peer_partition needs `b` behind a relay"
    await relay.close()
    try:
        await asyncio.sleep(PARTITIONED_S)
    finally:
        await relay.open()
    await asyncio.sleep(REJOIN_S)


async def sigterm_under_load(ctx: Context) -> None:
    """A clean stop (SIGTERM) of the busiest slot's owner under load, long-polls and SSE open;
    started again once it has exited. Its exit time is noted."""
    victim = ctx.instances[await ctx.owner_of_busy_slot()]
    started = time.monotonic()
    await asyncio.to_thread(victim.stop)
    ctx.notes["exited_after"] = f"{time.monotonic() - started:.1f}s"
    victim.start()
    await asyncio.to_thread(victim.wait_ready)


async def owner_pause_forwarding(ctx: Context) -> None:
    """Three instances: the busiest slot's owner SIGSTOPped past its session while appends are
    forwarded, through the third, to the remaining owner. Their p99 latency before and during
    the pause is noted; the pause must not slow them (at most `SLOWER` times, or 1 s)."""
    split = await until_owned(ctx.session, dict.fromkeys(ctx.worker_urls()))
    paused = await ctx.owner_of_busy_slot()
    owner, through = (i for i in ctx.live() if i.name != paused)
    held = set().union(*(split[url] for url in owner.worker_urls()))  # any of its workers'
    stream = stream_in(ctx.prefix, held, "fwd")
    await ctx.load.create(stream, owner.name)
    before = await _forwarded(ctx, stream, through.name, FORWARD_SAMPLE_S)
    ctx.instances[paused].pause()
    try:
        during = await _forwarded(ctx, stream, through.name, ADAPTER_PAUSED_S)
    finally:
        ctx.instances[paused].resume()
    ctx.notes["forwarded_p99_before"] = f"{p99(before):.3f}s"
    ctx.notes["forwarded_p99_paused"] = f"{p99(during):.3f}s"
    assert p99(during) <= max(1.0, SLOWER * p99(before)), f"forwards slowed: {ctx.notes}"
    await asyncio.sleep(REJOIN_S)


async def _forwarded(ctx: Context, stream: str, through: str, for_s: float) -> list[float]:
    """How long each append to `stream` through `through` took, one after another for `for_s`."""
    took = []
    deadline = time.monotonic() + for_s
    while time.monotonic() < deadline:
        write = await ctx.load.write(stream, ctx.load.fresh(f"{stream}.fwd."), instance=through)
        took.append(write.completed - write.invoked)
    return took


def p99(durations: list[float]) -> float:
    ordered = sorted(durations)
    return ordered[int(0.99 * (len(ordered) - 1))] if ordered else 0.0


async def rolling_restart(ctx: Context) -> None:
    """Every broker stopped (SIGTERM) and started again, one at a time."""
    for node in ctx.cluster.nodes:
        await asyncio.to_thread(cluster.stop_node, ctx.cluster, node.node_id)
        await asyncio.to_thread(cluster.restart_node, ctx.cluster, node.node_id)
        await asyncio.sleep(2.0)


# endtxn_lost: one commit in every N loses its EndTxn reply, the next such its request.
LOSE_COMMIT_EVERY = 10
ENDTXN_S = 12.0
# What an adapter logs when it met a lost commit: learned, or (the broken build) trusted.
UNKNOWN_MET = ("a commit without an answer did commit", "unknown outcome trusted as failed")
COMPACTED = (InternalTopic.META, InternalTopic.PRODUCERS)
# Small enough that a segment rolls every second and the cleaner takes it at its next pass.
COMPACT_NOW = {
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "max.compaction.lag.ms": "1000",
    "delete.retention.ms": "1000",
}
COMPACTION_WAIT_S = 120.0


async def endtxn_lost(ctx: Context) -> None:
    """Both adapters (started with `lose_commit_every`) lose EndTxn replies and requests under
    the load; returns once each has met an unknown outcome."""
    await asyncio.sleep(ENDTXN_S)
    await asyncio.to_thread(_until, lambda: all(_met_unknown(i.log) for i in ctx.live()), 60)


def _met_unknown(log: Path) -> bool:
    text = log.read_text(errors="replace")
    return any(mark in text for mark in UNKNOWN_MET)


async def compaction_restart(ctx: Context) -> None:
    """The meta and producers topics compacted under the load (segments rolled every second,
    cleaned at once), then a full restart: both adapters stopped together, then every broker,
    the brokers started, then the adapters (which replay the compacted topics)."""
    topics = [internal_topic(ctx.prefix, which) for which in COMPACTED]
    await asyncio.to_thread(_alter_configs, ctx.bootstrap, topics, COMPACT_NOW)
    await asyncio.to_thread(_until, lambda: _cleaned(ctx.cluster, topics), COMPACTION_WAIT_S)
    # The adapters' own stop and cold start are part of this fault (the unavailability Kafka's
    # probe does not see): noted, so that the adapter's share is explained by them.
    # Stopped together, as an operator stopping a whole deployment does: one after the other,
    # each would hand its slots to the next, only for it to stop too.
    stopping = time.monotonic()
    await asyncio.gather(*(asyncio.to_thread(instance.stop) for instance in ctx.live()))
    ctx.notes["adapters_stopped_in"] = f"{time.monotonic() - stopping:.1f}s"
    # All together: the last of three stopped one by one has no quorum to shut down with.
    nodes = ctx.cluster.nodes
    await asyncio.gather(
        *(asyncio.to_thread(cluster.stop_node, ctx.cluster, n.node_id) for n in nodes)
    )
    await asyncio.to_thread(_until, lambda: not any(map(_listening, nodes)), 60)
    await asyncio.to_thread(cluster.start_cluster, ctx.cluster.home)
    brokers_up = time.monotonic()
    for instance in ctx.live():
        instance.start()
    for instance in ctx.live():
        await asyncio.to_thread(instance.wait_ready)
    ctx.notes["adapters_ready_after_brokers"] = f"{time.monotonic() - brokers_up:.1f}s"


def _listening(node: kafka.KafkaNode) -> bool:
    return port_open("127.0.0.1", node.port) or port_open("127.0.0.1", node.controller_port)


def _alter_configs(bootstrap: str, topics: list[str], configs: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        for name, value in configs.items()
    ]
    resources = [
        ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries) for topic in topics
    ]
    for future in admin.incremental_alter_configs(resources).values():
        future.result(timeout=30)


def _cleaned(layout: cluster.KafkaCluster, topics: list[str]) -> bool:
    """Whether the log cleaner of some broker has cleaned each topic past offset 0 (its
    `cleaner-offset-checkpoint`: a version line, a count line, then `topic partition offset`)."""
    cleaned: set[str] = set()
    for node in layout.nodes:
        checkpoint = node.home / "logs" / "cleaner-offset-checkpoint"
        lines = checkpoint.read_text().splitlines()[2:] if checkpoint.exists() else []
        for line in lines:
            topic, _, offset = line.split()
            if topic in topics and int(offset) > 0:
                cleaned.add(topic)
    return cleaned == set(topics)


def _until(done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:.0f}s: {done}")
        time.sleep(1.0)


ALL: dict[str, Fault] = {
    "leader_kill": leader_kill,
    "coordinator_kill": coordinator_kill,
    "broker_pause": broker_pause,
    "adapter_kill": adapter_kill,
    "adapter_pause": adapter_pause,
    "worker_kill": worker_kill,
    "rolling_restart": rolling_restart,
    "endtxn_lost": endtxn_lost,
    "compaction_restart": compaction_restart,
    "s3_kill": s3_kill,
    "s3_pause": s3_pause,
    "bucket_recreate": bucket_recreate,
    "broker_flap": broker_flap,
    "peer_partition": peer_partition,
    "owner_pause_forwarding": owner_pause_forwarding,
    "sigterm_under_load": sigterm_under_load,
}
# Faults that need a third instance under test, or `b` behind a relay it advertises.
THREE = ("owner_pause_forwarding",)
RELAYED = ("peer_partition",)
# Settings of the two adapters under test that a fault needs from their start.
ENV: dict[str, dict[str, str]] = {
    "endtxn_lost": fault_env(lose_commit_every=LOSE_COMMIT_EVERY),
}
# Faults that only an instance of several workers can have: left out of a full run without.
NEEDS_WORKERS = ("worker_kill",)
# The bounded run of `make test`: a partition leader, a killed owner and a zombie.
BOUNDED = ("leader_kill", "adapter_kill", "adapter_pause")
