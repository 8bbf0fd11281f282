"""How many replicas our topics get: `auto` resolved from the cluster's broker count at start,
and no unreplicated topics on a cluster that could replicate them unless allowed."""

from __future__ import annotations

from dataclasses import dataclass

from topology.errors import TopologyError

AUTO = 0  # the settings' value for "resolve from the broker count"
# What a cluster of 3 brokers or more allows: an acknowledged append survives losing a broker.
DURABLE_BROKERS = 3
DURABLE_REPLICATION_FACTOR = 3
DURABLE_MIN_INSYNC_REPLICAS = 2


class ReplicationRefused(TopologyError):
    """The configured replication cannot or must not be used on this cluster."""


@dataclass(frozen=True)
class Replication:
    replication_factor: int  # AUTO or an explicit count
    min_insync_replicas: int  # AUTO or an explicit count
    allow_unreplicated: bool = False


def resolve(brokers: int, wanted: Replication) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) for a cluster of `brokers`.

    `auto`: 3 and 2 on 3 brokers or more, else as many replicas as brokers with 1 in sync (a
    single-broker dev stack gets 1 and 1). ReplicationRefused for an explicit factor of 1 on a
    cluster of 3 or more without `allow_unreplicated` (one disk lost would lose acknowledged
    appends), and for more replicas in sync than there are replicas.
    """
    rf = wanted.replication_factor or min(max(brokers, 1), DURABLE_REPLICATION_FACTOR)
    isr = wanted.min_insync_replicas or _insync_for(rf)
    if rf == 1 and brokers >= DURABLE_BROKERS and not wanted.allow_unreplicated:
        raise ReplicationRefused(
            f"replication_factor=1 on a cluster of {brokers} brokers: one broker lost loses"
            " acknowledged appends; leave replication_factor unset (auto: 3) or set"
            " allow_unreplicated = true"
        )
    if isr > rf:
        raise ReplicationRefused(
            f"min_insync_replicas={isr} is more than replication_factor={rf} (on a cluster of"
            f" {brokers} brokers): no write could ever be acknowledged"
        )
    return rf, isr


def _insync_for(rf: int) -> int:
    return DURABLE_MIN_INSYNC_REPLICAS if rf >= DURABLE_REPLICATION_FACTOR else 1
