"""The storage node's gauges and counters for Prometheus (decision 0033): under-replicated
partitions, ISR shrinks and expands, partition and leader counts, log size and end offset per
replica, the producer ids with state on this node (Kafka's ReplicaManager and Log metrics) and
the connections accepted on the zero-copy port, and the direct port's connections, grants and
bytes (decision 0047). Read on the event loop at scrape time, so the
produce and fetch paths pay nothing for them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Protocol

from prometheus_client.core import Metric

from riverlog.common.cluster.image import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from riverlog.common.metrics import endpoint
from riverlog.common.metrics.endpoint import LoopCollector, family

from .grants import GrantLedger
from .replica.fetch import FetchHandler
from .replica.replica_manager import ReplicaManager

# Written by the coordinators under their own producer ids: not clients' producers.
_COORDINATOR_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})

NAMES = (
    "riverlog_under_replicated_partitions",
    "riverlog_isr_shrinks",
    "riverlog_isr_expands",
    "riverlog_partitions",
    "riverlog_leader_partitions",
    "riverlog_log_size_bytes",
    "riverlog_log_end_offset",
    "riverlog_producer_ids",
    "riverlog_consumer_fetches",
    "riverlog_zero_copy_connections",
)
# The direct port's families (served when the node has a direct-access key).
DIRECT_NAMES = (
    "riverlog_direct_connections",
    "riverlog_direct_grants",
    "riverlog_direct_bytes",
    "riverlog_direct_budget_refusals",
    "riverlog_direct_connections_closed",
)
# Tiered storage's families (served when remote.log.storage.system.enable).
TIERED_NAMES = (
    "riverlog_remote_copy_bytes",
    "riverlog_remote_copy_lag_bytes",
    "riverlog_remote_log_size_bytes",
    "riverlog_remote_fetch_requests",
    "riverlog_remote_cache_lookups",
)


class DirectPort(Protocol):
    """What the direct families read (rpc/zerocopy.py's server in grant mode)."""

    @property
    def accepted(self) -> int: ...
    @property
    def grants(self) -> GrantLedger | None: ...
    @property
    def closed(self) -> Mapping[str, int]: ...


def direct_snapshot(node_id: int, port: DirectPort | None) -> list[Metric]:
    """The direct port's families (event loop only); empty without a direct port."""
    connections, grants, sent, refusals, closed = (family(n) for n in DIRECT_NAMES)
    ledger = port.grants if port is not None else None
    if port is None or ledger is None:
        return []
    node = str(node_id)
    connections.add_metric([node], port.accepted)
    grants.add_metric([node, "accepted"], ledger.accepted)
    grants.add_metric([node, "refused"], ledger.refused)
    sent.add_metric([node, "read"], ledger.bytes_read)
    sent.add_metric([node, "write"], ledger.bytes_written)
    refusals.add_metric([node], ledger.exhausted)
    for reason, count in port.closed.items():
        closed.add_metric([node, reason], count)
    return [connections, grants, sent, refusals, closed]


class TieringStats(Protocol):
    """What the tiered families read (remote/follow.py's TieringFollower)."""

    @property
    def bytes_copied(self) -> int: ...
    @property
    def remote_reads(self) -> int: ...
    @property
    def cache_hits(self) -> int: ...
    @property
    def cache_misses(self) -> int: ...


def snapshot(
    replicas: ReplicaManager,
    fetches: FetchHandler | None = None,
    zero_copy_accepted: Callable[[], int] | None = None,
) -> list[Metric]:
    """The families, from the replica manager's state now (event loop only)."""
    node = str(replicas.node_id)
    urp, shrinks, expands, count, leaders, size, end, producers, served, connections = (
        family(n) for n in NAMES
    )
    partitions = list(replicas.partitions.values())
    urp.add_metric([node], replicas.under_replicated_partitions)
    shrinks.add_metric([node], replicas.isr_shrinks)
    expands.add_metric([node], replicas.isr_expands)
    count.add_metric([node], len(partitions))
    leaders.add_metric([node], sum(1 for p in partitions if p.is_leader))
    producer_ids = 0
    for p in partitions:
        labels = [node, p.tp.topic, str(p.tp.partition)]
        size.add_metric(labels, p.log.size_bytes)
        end.add_metric(labels, p.log.log_end_offset)
        if p.tp.topic not in _COORDINATOR_TOPICS:
            producer_ids += len(p.producer_state.producers)
    producers.add_metric([node], producer_ids)
    if fetches is not None:
        for (tp, as_leader), n in fetches.consumer_fetches.items():
            role = "leader" if as_leader else "follower"
            served.add_metric([node, tp.topic, str(tp.partition), role], n)
    if zero_copy_accepted is not None:
        connections.add_metric([node], zero_copy_accepted())
    return [urp, shrinks, expands, count, leaders, size, end, producers, served, connections]


def tiered_snapshot(replicas: ReplicaManager, stats: TieringStats) -> list[Metric]:
    """Tiered storage's families (event loop only)."""
    node = str(replicas.node_id)
    copied, lag, remote, reads, cache = (family(n) for n in TIERED_NAMES)
    copied.add_metric([node], stats.bytes_copied)
    reads.add_metric([node], stats.remote_reads)
    cache.add_metric([node, "hit"], stats.cache_hits)
    cache.add_metric([node, "miss"], stats.cache_misses)
    for p in replicas.partitions.values():
        log = p.log
        if not log.remote_storage_enabled:
            continue
        labels = [node, p.tp.topic, str(p.tp.partition)]
        remote.add_metric(labels, log.remote_size_bytes)
        if p.is_leader:
            done = log.copied_next_offset if log.copied_next_offset is not None else -1
            closed = log.segments[:-1]
            lag.add_metric(labels, sum(s.size for s in closed if s.next_offset > done))
    return [copied, lag, remote, reads, cache]


def register_prometheus_metrics(
    replicas: ReplicaManager,
    fetches: FetchHandler | None = None,
    tiering: TieringStats | None = None,
    zero_copy_accepted: Callable[[], int] | None = None,
    direct_port: Callable[[], DirectPort | None] | None = None,
) -> None:
    """Serve the families on `/metrics` (no-op when this process serves none).
    `zero_copy_accepted`: the zero-copy server's connection count, read at scrape time (the
    server starts after the metrics are registered); `direct_port` the same for the direct
    port's server."""
    if not endpoint.enabled():
        return
    loop = asyncio.get_running_loop()
    endpoint.register(
        "storage",
        LoopCollector(loop, NAMES, lambda: snapshot(replicas, fetches, zero_copy_accepted)),
    )
    if direct_port is not None:
        port = direct_port
        endpoint.register(
            "storage-direct",
            LoopCollector(loop, DIRECT_NAMES, lambda: direct_snapshot(replicas.node_id, port())),
        )
    if tiering is not None:
        stats = tiering
        endpoint.register(
            "storage-tiering",
            LoopCollector(loop, TIERED_NAMES, lambda: tiered_snapshot(replicas, stats)),
        )
