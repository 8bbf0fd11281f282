"""The faults, one per scenario; each returns once the system had the chance to recover."""

from __future__ import annotations

import asyncio

from devstack import cluster
from tests.cluster import slot_of
from tests.faults.runner import BUSY, Context, Fault
from topology.naming import writer_transactional_id

DOWN_S = 8.0
# Past the brokers' default broker.session.timeout.ms (9 s): the controller fences the node.
PAUSED_S = 14.0
# Past the owners' session timeout (6 s in tests/cluster.py): the slots move.
ADAPTER_PAUSED_S = 12.0


async def _kill_and_restart(ctx: Context, node_id: int) -> None:
    await asyncio.to_thread(cluster.kill_node, ctx.cluster, node_id)
    await asyncio.sleep(DOWN_S)
    await asyncio.to_thread(cluster.restart_node, ctx.cluster, node_id)


async def leader_kill(ctx: Context) -> None:
    """kill -9 of the broker leading the busiest stream's partition, restarted after 8 s."""
    topic, partition = ctx.busy_partition()
    leader = await asyncio.to_thread(cluster.partition_leader, ctx.bootstrap, topic, partition)
    await _kill_and_restart(ctx, leader)


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


async def adapter_kill(ctx: Context) -> None:
    """kill -9 of the adapter owning the busiest slot, restarted on the same port."""
    victim = ctx.instances[await ctx.owner_of_busy_slot()]
    await asyncio.to_thread(victim.kill9)
    await asyncio.sleep(1.0)
    victim.start()
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


async def rolling_restart(ctx: Context) -> None:
    """Every broker stopped (SIGTERM) and started again, one at a time."""
    for node in ctx.cluster.nodes:
        await asyncio.to_thread(cluster.stop_node, ctx.cluster, node.node_id)
        await asyncio.to_thread(cluster.restart_node, ctx.cluster, node.node_id)
        await asyncio.sleep(2.0)


ALL: dict[str, Fault] = {
    "leader_kill": leader_kill,
    "coordinator_kill": coordinator_kill,
    "broker_pause": broker_pause,
    "adapter_kill": adapter_kill,
    "adapter_pause": adapter_pause,
    "rolling_restart": rolling_restart,
}
# The bounded run of `make test`: a broker, an adapter and a zombie.
BOUNDED = ("leader_kill", "adapter_kill", "adapter_pause")
